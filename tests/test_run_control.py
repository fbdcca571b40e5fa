"""Run control (issue 20): schedules, total_episodes, W&B (offline), the deterministic XLA flags,
--help_config (evaluation beside training: `test_background_eval.py`; synchronous collection
with stragglers: `test_sync_collection.py`)."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from jaxrl_dist import agents
from jaxrl_dist.agents.base import LearnerCore, with_schedules
from jaxrl_dist.config import SECTIONS, ConfigError, TrainConfig
from jaxrl_dist.config.cli import load_config
from jaxrl_dist.config.describe import field_descriptions
from jaxrl_dist.config.sections import InferenceConfig, leaf_paths
from jaxrl_dist.schedules import ScheduleError, check_schedules, parse_schedule
from jaxrl_dist.tools.train_cli import make_trainer

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from train_runs import jsonl_records as _records  # noqa: E402
from wandb_records import offline_records  # noqa: E402

QUICK = os.path.join(ROOT, "configs", "impala_cartpole.py") + ":quick"
SMALL = {"checkpoint_every_updates": 0, "stop_at_eval_return": None, "log_every_updates": 5}


# ----------------------------------------------------------------------------- schedules
def test_schedules_are_optax_schedules_over_the_runs_updates():
    n = 100
    steps = np.arange(n + 1)
    value = lambda spec: np.array([float(parse_schedule(spec, n)(s)) for s in steps])  # noqa: E731
    np.testing.assert_allclose(value("constant"), 1.0)
    np.testing.assert_allclose(value("linear"), 1 - steps / n, atol=1e-6)
    np.testing.assert_allclose(value("linear:end=0.2"), 1 - 0.8 * steps / n, atol=1e-6)
    cosine = optax.cosine_decay_schedule(1.0, n, alpha=0.1)
    np.testing.assert_allclose(value("cosine:end=0.1"), [cosine(s) for s in steps], atol=1e-6)
    warm = optax.warmup_cosine_decay_schedule(0.0, 1.0, 10, n, end_value=0.0)
    np.testing.assert_allclose(value("cosine:warmup=0.1"), [warm(s) for s in steps], atol=1e-6)
    piecewise = value("piecewise:0.5=0.1,0.75=0.01")
    np.testing.assert_allclose(piecewise[:50], 1.0)
    np.testing.assert_allclose(piecewise[50:75], 0.1, rtol=1e-6)
    np.testing.assert_allclose(piecewise[75:], 0.01, rtol=1e-5)
    for bad in ("exp", "linear:end", "cosine:warmup=1.5", "piecewise:2=0.1", "linear:gamma=1"):
        with pytest.raises(ScheduleError):
            parse_schedule(bad, n)


class _State(NamedTuple):
    hparams: dict
    update_step: jax.Array


def test_with_schedules_scales_what_the_update_reads_and_keeps_the_base_values():
    """The update reads base x schedule(update); the state keeps the base (what a run-time
    change sets and a checkpoint saves), so a new base keeps the schedule's shape."""

    def update(state, batch):
        used = state.hparams["entropy_cost"]
        new = state._replace(update_step=state.update_step + 1)
        return new, {"used": used}

    core = LearnerCore(init=lambda key: None, update=update)
    core = with_schedules(core, {"entropy_cost": "linear"}, num_updates=10)
    state = _State(
        {"entropy_cost": jnp.float32(0.5), "learning_rate": jnp.float32(1.0)}, jnp.int32(0)
    )
    update = jax.jit(core.update)
    for step in range(4):
        state, metrics = update(state, None)
        assert float(metrics["used"]) == pytest.approx(0.5 * (1 - step / 10))
        assert float(metrics["schedule/entropy_cost"]) == float(metrics["used"])
        assert float(state.hparams["entropy_cost"]) == 0.5  # the base is kept
    state = core.with_hparams(state, {**state.hparams, "entropy_cost": jnp.float32(2.0)})
    _, metrics = update(state, None)  # a run-time change: the new base, the same schedule
    assert float(metrics["used"]) == pytest.approx(2.0 * 0.6)


@pytest.mark.parametrize(
    "config",
    ["impala_cartpole.py:quick", "ppo_cartpole.py", "rainbow_cartpole.py", "r2d2_memory.py"],
)
def test_every_agent_takes_schedules_of_its_run_time_hyperparameters(config):
    from jaxrl_dist.run.preflight import scheduled_agent

    cfg = load_config(os.path.join(ROOT, "configs", config), **{"algo.anneal_lr": "False"})
    entry = agents.get(cfg.algorithm)
    from jaxrl_dist.envs import env_spec

    agent = entry.make(
        cfg.algo,
        cfg.network,
        env_spec(cfg.env_id, cfg.env_kwargs),
        agents.base.RunShape(cfg.total_env_steps, 100.0),
    )
    assert "learning_rate" in agent.hyperparams
    for name in agent.hyperparams:
        if type(getattr(cfg.algo, name)) is int:
            continue
        cfg_s = dataclasses.replace(cfg, schedules={name: "cosine:warmup=0.1"})
        wrapped = scheduled_agent(agent, cfg_s, 10)
        assert wrapped.learner.update is not agent.learner.update
    with pytest.raises(ConfigError, match="not a run-time hyperparameter"):
        scheduled_agent(agent, dataclasses.replace(cfg, schedules={"gamma": "linear"}), 10)
    for name in agent.hyperparams:  # counts (n_step, target_period) cannot be scheduled
        if type(getattr(cfg.algo, name)) is int:
            with pytest.raises(ConfigError, match="is a count"):
                scheduled_agent(agent, dataclasses.replace(cfg, schedules={name: "linear"}), 10)
    anneal = dataclasses.replace(cfg.algo, anneal_lr=True)
    with pytest.raises(ConfigError, match="anneal_lr"):
        both = dataclasses.replace(cfg, algo=anneal, schedules={"learning_rate": "linear"})
        scheduled_agent(agent, both, 10)


