"""Several agents (`config.agents`) on Sebulba over 2 processes joined by `jax.distributed` (1 fake
CPU device each): Rainbow and PPO on tic-tac-toe (`two_agents_tictactoe.py:quick`), each agent's
learner on a mesh over both processes. Every update of each agent learns from both processes'
rows, the processes end bit-identical, each keeps its own part of Rainbow's replay and of the
pools, and every agent resumes from the checkpoint both wrote.

Sebulba refuses deterministic mode with several agents (docs/guides/several-agents.md), so
the run is not compared with a one-process run; what each update learned from is recorded
instead (`record_updates.py`). One run and its resume serve every test here."""

import json
import os
import sys

import pytest

from jaxrl_dist.data import snapshot

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from record_updates import read_records, run_two_processes  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONFIG = os.path.join(ROOT, "configs", "two_agents_tictactoe.py:quick")
BATCH = {"rb": 128, "ppo": 16}  # each agent's global batch: transitions, segments
FIRST, RESUMED = 2_400, 3_400  # env steps: a few updates of each agent, then a few more


def _summary(workdir) -> dict:
    with open(os.path.join(workdir, "summary.json")) as f:
        return json.load(f)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """The run to `FIRST` env steps, then `--resume`d to `RESUMED`: each part's summary,
    recorded updates and stderrs, and the checkpoint the first part ended with."""
    workdir = tmp_path_factory.mktemp("agents") / "run"
    parts = {}
    for name, total, extra in (("first", FIRST, ()), ("resumed", RESUMED, ("--resume",))):
        args = ["--config", CONFIG, "--workdir", str(workdir), "--quiet"]
        args += [f"--config.total_env_steps={total}", "--config.agents.rb.replay.save=true"]
        args += ["--config.eval_episodes=2"]
        out = str(workdir.parent / name)
        errs = run_two_processes(out, [*args, *extra])
        parts[name] = {"summary": _summary(workdir), "records": read_records(out), "errs": errs}
    step = parts["first"]["summary"]["latest_checkpoint_step"]
    return parts, workdir / "checkpoints" / str(step)


def test_every_update_of_each_agent_learns_from_both_processes(runs):
    """Each process's rows of every update are its block of the global batch the learner
    updated on (bit for bit), the batch has the agent's own size, both processes saw the
    same batch, and their rows differ (each process's own actors)."""
    parts, _ = runs
    for part in parts.values():
        records, agents = part["records"], part["summary"]["agents"]
        for name, batch in BATCH.items():
            updates = sorted(u for agent, u in records if agent == name)
            assert len(updates) == agents[name]["updates"] - updates[0] > 0, (name, updates)
            for u in updates:
                p0, p1 = records[name, u]
                assert (p0["process"], p1["process"]) == (0, 1)
                assert p0["block"] and p1["block"], (name, u)
                assert p0["global_rows"] == p1["global_rows"] == batch
                assert p0["global_sha"] == p1["global_sha"]
                assert p0["local_sha"] != p1["local_sha"]


def test_the_processes_agree_and_each_saves_its_own_replay_and_pools(runs):
    parts, checkpoint = runs
    for part in parts.values():
        summary = part["summary"]
        assert summary["stop_reason"] == "total_env_steps reached"
        assert len(set(summary["params_sha256_by_process"])) == 1
        assert summary["params_sha256"] != summary["initial_params_sha256"]
    for item, owner in (("data", "rb/"), ("pool", "")):
        files = sorted(os.listdir(checkpoint / item))
        assert [f for f in files if f.startswith("bytes")] == ["bytes.0", "bytes.1"]
        saved = [snapshot.from_bytes((checkpoint / item / f).read_bytes()) for f in files[:2]]
        assert all(arrays and all(k.startswith(owner) for k in arrays) for arrays in saved)
        assert saved[0]["rb/rng" if item == "data" else "rb/pool/rng"].tobytes() != (
            saved[1]["rb/rng" if item == "data" else "rb/pool/rng"].tobytes()
        )  # each process's own stream
    assert {k.split("/")[0] for k in saved[0]} == {"rb", "ppo"}  # both agents' pools


def test_each_agent_resumes_from_the_checkpoint_both_processes_wrote(runs):
    """Every agent's learner state comes back exactly, each agent's update count goes on
    from the checkpoint's, and each process takes its replay back (no refill)."""
    parts, _ = runs
    first, resumed = parts["first"]["summary"], parts["resumed"]["summary"]
    assert resumed["resumed_from_update"] == first["updates"]
    assert resumed["initial_state_sha256"] == first["state_sha256"]
    assert resumed["initial_params_sha256"] == first["params_sha256"]
    records = parts["resumed"]["records"]
    for name in BATCH:
        start = first["agents"][name]["updates"]
        assert min(u for agent, u in records if agent == name) == start
        assert resumed["agents"][name]["updates"] > start
    assert not any("holds no replay contents" in err for err in parts["resumed"]["errs"])
