"""Synchronous collection with stragglers (issue 20, pytorchrl's `sync` collection and
`fraction_samples`): lag 0 on both actor loops, an update going ahead without a straggler
within `max_policy_lag`, and the refusals, each with its reason."""

from __future__ import annotations

import json
import os

import pytest
from train_runs import jsonl_records as _records

from jaxrl_dist.config import ConfigError
from jaxrl_dist.config.cli import load_config
from jaxrl_dist.tools.train_cli import make_trainer

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
QUICK = os.path.join(ROOT, "configs", "impala_cartpole.py") + ":quick"
TICTACTOE = os.path.join(ROOT, "configs", "ppo_tictactoe.py") + ":quick"
SMALL = {"checkpoint_every_updates": 0, "stop_at_eval_return": None, "log_every_updates": 5}

SYNC = {
    **SMALL,
    "sebulba.async_envs": False,
    "sebulba.sync_collection": True,
    "sebulba.num_actor_threads": 2,
    "sebulba.envs_per_actor": 4,
    "eval_every_updates": 0,
    "log_every_updates": 1,
}


def _policy_lags(run_dir) -> list[float]:
    """Every logged update window's policy lag."""
    records = _records(str(run_dir), "metrics.jsonl")
    return [r["stats/policy_lag"] for r in records if "stats/policy_lag" in r]


@pytest.mark.parametrize("loop", ["python", "xla"])
def test_sync_collection_acts_every_unroll_with_the_newest_params(tmp_path, loop):
    """fraction_samples=1: every update waits for one unroll of every actor, each acted with
    the params of the update before: the policy lag of every batch is 0 (both actor loops)."""
    cfg = load_config(
        QUICK,
        **{**SYNC, "batch_size": 8, "total_env_steps": 8 * 20 * 15, "sebulba.actor_loop": loop},
    )
    make_trainer(cfg, str(tmp_path / "run"), quiet=True).run()
    lags = _policy_lags(tmp_path / "run")
    assert len(lags) >= 10 and max(lags) == 0.0


def test_fraction_samples_goes_ahead_without_stragglers(tmp_path):
    """fraction_samples=0.5 of 2 actors: an update takes the first actor's unroll; the
    other's joins a later batch or, older than max_policy_lag, is dropped and counted."""
    cfg = load_config(
        QUICK,
        **{
            **SYNC,
            "sebulba.fraction_samples": 0.5,
            "batch_size": 4,
            "sebulba.max_policy_lag": 1,
            "total_env_steps": 4 * 20 * 30,
        },
    )
    make_trainer(cfg, str(tmp_path / "run"), quiet=True).run()
    lines = [r for r in _records(str(tmp_path / "run"), "metrics.jsonl") if "stats/policy_lag" in r]
    assert len(lines) >= 20
    assert max(r["stats/policy_lag"] for r in lines) <= 1.0
    assert any(r["stats/policy_lag"] > 0 for r in lines)  # late unrolls were used
    # Both actors deliver an unroll per update and an update takes one: the surplus ages past
    # max_policy_lag and is dropped (synchronous actors make this certain).
    summary = json.load(open(tmp_path / "run" / "summary.json"))
    assert summary["dropped_rollouts"] > 0
    assert summary["dropped_rollouts"] >= lines[-1]["stats/dropped_rollouts"]


def test_sync_collection_refusals():
    with pytest.raises(ConfigError, match="sync_collection=True"):
        load_config(QUICK, **{"sebulba.fraction_samples": 0.5})
    cfg = load_config(
        QUICK,
        **{**SYNC, "sebulba.fraction_samples": 0.5, "batch_size": 8, "sebulba.max_policy_lag": 1},
    )
    assert "fix it with config.batch_size=4" in cfg.collected_batch_problem(1)
    with pytest.raises(ConfigError, match="async_envs"):
        load_config(QUICK, **{"sebulba.sync_collection": True}, batch_size=16)
    with pytest.raises(ConfigError, match="max_policy_lag"):  # late unrolls would pile up
        load_config(QUICK, **{**SYNC, "sebulba.fraction_samples": 0.5, "batch_size": 4})
    from jaxrl_dist.data import flows

    rainbow = load_config(
        os.path.join(ROOT, "configs", "rainbow_cartpole.py"),
        **{"sebulba.sync_collection": True, "sebulba.async_envs": False},
    )
    assert "sampled, not collected" in flows.get("prioritized").host_problem(rainbow)
    # Seats: self-play cannot end every stream's unroll together (its seats move in turn).
    sync = {"sebulba.sync_collection": True, "sebulba.async_envs": False}
    with pytest.raises(ConfigError, match=r"seats one learner twice, \('learner', 'learner'\)"):
        load_config(TICTACTOE, **sync)


def test_sync_collection_in_seats_against_other_players(tmp_path):
    """Seats against a scripted player and the learner's own snapshots: a learner seat moves
    only at its turns, so a stream's unroll fills apart from the others'; a full one waits,
    its game paused, while the others play on (`actor.UnrollGate`), and every update's batch
    was acted with the params of the update before (lag 0). Without the gate, streams act on
    into their next unroll with the old params (lag up to 0.52 here)."""
    cfg = load_config(
        TICTACTOE,
        **{
            **SYNC,
            "sebulba.envs_per_actor": 6,
            "seats.games": (("learner", "heuristic"), ("pool", "learner")),
            "seats.pool_every_updates": 5,
            "batch_size": 12,
            "total_env_steps": 12 * 16 * 30,
        },
    )
    make_trainer(cfg, str(tmp_path / "run"), quiet=True).run()
    lags = _policy_lags(tmp_path / "run")
    assert len(lags) >= 25 and max(lags) == 0.0