def test_schedule_problems_and_dotted_overrides():
    cfg = load_config(QUICK, **{"schedules.learning_rate": "cosine:warmup=0.05"})
    assert cfg.schedules == {"learning_rate": "cosine:warmup=0.05"}
    assert "unknown kind" in check_schedules({"learning_rate": "expo"}, ("learning_rate",))


# ----------------------------------------------------------------------------- W&B + stops
def test_wandb_offline_mirrors_the_records_and_resume_continues_the_run(tmp_path, monkeypatch):
    """One IMPALA run stopped by total_episodes with a linear entropy schedule, mirrored to an
    offline W&B run, then resumed: the same W&B run, every metrics.jsonl record in it."""
    pytest.importorskip("wandb")
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    workdir = str(tmp_path / "run")
    flags = {
        **SMALL,
        "total_env_steps": 200_000,
        "total_episodes": 200,
        "eval_every_updates": 10,
        "learning_curve": True,
        "wandb.project": "jaxrl-dist-test",
        "wandb.group": "g",
        "wandb.tags": "('a', 'b')",
        "schedules.entropy_cost": "linear",
        "schedules.learning_rate": "cosine:warmup=0.01",
        "algo.anneal_lr": False,
    }
    first = make_trainer(load_config(QUICK, **flags), workdir, quiet=True).run()
    assert first.stop_reason == "total_episodes reached"
    summary = json.load(open(os.path.join(workdir, "summary.json")))
    assert 200 <= summary["episodes"]
    with open(os.path.join(workdir, "wandb_run_id")) as f:
        run_id = f.read().strip()
    records = offline_records(workdir)
    assert records["run_ids"] == [run_id]
    run = records["runs"][0]
    assert (run.project, run.run_group, list(run.tags)) == ("jaxrl-dist-test", "g", ["a", "b"])
    assert records["config"]["algorithm"] == "impala"
    assert records["config"]["schedules"]["entropy_cost"] == "linear"
    lines = _records(workdir, "metrics.jsonl")
    logged = [h for h in records["history"] if "wall_time_s" in h]  # ours, not the image's
    assert [h["env_steps"] for h in logged] == [r["env_steps"] for r in lines]
    assert any("eval/return" in h for h in logged)
    assert any(f.startswith("media/images/learning_curve") for f in records["files"])
    assert records["summary"]["stop_reason"] == "total_episodes reached"
    assert records["summary"]["final_eval_return"] == summary["final_eval_return"]
    # The schedule: base x (1 - update / updates of total_env_steps), logged as used.
    base, updates = 0.01, -(-200_000 // (16 * 20))
    cosine = optax.warmup_cosine_decay_schedule(0.0, 1.0, round(0.01 * updates), updates)
    trained = [line for line in lines if "losses/schedule/entropy_cost" in line]
    assert trained
    for line in trained:
        update = line["charts/updates"] - 1
        want = base * (1 - update / updates)
        assert line["losses/schedule/entropy_cost"] == pytest.approx(want, rel=1e-4)
        # The agent's own metric: the rate its optimizer step used (not the wrapper's note).
        want = 1e-3 * float(cosine(update))
        assert line["losses/learning_rate"] == pytest.approx(want, rel=1e-4, abs=1e-9)

    flags["total_episodes"] = 400
    second = make_trainer(load_config(QUICK, **flags), workdir, resume=True, quiet=True).run()
    assert second.stop_reason == "total_episodes reached"
    records = offline_records(workdir)
    assert records["run_ids"] == [run_id, run_id]  # one W&B run, continued
    lines = _records(workdir, "metrics.jsonl")
    logged = [h for h in records["history"] if "wall_time_s" in h]  # ours, not the image's
    assert [h["env_steps"] for h in logged] == [r["env_steps"] for r in lines]


def test_wandb_is_imported_only_when_asked():
    code = (
        "import sys\n"
        "import jaxrl_dist.config.cli, jaxrl_dist.run.trainer\n"
        "import jaxrl_dist.sebulba.engine, jaxrl_dist.anakin.engine\n"
        "from jaxrl_dist.config.cli import load_config\n"
        "from jaxrl_dist.run.wandb_sink import make_sink\n"
        f"assert make_sink(load_config({QUICK!r}), '/nonexistent', False) is None\n"
        "assert 'wandb' not in sys.modules, 'wandb was imported'\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stderr[-2000:]


def test_wandb_missing_is_a_one_line_config_error(tmp_path, monkeypatch):
    from jaxrl_dist.run.wandb_sink import make_sink

    monkeypatch.setitem(sys.modules, "wandb", None)  # import wandb raises ImportError
    cfg = load_config(QUICK, **{"wandb.project": "p"})
    with pytest.raises(ConfigError, match=r"pip install -e '\.\[wandb\]'"):
        make_sink(cfg, str(tmp_path), False)
    with pytest.raises(ConfigError, match="wandb.mode"):
        load_config(QUICK, **{"wandb.mode": "sometimes"})


# ----------------------------------------------------------------------------- determinism
def test_deterministic_xla_flags_are_set_before_jax_starts():
    code = (
        "import os\n"
        "from jaxrl_dist.determinism import DETERMINISTIC_XLA_FLAGS, set_deterministic_xla_flags\n"
        "os.environ['XLA_FLAGS'] = '--xla_gpu_deterministic_ops=false'\n"
        "assert set_deterministic_xla_flags()\n"
        "flags = os.environ['XLA_FLAGS'].split()\n"
        "assert flags == ['--xla_gpu_deterministic_ops=false', DETERMINISTIC_XLA_FLAGS[1]], flags\n"
        "os.environ['XLA_FLAGS'] = ''\n"
        "assert set_deterministic_xla_flags()\n"
        "import jax.numpy as jnp\n"
        "assert float(jnp.ones(3).sum()) == 3.0  # this jaxlib knows both flags\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stderr[-2000:]


def test_flags_set_after_a_gpu_backend_started_warn(monkeypatch, capsys):
    from jax._src import xla_bridge

    from jaxrl_dist.determinism import set_deterministic_xla_flags

    monkeypatch.setenv("XLA_FLAGS", "")
    assert set_deterministic_xla_flags()  # CPU backends only: nothing to warn about
    monkeypatch.setenv("XLA_FLAGS", "")
    monkeypatch.setitem(xla_bridge._backends, "cuda", object())  # as if a GPU had started
    assert not set_deterministic_xla_flags()
    assert "export XLA_FLAGS=" in capsys.readouterr().err


def test_train_cli_sets_the_flags_in_deterministic_mode(monkeypatch):
    from jaxrl_dist.tools import train_cli

    seen = {}

    class Fake:
        def run(self):
            seen["flags"] = os.environ.get("XLA_FLAGS", "")

    monkeypatch.setenv("XLA_FLAGS", "")
    monkeypatch.setattr(train_cli, "make_trainer", lambda *a, **k: Fake())
    argv = [
        "--config",
        QUICK,
        "--workdir",
        "/nonexistent",
        "--config.deterministic=True",
        "--config.sebulba.async_envs=False",
    ]
    assert train_cli.main(argv) == 0
    assert "--xla_gpu_deterministic_ops=true" in seen["flags"]
    monkeypatch.setenv("XLA_FLAGS", "")
    assert train_cli.main(argv[:4]) == 0
    assert "xla_gpu_deterministic_ops" not in seen["flags"]


def test_deterministic_mode_gives_identical_params(tmp_path):
    """Two deterministic runs give identical params: on a GPU through the XLA flags, and on
    every backend, so that the helper `benchmarks/gpu_check.py` runs on the GPU cannot rot."""
    from gpu_determinism_runs import two_runs

    a, b = two_runs(str(tmp_path))
    assert a["updates"] > 0 and a["params_sha256"] != a["initial_params_sha256"]
    assert (a["updates"], a["params_sha256"]) == (b["updates"], b["params_sha256"])


# ----------------------------------------------------------------------------- help
def test_every_config_field_has_a_description():
    builtin = ("impala", "ppo", "rainbow", "r2d2")  # other tests register their own agents
    classes = [TrainConfig, *SECTIONS.values(), InferenceConfig]
    classes += [agents.get(n).config_cls for n in builtin]
    for cls in classes:
        notes = field_descriptions(cls)
        for field in dataclasses.fields(cls):
            if field.name in SECTIONS or field.name in ("algo", "inference"):
                continue
            assert notes.get(field.name), f"{cls.__name__}.{field.name} has no description"


def test_help_config_prints_every_field_with_type_default_and_description():
    out = subprocess.run(
        [
            sys.executable,
            os.path.join(ROOT, "scripts", "train.py"),
            "--config",
            os.path.join(ROOT, "configs", "ppo_cartpole.py"),
            "--help_config",
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    text = out.stdout
    cfg = load_config(os.path.join(ROOT, "configs", "ppo_cartpole.py"))
    names = [n for n in leaf_paths(TrainConfig) if n != "algo"]
    names += [f"algo.{f.name}" for f in dataclasses.fields(type(cfg.algo))]
    lines = text.splitlines()
    for name in names:
        row = [i for i, line in enumerate(lines) if line.startswith(f"  {name} (")]
        assert row, f"{name} is missing"
        assert " = " in lines[row[0]] and lines[row[0] + 1].strip(), name
    assert "algo.clip_eps (float) = 0.1 [this config: 0.2]" in text
