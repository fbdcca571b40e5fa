"""Rainbow under faults: an actor that dies while the replay is still filling is restarted and
the run goes on; SIGTERM then --resume takes back the learner state exactly and the replay's
contents as saved (or, with `replay.save` off, says in one line that it refills)."""

import json
import os
import subprocess
import sys

import numpy as np
from env_faults import inject_env_failures

from jaxrl_dist.checkpoints.store import Checkpointer
from jaxrl_dist.config.cli import load_config
from jaxrl_dist.data import snapshot
from jaxrl_dist.run.trainer import Trainer

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
AT_UPDATE = os.path.join(ROOT, "tests", "signal_at_update.py")
CONFIG = os.path.join(ROOT, "configs", "rainbow_cartpole.py") + ":quick"


def test_an_actor_killed_while_the_replay_fills_is_restarted(tmp_path, monkeypatch):
    # The first EnvPool fails after 10 recv() of 8 envs: the replay holds less than min_size 256.
    made = inject_env_failures(monkeypatch, lambda n: 10 if n == 0 else None)
    summary = Trainer(load_config(CONFIG), str(tmp_path / "run"), quiet=True).run().summary
    assert len(made) == 2 and summary["actor_restarts"] == 1
    assert summary["stop_reason"] == "total_env_steps reached" and summary["updates"] > 100


def _run_stopped_at(update, workdir):
    """A run of its own process, SIGTERM after `update`; its summary."""
    args = [
        sys.executable,
        AT_UPDATE,
        "SIGTERM",
        str(update),
        "--config",
        CONFIG,
        "--workdir",
        str(workdir),
        "--quiet",
        "--config.checkpoint_every_updates=0",
    ]
    out = subprocess.run(args, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    with open(os.path.join(workdir, "summary.json")) as f:
        return json.load(f)


def test_sigterm_then_resume_takes_back_the_learner_state_and_the_replay(tmp_path, capsys):
    workdir = tmp_path / "run"
    stopped = _run_stopped_at(60, workdir)
    assert stopped["stop_reason"] == "SIGTERM"
    step = stopped["updates"]
    with Checkpointer(str(workdir / "checkpoints")) as ckpt:
        assert ckpt.latest_step() == step
        saved = snapshot.from_bytes(ckpt.restore_data(step))
    inserted, sampled = saved["counts"][3:]
    assert inserted >= 256 and sampled == 128 * step  # min_size in; batch 128 per update
    assert len(np.unique(saved["priorities"])) > 3  # TD errors came back as priorities

    resumed = Trainer(load_config(CONFIG), str(workdir), resume=True, quiet=True).run().summary
    assert resumed["resumed_from_update"] == step
    assert resumed["initial_params_sha256"] == stopped["params_sha256"]
    assert resumed["stop_reason"] == "total_env_steps reached"
    assert "holds no replay contents" not in capsys.readouterr().err


def test_without_saved_contents_a_resume_says_it_refills(tmp_path, capsys):
    workdir = str(tmp_path / "run")
    config = load_config(CONFIG, total_env_steps=1_500, **{"replay.save": False})
    first = Trainer(config, workdir, quiet=True).run().summary
    config = load_config(CONFIG, total_env_steps=2_500, **{"replay.save": False})
    resumed = Trainer(config, workdir, resume=True, quiet=True).run().summary
    warnings = [line for line in capsys.readouterr().err.splitlines() if "replay contents" in line]
    assert len(warnings) == 1 and "refills to config.replay.min_size=256" in warnings[0]
    assert resumed["initial_params_sha256"] == first["params_sha256"]
    assert resumed["updates"] > first["updates"]
