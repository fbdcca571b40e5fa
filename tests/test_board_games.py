"""Turn-based games through the real trainer: `configs/ppo_tictactoe.py:quick` (self-play and
games against random in one pool, masked PPO), evaluated against random in each seat with win,
draw and loss rates; its policy through `load_policy` (masks) and `scripts/evaluate.py` (a named
opponent); bad seat settings refused before anything is written."""

import json
import os

import numpy as np
import pytest
from cli_refusal import assert_refused

import jaxrl_dist
from jaxrl_dist.checkpoints.policy import load_policy
from jaxrl_dist.config.cli import load_config
from jaxrl_dist.envs import games
from jaxrl_dist.run.trainer import Trainer
from jaxrl_dist.tools import evaluate_cli
from jaxrl_dist.types import ACTION_MASK, AGENT_VIEW

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONFIG = os.path.join(ROOT, "configs", "ppo_tictactoe.py")


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """`ppo_tictactoe:quick`, shared by the tests that read it: its work dir and summary."""
    workdir = str(tmp_path_factory.mktemp("tictactoe") / "run")
    config = load_config(CONFIG + ":quick", checkpoint_every_updates=100)
    return workdir, Trainer(config, workdir, quiet=True).run().summary


def test_tictactoe_quick_trains_on_seats_and_evaluates_against_random(run):
    workdir, summary = run
    assert summary["stop_reason"] == "total_env_steps reached"
    with open(os.path.join(workdir, "metrics.jsonl")) as f:
        records = [json.loads(line) for line in f]
    (final,) = [r for r in records if "eval/greedy_win_rate" in r]
    rates = [final[f"eval/greedy_{k}_rate"] for k in ("win", "draw", "loss")]
    assert sum(rates) == pytest.approx(1.0)
    assert final["eval/greedy_return"] == pytest.approx(rates[0] - rates[2])
    assert {"eval/greedy_return_seat0", "eval/greedy_return_seat1"} <= set(final)
    assert 5 <= final["eval/greedy_length"] <= 9
    (entry,) = summary["evals"]  # the summary keeps the rates, game length and game count too
    assert (
        entry["win_rate"] == rates[0] and entry["return_seat1"] == final["eval/greedy_return_seat1"]
    )
    assert entry["length"] == final["eval/greedy_length"]
    assert entry["episodes"] == load_config(CONFIG + ":quick").eval_episodes
    trained = [r for r in records if "losses/loss" in r]
    assert trained and all(abs(r["charts/episode_return"]) <= 1 for r in trained)


def test_its_policy_never_plays_an_illegal_move_and_evaluates_against_perfect_play(run, tmp_path):
    workdir, _ = run
    policy = load_policy(workdir)
    rng = np.random.default_rng(0)
    view = np.zeros((64, 3, 3, 2), np.int8)
    mask = np.zeros((64, 9), bool)
    for row in range(64):  # one or two empty cells: most moves are illegal
        mask[row, rng.choice(9, rng.integers(1, 3), replace=False)] = True
    action = policy.act(view, action_mask=mask)
    assert mask[np.arange(64), action].all()
    np.testing.assert_array_equal(policy.act({AGENT_VIEW: view, ACTION_MASK: mask}), action)
    out = str(tmp_path / "eval.json")
    argv = [workdir, "--episodes", "6", "--opponent", "perfect", "--json", out]
    assert evaluate_cli.main(argv) == 0
    with open(out) as f:
        record = json.load(f)
    assert record["episodes"] == 6 and record["win_rate"] == 0.0  # perfect play never loses
    assert record["return"] == pytest.approx(-record["loss_rate"])
    exact = games.tictactoe_exact_losses(lambda v, m: policy.act(v, action_mask=m))
    assert [record["exact_loss_first"], record["exact_loss_second"]] == list(exact)
    assert record["exact_loss_rate"] == pytest.approx(sum(exact) / 2)
    assert evaluate_cli.main([workdir, "--opponent", "bogus"]) == evaluate_cli.EXIT_BAD_INPUT

    # The Python call the script made: the same games, with each one's seat.
    result = jaxrl_dist.evaluate(workdir, 6, opponent="perfect")
    assert result.returns.tolist() == record["returns"] and result.seats.tolist() == [0, 1] * 3
    assert result.seat_returns == {s: record[f"return_seat{s}"] for s in (0, 1)}
    # A rerun plays the same games, a random opponent's too: its draws follow the game order,
    # not the order EnvPool's threads finish in.
    twice = [jaxrl_dist.evaluate(workdir, 8, opponent="random").returns for _ in range(2)]
    np.testing.assert_array_equal(*twice)
    with pytest.raises(ValueError, match="envs=3: give a multiple of 2"):
        jaxrl_dist.evaluate(workdir, 8, opponent="random", envs=3)
    # Eight games on two envs: env e's four in seat e, each 5 to 9 moves.
    fewer = jaxrl_dist.evaluate(workdir, 8, opponent="random", envs=2)
    assert (
        fewer.seats.tolist() == [0, 1] * 4 and 5 <= fewer.lengths.min() <= fewer.lengths.max() <= 9
    )


