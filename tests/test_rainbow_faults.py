"""Rainbow under faults: an actor that dies while the replay is still filling is restarted and
the run goes on; SIGTERM then --resume takes back the learner state exactly and the replay's
contents as saved (or, with `replay.save` off, says in one line that it refills)."""

import json
import os
import subprocess
import sys

import numpy as np
from env_faults import inject_env_failures

from jaxrl_dist.config.cli import load_config
from jaxrl_dist.data import snapshot
from jaxrl_dist.run.checkpoint import Checkpointer
from jaxrl_dist.run.trainer import Trainer

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
AT_UPDATE = os.path.join(ROOT, "tests", "signal_at_update.py")
TRAIN = os.path.join(ROOT, "scripts", "train.py")
CONFIG = os.path.join(ROOT, "configs", "rainbow_cartpole.py") + ":quick"


def test_an_actor_killed_while_the_replay_fills_is_restarted(tmp_path, monkeypatch):
    # The first EnvPool fails after 10 recv() of 8 envs: the replay holds less than min_size 256.
    made = inject_env_failures(monkeypatch, lambda n: 10 if n == 0 else None)
    summary = Trainer(load_config(CONFIG), str(tmp_path / "run"), quiet=True).run().summary
    assert len(made) == 2 and summary["actor_restarts"] == 1
    assert summary["stop_reason"] == "total_env_steps reached" and summary["updates"] > 100


def _run(script, workdir, *extra):
    args = [sys.executable, *script, "--config", CONFIG, "--workdir", str(workdir), "--quiet",
            "--config.checkpoint_every_updates=0", *extra]  # fmt: skip
    out = subprocess.run(args, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    with open(os.path.join(workdir, "summary.json")) as f:
        return json.load(f), out.stderr


def test_sigterm_then_resume_takes_back_the_learner_state_and_the_replay(tmp_path):
    workdir = tmp_path / "run"
    stopped, _ = _run([AT_UPDATE, "SIGTERM", "60"], workdir)
    assert stopped["stop_reason"] == "SIGTERM"
    step = stopped["updates"]
    with Checkpointer(str(workdir / "checkpoints")) as ckpt:
        assert ckpt.latest_step() == step
        saved = snapshot.from_bytes(ckpt.restore_data(step))
    inserted, sampled = saved["counts"][3:]
    assert inserted >= 256 and sampled == 128 * step  # min_size in; batch 128 per update
    assert len(np.unique(saved["priorities"])) > 3  # TD errors came back as priorities

    resumed, err = _run([TRAIN], workdir, "--resume")
    assert resumed["resumed_from_update"] == step
    assert resumed["initial_params_sha256"] == stopped["params_sha256"]
    assert resumed["stop_reason"] == "total_env_steps reached"
    assert "holds no replay contents" not in err


def test_without_saved_contents_a_resume_says_it_refills(tmp_path):
    workdir = tmp_path / "run"
    stopped, _ = _run([AT_UPDATE, "SIGTERM", "30"], workdir, "--config.replay.save=false")
    resumed, err = _run([TRAIN], workdir, "--resume", "--config.replay.save=false")
    warnings = [line for line in err.splitlines() if "holds no replay contents" in line]
    assert len(warnings) == 1 and "refills to config.replay.min_size=256" in warnings[0]
    assert resumed["initial_params_sha256"] == stopped["params_sha256"]
