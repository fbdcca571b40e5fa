"""End-to-end runs: SIGTERM/SIGINT save and exit 0; --resume continues exactly (learning to a
target: test_learning_claims.py)."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest
from train_runs import train_main

from jaxrl_dist.config.cli import parse_args
from jaxrl_dist.config.errors import ConfigError
from jaxrl_dist.run.trainer import Trainer

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TRAIN = os.path.join(ROOT, "scripts", "train.py")
CARTPOLE = os.path.join(ROOT, "configs", "impala_cartpole.py")
ATARI = os.path.join(ROOT, "configs", "impala_atari.py")


def _summary(workdir):
    with open(os.path.join(workdir, "summary.json")) as f:
        return json.load(f)


def _metrics(workdir):
    with open(os.path.join(workdir, "metrics.jsonl")) as f:
        return [json.loads(line) for line in f]


def test_learner_batch_independent_of_the_env_batch(tmp_path, monkeypatch):
    """32 envs per recv() feeding a learner batch of 8 segments: rollouts of gcd(8, 32) = 8
    segments, and every batch the learner receives is exactly 8 segments wide."""
    from jaxrl_dist.learning.learner import Learner

    widths = []
    real_put_batch = Learner.put_batch

    def put_batch(self, rollout):
        widths.append(rollout.obs.shape[1])
        return real_put_batch(self, rollout)

    monkeypatch.setattr(Learner, "put_batch", put_batch)
    config, _ = parse_args(
        [
            "--config",
            CARTPOLE + ":quick",
            "--workdir",
            "unused",
            "--config.sebulba.envs_per_actor=64",
            "--config.batch_size=8",
            "--config.total_env_steps=4800",
        ]
    )
    assert (config.env_batch_size, config.rollout_segments()) == (32, 8)
    summary = Trainer(config, str(tmp_path / "run"), quiet=True).run().summary
    assert summary["updates"] == 4800 // (8 * config.unroll_length)
    assert widths and set(widths) == {8}, widths


def _start(workdir, *overrides):
    args = [
        sys.executable,
        TRAIN,
        "--config",
        CARTPOLE,
        "--workdir",
        str(workdir),
        "--quiet",
        "--config.stop_at_eval_return=none",
        "--config.eval_every_updates=0",
        "--config.eval_episodes=2",
        "--config.log_every_updates=5",
        *overrides,
    ]
    return subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _wait_for_metrics(proc, workdir, lines, timeout=180):
    path = os.path.join(workdir, "metrics.jsonl")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()[1][-3000:]
        if os.path.exists(path) and sum(1 for _ in open(path)) >= lines:
            return
        time.sleep(0.2)
    proc.kill()
    pytest.fail("training produced no metrics in time")


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_signal_saves_checkpoint_and_exits_zero(tmp_path, sig):
    workdir = tmp_path / "run"
    proc = _start(workdir, "--config.total_env_steps=100_000_000")
    _wait_for_metrics(proc, workdir, lines=2)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err[-3000:]
    summary = _summary(workdir)
    assert summary["stop_reason"] == sig.name
    assert summary["latest_checkpoint_step"] == summary["updates"] >= 10


def test_resume_continues_from_same_step_with_identical_params(tmp_path):
    workdir = tmp_path / "run"
    proc = _start(workdir, "--config.total_env_steps=100_000_000")
    _wait_for_metrics(proc, workdir, lines=3)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err[-3000:]
    first = _summary(workdir)
    steps_per_update = first["env_steps"] // first["updates"]

    # Resume with the same config, let it log twice more, stop it again.
    lines = len(_metrics(workdir))
    proc = _start(workdir, "--config.total_env_steps=100_000_000", "--resume")
    _wait_for_metrics(proc, workdir, lines=lines + 2)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err[-3000:]
    second = _summary(workdir)
    assert second["initial_params_sha256"] == first["params_sha256"]  # bit-identical params
    assert second["initial_state_sha256"] == first["state_sha256"]  # and the whole state
    assert second["params_sha256"] != first["params_sha256"]  # and it kept learning
    assert second["updates"] >= first["updates"] + 6  # two log lines, every 5 updates
    assert second["env_steps"] == second["updates"] * steps_per_update
    logged = [m for m in _metrics(workdir) if "charts/updates" in m]  # training lines, not eval
    resumed = [m for m in logged if m["env_steps"] > first["env_steps"]]
    assert first["updates"] < min(m["charts/updates"] for m in resumed) <= first["updates"] + 5
    # The learning-rate schedule continued where it stopped (linear decay over the run).
    lr = {m["charts/updates"]: m["losses/learning_rate"] for m in logged}
    u = min(m["charts/updates"] for m in resumed)
    config, _ = parse_args(["--config", CARTPOLE, "--workdir", "x"])
    num_updates = 100_000_000 // steps_per_update  # the first run's schedule length
    expected = config.algo.learning_rate * (1 - (u - 1) / num_updates)
    assert lr[u] == pytest.approx(expected, rel=1e-4)


def test_resume_without_checkpoint_and_rerun_over_existing_run_are_refused(tmp_path, capsys):
    from jaxrl_dist.tools.train_cli import main

    assert main(["--config", CARTPOLE, "--workdir", str(tmp_path / "none"), "--resume"]) == 2
    assert "no complete checkpoint" in capsys.readouterr().err
    os.makedirs(tmp_path / "old" / "checkpoints" / "7")
    assert main(["--config", CARTPOLE, "--workdir", str(tmp_path / "old")]) == 2
    assert "--resume" in capsys.readouterr().err
    assert os.listdir(tmp_path / "old" / "checkpoints") == ["7"]  # nothing overwritten


def test_breakout_quick_runs_and_logs_sps(tmp_path):
    """`scripts/train.py`'s `main` in this process (`train_main`)."""
    workdir = tmp_path / "breakout"
    train_main(f"{ATARI}:quick", str(workdir))
    metrics = _metrics(workdir)
    sps = [m["charts/sps"] for m in metrics if "charts/sps" in m]
    assert sps and all(s > 0 for s in sps)
    summary = _summary(workdir)
    assert summary["updates"] == 4 and summary["final_eval_return"] is not None