def test_a_checkpoint_is_a_named_opponent_in_evaluate_and_in_training(run, tmp_path):
    """The run's own greedy policy against itself plays one game whoever moves first (every
    game the same length); a run evaluating against it trains and logs it."""
    workdir, _ = run
    out = str(tmp_path / "self.json")
    argv = [
        workdir,
        "--episodes",
        "12",
        "--opponent",
        f"checkpoint:{workdir}@latest",
        "--json",
        out,
    ]
    assert evaluate_cli.main(argv) == 0
    with open(out) as f:
        record = json.load(f)
    assert record["opponent"] == f"checkpoint:{workdir}@latest"
    # One game, won by whoever EnvPool lets move first (or drawn): same length, same |return|.
    assert len(set(record["lengths"])) == 1
    assert len({abs(r) for (r,) in record["returns"]}) == 1
    overrides = {
        "seats.eval_opponent": f"checkpoint:{workdir}",
        "eval_every_updates": 4,
        "total_env_steps": 2_000,
    }
    config = load_config(CONFIG + ":quick", **overrides)
    summary = Trainer(config, str(tmp_path / "vs_checkpoint"), quiet=True).run().summary
    assert summary["evals"] and {"win_rate", "draw_rate", "loss_rate"} <= set(summary["evals"][-1])
    bad = [workdir, "--opponent", f"checkpoint:{tmp_path}/nothing"]
    assert evaluate_cli.main(bad) == evaluate_cli.EXIT_BAD_INPUT


BAD = [
    (["--config.seats.games=()"], "is a 2-player turn-based game: say who plays each seat"),
    (["--config.env_id=CartPole-v1"], "config.seats.games is set but config.env_id='CartPole-v1'"),
    (["--config.seats.games=(('learner','random','random'),)"], "gives 3 seats a game"),
    (["--config.seats.games=(('learner','bot'),)"], "names unknown roles ['bot']"),
    (["--config.seats.games=(('random','random'),)"], "without the learner"),
    (["--config.seats.exploration_mask=(False,True)"], "makes seat 0 greedy, but the learner"),
    (["--config.seats.learning_mask=(True,)"], "must give one bool per seat (2) or be empty"),
    (["--config.seats.pool_sampling=best"], "config.seats.pool_sampling='best' must be one of"),
    (
        ["--config.seats.eval_opponent=perfect", "--config.env_id=ConnectFour-v1"],
        "config.seats: the 'perfect' player knows only ['TicTacToe-v1'], not ConnectFour-v1",
    ),
    (
        ["--config.env_id=Othello-v1", "--config.seats.games=(('learner','heuristic'),)"],
        "the 'heuristic' player knows only",
    ),
    (
        ["--config.seats.eval_opponent=checkpoint:/no/such/run"],
        "config.seats: opponent 'checkpoint:/no/such/run': '/no/such/run' is not a directory",
    ),
    (["--config.seats.eval_opponent=pool:latest"], "or checkpoint:PATH[@STEP]"),
    (["--config.seats.opening_plies=-1"], "config.seats.opening_plies=-1 must be >= 0"),
    (["--config.eval_envs=3"], "config.eval_envs=3 must be a multiple of 2 for a 2-player game"),
    (
        [
            "--config.deterministic=true",
            "--config.sebulba.async_envs=false",
        ],
        "deterministic=True cannot take a game that seats one learner twice on Sebulba",
    ),
]


@pytest.mark.parametrize(("overrides", "needle"), BAD)
def test_bad_seats_are_one_line_exit_2_nothing_written(tmp_path, capsys, overrides, needle):
    assert_refused(CONFIG + ":quick", overrides, needle, tmp_path, capsys)
