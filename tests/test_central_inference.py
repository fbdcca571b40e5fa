"""The central inference server inside real runs: it serves several actor threads, learns, is
restarted within the restart budget when it fails, and is deterministic in lockstep mode."""

import json
import os

import pytest

from jaxrl_dist.acting import inference_server
from jaxrl_dist.config.cli import parse_args
from jaxrl_dist.errors import RunError
from jaxrl_dist.run.trainer import Trainer

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CARTPOLE = os.path.join(ROOT, "configs", "impala_cartpole.py")
SERVER = [
    "--config",
    f"{CARTPOLE}:quick",
    "--workdir",
    "unused",
    "--config.inference.client=server",
    "--config.num_actor_threads=2",
    "--config.log_every_updates=2",
    "--config.actor_loop=python",
    "--config.async_envs=true",  # the XLA loop has no server
]


def _config(*overrides):
    return parse_args([*SERVER, *overrides])[0]


def _records(workdir):
    with open(os.path.join(workdir, "metrics.jsonl")) as f:
        return [json.loads(line) for line in f]


def test_a_server_batches_two_actors_and_the_run_learns(tmp_path):
    work = str(tmp_path / "run")
    config = _config("--config.total_env_steps=12800", "--config.inference.timeout_ms=50")
    result = Trainer(config, work, quiet=True).run()
    assert result.stop_reason == "total_env_steps reached" and result.env_steps >= 12_800
    logged = [r for r in _records(work) if "inference/envs_per_batch" in r]
    assert logged
    # Two actors of 16 envs per recv() and a 50 ms window: batches hold both actors' requests.
    assert max(r["inference/requests_per_batch"] for r in logged) > 1.5
    assert max(r["inference/envs_per_batch"] for r in logged) > 16
    assert result.final_eval_return > 30  # a random CartPole policy scores about 22


def test_a_failed_server_is_restarted_within_the_budget(tmp_path, monkeypatch):
    original = inference_server.InferenceServer._run_batch
    failures = {"left": 1}

    def fail_once(self, *args, **kwargs):
        if failures["left"] and self._counts["batches"] >= 5:
            failures["left"] -= 1
            raise RuntimeError("injected inference failure")
        return original(self, *args, **kwargs)

    monkeypatch.setattr(inference_server.InferenceServer, "_run_batch", fail_once)
    summary = Trainer(_config(), str(tmp_path / "run"), quiet=True).run().summary
    assert failures["left"] == 0 and summary["actor_restarts"] == 1
    assert summary["stop_reason"] == "total_env_steps reached"


def test_a_server_that_keeps_failing_spends_the_budget(tmp_path, monkeypatch):
    def always_fail(self, *args, **kwargs):
        raise RuntimeError("injected inference failure")

    monkeypatch.setattr(inference_server.InferenceServer, "_run_batch", always_fail)
    config = _config("--config.actor_max_restarts=2")
    with pytest.raises(RunError, match="inference server 0 stopped.*restart budget is spent"):
        Trainer(config, str(tmp_path / "run"), quiet=True).run()
    with open(tmp_path / "run" / "summary.json") as f:
        assert json.load(f)["actor_restarts"] == 2


def test_lockstep_through_the_server_is_deterministic(tmp_path):
    overrides = (
        "--config.deterministic=true",
        "--config.async_envs=false",
        "--config.envs_per_actor=8",
        "--config.batch_size=16",
        "--config.total_env_steps=3200",
        "--config.env_epoch_updates=4",
    )
    config = _config(*overrides)
    first = Trainer(config, str(tmp_path / "a"), quiet=True).run().summary
    second = Trainer(config, str(tmp_path / "b"), quiet=True).run().summary
    assert first["updates"] == second["updates"] == 10
    assert first["params_sha256"] == second["params_sha256"]
