"""Every agent plays seats: IMPALA (V-trace) and Rainbow (prioritized n-step replay) train on
tic-tac-toe's mixture of self-play and scripted opponents through the trainer, evaluate with
win/draw/loss rates, and their policies never choose an illegal move."""

import json
import os

import jax
import numpy as np
import pytest

from jaxrl_dist.checkpoints.policy import load_policy
from jaxrl_dist.config.cli import load_config
from jaxrl_dist.run.trainer import Trainer

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.mark.parametrize("algorithm", ["impala", "rainbow"])
def test_an_agent_trains_on_seats_and_never_chooses_an_illegal_move(algorithm, tmp_path):
    config = load_config(
        os.path.join(ROOT, "configs", f"{algorithm}_tictactoe.py:quick"), total_env_steps=3_000
    )
    workdir = str(tmp_path / "run")
    summary = Trainer(config, workdir, quiet=True).run().summary
    assert summary["stop_reason"] == "total_env_steps reached"
    with open(os.path.join(workdir, "metrics.jsonl")) as f:
        records = [json.loads(line) for line in f]
    assert any("losses/loss" in r and np.isfinite(r["losses/loss"]) for r in records)
    final = summary["evals"][-1]
    assert final["win_rate"] + final["draw_rate"] + final["loss_rate"] == pytest.approx(1.0)
    policy = load_policy(workdir)
    rng = np.random.default_rng(0)
    mask = np.zeros((64, 9), bool)
    for row in range(64):  # one or two legal cells
        mask[row, rng.choice(9, rng.integers(1, 3), replace=False)] = True
    view = rng.integers(0, 2, (64, 3, 3, 2)).astype(np.int8)
    for greedy, key in ((True, None), (False, jax.random.PRNGKey(0))):
        action = policy.act(view, greedy=greedy, key=key, action_mask=mask)
        assert mask[np.arange(64), action].all()


def test_connect_four_trains_and_evaluates_against_the_heuristic(tmp_path):
    """`rainbow_connect_four:quick`, which reads `ppo_connect_four:quick`'s seats (PPO on seats
    is the same code as on tic-tac-toe, tested in `test_board_games.py`)."""
    config = load_config(
        os.path.join(ROOT, "configs", "rainbow_connect_four.py:quick"), total_env_steps=2_000
    )
    assert config.seats.eval_opponent == "heuristic"
    summary = Trainer(config, str(tmp_path / "run"), quiet=True).run().summary
    assert summary["stop_reason"] == "total_env_steps reached"
    final = summary["evals"][-1]
    assert final["episodes"] == config.eval_episodes
    assert final["win_rate"] + final["draw_rate"] + final["loss_rate"] == pytest.approx(1.0)
    assert 7 <= final["length"] <= 42  # a connect-four game lasts 7 to 42 moves
