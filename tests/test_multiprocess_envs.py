"""Python envs stepped in worker processes (`gymnasium:ID`, `pettingzoo:module:factory`) on
Sebulba over 2 processes joined by `jax.distributed` (1 fake CPU device each), with the tests'
own envs (`own_envs.py`): each process's actors start their own workers, and every update
learns from both processes' rows (`record_updates.py`).

A gymnasium corridor in deterministic mode ends where the same run in one process (its two
actors in one process) ends. PettingZoo's AEC game goes onto the seats, which deterministic
mode refuses: its run is checked by what each update learned from."""

import json
import os
import sys

import jax
import numpy as np
from own_envs import CORRIDOR_ID, NIM_ID
from train_runs import ROOT, train_main

from jaxrl_dist.checkpoints.store import restore_params

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from record_updates import read_records, run_two_processes  # noqa: E402

PPO = os.path.join(ROOT, "configs", "ppo_cartpole.py")
TICTACTOE_PPO = os.path.join(ROOT, "configs", "ppo_tictactoe.py:quick")
UPDATES, BATCH, UNROLL = 4, 8, 16  # one actor of 4 envs per process, an unroll of each a batch
DETERMINISTIC = [
    f"--config.env_id={CORRIDOR_ID}",
    "--config.deterministic=true",
    "--config.sebulba.async_envs=false",
    "--config.sebulba.envs_per_actor=4",
    f"--config.batch_size={BATCH}",
    f"--config.unroll_length={UNROLL}",
    f"--config.total_env_steps={UPDATES * BATCH * UNROLL}",
    "--config.sebulba.env_epoch_updates=4",
    "--config.eval_every_updates=0",
    "--config.eval_episodes=2",
    "--config.checkpoint_every_updates=0",
    "--config.log_every_updates=2",
    "--config.stop_at_eval_return=none",
    "--config.learning_curve=false",
]


def _summary(workdir) -> dict:
    with open(os.path.join(workdir, "summary.json")) as f:
        return json.load(f)


def _train_records(workdir) -> list[dict]:
    with open(os.path.join(workdir, "metrics.jsonl")) as f:
        return [r for r in map(json.loads, f) if "charts/sps" in r]


def _assert_both_processes_fed_every_update(records: dict, updates: int, batch: int) -> None:
    """Every update's global batch (of `batch` rows) holds each process's rows as its block,
    bit for bit, both processes saw the same batch, and their rows differ (their own
    workers' envs)."""
    assert sorted(u for _, u in records) == list(range(updates))
    for p0, p1 in records.values():
        assert p0["block"] and p1["block"]
        assert p0["global_rows"] == p1["global_rows"] == batch
        assert p0["global_sha"] == p1["global_sha"] and p0["local_sha"] != p1["local_sha"]


def test_gymnasium_workers_over_two_processes_equal_one_process(tmp_path):
    """2 processes x 1 actor of 4 corridor envs (each in its workers) against 1 process x 2
    actors, deterministic: the same params (up to float rounding of the cross-device mean),
    the same losses and episodes at every log line."""
    two, one = tmp_path / "two", tmp_path / "one"
    args = ["--config", PPO, "--workdir", str(two), "--quiet", *DETERMINISTIC]
    run_two_processes(str(tmp_path / "updates"), [*args, "--config.sebulba.num_actor_threads=1"])
    train_main(PPO, str(one), *DETERMINISTIC, "--config.sebulba.num_actor_threads=2")
    s2, s1 = _summary(two), _summary(one)
    assert s2["updates"] == s1["updates"] == UPDATES
    assert len(set(s2["params_sha256_by_process"])) == 1
    assert s2["params_sha256"] != s2["initial_params_sha256"]
    diffs = jax.tree.map(
        lambda a, b: float(np.max(np.abs(a - b))), restore_params(two), restore_params(one)
    )
    assert max(jax.tree.leaves(diffs)) < 1e-5
    r2, r1 = _train_records(two), _train_records(one)
    assert [r["stats/processes"] for r in r2] == [2] * (UPDATES // 2)
    for a, b in zip(r2, r1, strict=True):
        assert a["charts/episodes"] == b["charts/episodes"]
        np.testing.assert_allclose(a["losses/loss"], b["losses/loss"], rtol=1e-4, atol=1e-7)
    _assert_both_processes_fed_every_update(read_records(str(tmp_path / "updates")), UPDATES, BATCH)


def test_a_pettingzoo_game_over_two_processes_feeds_every_update_from_both(tmp_path):
    """Nim (a PettingZoo AEC game) on the seats, self-play and random opponents, its workers
    in each process: each PPO update's 16 segments are 8 from each process."""
    workdir = tmp_path / "nim"
    args = ["--config", TICTACTOE_PPO, "--workdir", str(workdir), "--quiet"]
    args += [
        f"--config.env_id={NIM_ID}",
        "--config.seats.games=(('learner', 'learner'), ('learner', 'random'), "
        "('random', 'learner'))",
        "--config.seats.opening_plies=0",
        "--config.sebulba.envs_per_actor=12",
        "--config.total_env_steps=1024",
        "--config.eval_episodes=2",
    ]
    run_two_processes(str(tmp_path / "updates"), args)
    summary = _summary(workdir)
    assert summary["stop_reason"] == "total_env_steps reached"
    assert len(set(summary["params_sha256_by_process"])) == 1
    records = read_records(str(tmp_path / "updates"))
    _assert_both_processes_fed_every_update(records, summary["updates"], 16)
    assert summary["updates"] >= 3