def test_warm_start_takes_params_but_not_counters(tmp_path):
    """From a run's latest params by default, or the step `@STEP` names; a step the run does
    not hold is refused in one line that lists the ones it does."""
    from jaxrl_dist.checkpoints.store import restore_params, tree_digest
    from jaxrl_dist.run.preflight import warm_params

    def _warm_params(*args):
        return warm_params(*args)[2]

    quick = ["--config", f"{CARTPOLE}:quick", "--workdir", "unused"]
    config, _ = parse_args([*quick, "--config.checkpoint_every_updates=10"])
    first = Trainer(config, str(tmp_path / "a"), quiet=True).run().summary
    source = str(tmp_path / "a")
    steps = first["checkpoint_steps"]
    assert len(steps) >= 2 and steps[-1] == first["latest_checkpoint_step"]
    like = restore_params(source)
    env = config.env_id
    assert tree_digest(_warm_params(source, like, env)) == first["params_sha256"]
    assert tree_digest(_warm_params(f"{source}@latest", like, env)) == first["params_sha256"]
    with pytest.raises(
        ConfigError, match="was trained on CartPole-v1, not Acrobot-v1; take params"
    ):
        _warm_params(source, like, "Acrobot-v1")  # another game: refused before the shapes
    earlier = tree_digest(restore_params(source, steps[0]))
    assert earlier != first["params_sha256"]
    config, _ = parse_args([*quick, f"--config.warm_start={source}@{steps[0]}"])
    second = Trainer(config, str(tmp_path / "b"), quiet=True).run().summary
    assert second["initial_params_sha256"] == earlier
    assert second["updates"] == first["updates"]  # counted from zero again, same budget
    with pytest.raises(ConfigError, match=r"step 999 is not a checkpoint .* available: ") as e:
        _warm_params(f"{source}@999", like, env)
    assert "\n" not in str(e.value) and "config.warm_start=" in str(e.value)


def test_max_policy_lag_drops_stale_rollouts(tmp_path):
    """With a deep queue and lag bound 1, stale rollouts are dropped, counted, never learned."""
    config, _ = parse_args(
        [
            "--config",
            f"{CARTPOLE}:quick",
            "--workdir",
            "unused",
            "--config.sebulba.queue_size=8",
            "--config.sebulba.max_policy_lag=1",
            "--config.total_env_steps=6_400",
        ]
    )
    summary = Trainer(config, str(tmp_path / "run"), quiet=True).run().summary
    assert summary["dropped_rollouts"] > 0
    lags = [m["stats/policy_lag"] for m in _metrics(tmp_path / "run") if "stats/policy_lag" in m]
    assert max(lags) <= 1.0


def test_final_save_over_a_periodic_save_at_the_same_update(tmp_path):
    """Stop at an evaluation that falls on a checkpoint update: the final save keeps the periodic
    one (waiting for it to finalise, never replacing it: no window without a checkpoint), whose
    meta already holds that evaluation."""
    from jaxrl_dist.checkpoints.store import Checkpointer

    config, _ = parse_args(
        [
            "--config",
            f"{CARTPOLE}:quick",
            "--workdir",
            "unused",
            "--config.eval_every_updates=10",
            "--config.checkpoint_every_updates=10",
            "--config.stop_at_eval_return=-1",
            "--config.eval_in_background=False",
        ]
    )
    summary = Trainer(config, str(tmp_path / "run"), quiet=True).run().summary
    assert summary["updates"] == summary["latest_checkpoint_step"] == 10
    with Checkpointer(str(tmp_path / "run" / "checkpoints"), create=False) as ckpt:
        assert ckpt.restore_meta(10)["last_eval"]["updates"] == 10
    with open(tmp_path / "run" / "evals.jsonl") as f:  # the history: one line per evaluation
        assert json.loads(f.readlines()[-1])["updates"] == 10
