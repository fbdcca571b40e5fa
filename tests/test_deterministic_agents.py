"""Deterministic mode with several agents on Sebulba (issue 57, item 3): each agent's actors act
in lockstep rounds, the other agents moving in their games with their params of the same round
(`acting/params_store.py: RoundParams`) and the pools drawn by round (`OpponentPool.draw`); the
learners step in one order the seed alone sets (`sebulba/lane_reads.py`), and a checkpoint keeps
each agent's rounds of the epoch and env actions, so a resumed run replays the others' moves
too (`sebulba/agent_lockstep.py`)."""

import threading

import jax
import numpy as np
import pytest
from train_runs import interrupted_run

from jaxrl_dist.acting.params_store import ActingStopped, RoundParams
from jaxrl_dist.config.cli import load_config
from jaxrl_dist.run.trainer import Trainer

LOCKSTEP = {
    "deterministic": True,
    "sebulba.async_envs": False,
    "sebulba.env_epoch_updates": 4,
    "checkpoint_every_updates": 3,
}
# Rainbow (a replay agent: several updates a round) and PPO seated against each other, scripted
# players, their own pools and PPO against Rainbow's (a league across agents), snapshots every
# 2 updates, the newest 2 drawn by PFSP, with random openings, two actors each; Rainbow's replay
# saved, so a resume is exact.
SEATED = {
    **LOCKSTEP,
    "total_env_steps": 8000,
    "sebulba.num_actor_threads": 2,
    "sebulba.envs_per_actor": 8,
    "seats.games": (
        ("rb", "ppo"),
        ("ppo", "rb"),
        ("rb", "heuristic"),
        ("random", "ppo"),
        ("rb", "pool:rb"),
        ("ppo", "pool:rb"),
        ("pool:ppo", "ppo"),
    ),
    "seats.opening_plies": 2,
    "seats.pool_every_updates": 2,
    "seats.pool_capacity": 2,
    "agents.rb.replay.save": True,
}
# Two PPO agents in each env's two slots (simultaneous moves), four env epochs.
SLOTS = {**LOCKSTEP, "total_env_steps": 16000, "batch_size": 32}


def _run(config: str, overrides: dict, workdir: str, **kwargs) -> dict:
    return Trainer(load_config(config, **overrides), workdir, quiet=True, **kwargs).run().summary


def _agents(summary: dict) -> dict:
    return {name: (a["updates"], a["params_sha256"]) for name, a in summary["agents"].items()}


@pytest.fixture(scope="module")
def seated(tmp_path_factory):
    workdir = str(tmp_path_factory.mktemp("seated") / "run")
    return _agents(_run("configs/two_agents_tictactoe.py:quick", SEATED, workdir))


def test_two_seated_agents_depend_only_on_the_seed(seated, tmp_path):
    again = _run("configs/two_agents_tictactoe.py:quick", SEATED, str(tmp_path / "again"))
    assert _agents(again) == seated
    assert seated["rb"][0] > seated["ppo"][0] > 4  # past the first env epoch


def test_two_seated_agents_resumed_end_as_the_whole_run(seated, tmp_path):
    """Stopped mid-run and resumed: each agent's actors replay its epoch's actions, the other
    agent moving with its saved params of each round, and both agents end as the whole run."""
    cut = str(tmp_path / "cut")
    config = load_config("configs/two_agents_tictactoe.py:quick", **SEATED)
    assert 0 < interrupted_run(config, cut, 4800).updates < sum(u for u, _ in seated.values())
    resumed = _run("configs/two_agents_tictactoe.py:quick", SEATED, cut, resume=True)
    assert _agents(resumed) == seated


def test_two_agents_in_slots_resumed_end_as_the_whole_run(tmp_path):
    """Foraging's two slots, an agent each: cut in the third env epoch and resumed."""
    whole = _run("configs/two_agents_foraging.py:quick", SLOTS, str(tmp_path / "whole"))
    cut = str(tmp_path / "cut")
    config = load_config("configs/two_agents_foraging.py:quick", **SLOTS)
    assert interrupted_run(config, cut, 9600).updates == 10  # 5 each: round 4 replayed
    resumed = _run("configs/two_agents_foraging.py:quick", SLOTS, cut, resume=True)
    assert _agents(resumed) == _agents(whole)
    assert whole["agents"]["a"]["updates"] == 8


def test_round_params_keep_the_epoch_an_actor_may_replay():
    """Kept: the rounds from the epoch of the round before the newest (an actor playing the
    agent is at most one round behind it); a waiting actor stops with its run."""
    rounds, stop = RoundParams(epoch_updates=4), threading.Event()
    for r in range(10):
        rounds.record(r, {"w": np.full(2, r, np.float32)})
    assert sorted(rounds.to_arrays()) == [f"{r}/w" for r in (8, 9)]
    rounds.record(10, {"w": np.full(2, 10, np.float32)})
    assert [int(rounds.get(r, stop)["w"][0]) for r in (8, 9, 10)] == [8, 9, 10]
    again = RoundParams(epoch_updates=4)
    again.restore_arrays(rounds.to_arrays(), {"w": jax.numpy.zeros(2)})
    np.testing.assert_array_equal(again.get(9, stop)["w"], [9, 9])
    stop.set()
    with pytest.raises(ActingStopped):
        again.get(11, stop)
