"""Faults injected into real runs: failing envs (restarted within a budget, or stopping the run),
SIGTERM and SIGKILL then --resume (exact in deterministic mode), a NaN loss, mismatched
checkpoints (damaged ones: test_checkpoint_damage.py), a second Ctrl-C."""

import dataclasses
import json
import os
import signal
import subprocess
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from env_faults import inject_env_failures
from train_runs import IMPALA_ON_ANAKIN

from jaxrl_dist import agents
from jaxrl_dist.acting.supervisor import RestartBudget
from jaxrl_dist.agents.base import AgentEntry, RunShape
from jaxrl_dist.agents.impala import ImpalaConfig, make_impala
from jaxrl_dist.checkpoints.store import restore_params, tree_digest
from jaxrl_dist.config.cli import load_config, parse_args
from jaxrl_dist.errors import NonFiniteError
from jaxrl_dist.run.hooks import Hooks
from jaxrl_dist.run.trainer import Trainer
from jaxrl_dist.tools.train_cli import main

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TRAIN = os.path.join(ROOT, "scripts", "train.py")
AT_UPDATE = os.path.join(ROOT, "tests", "signal_at_update.py")
CARTPOLE = os.path.join(ROOT, "configs", "impala_cartpole.py")
QUICK = ["--config", f"{CARTPOLE}:quick", "--workdir", "unused"]


def _summary(workdir):
    with open(os.path.join(workdir, "summary.json")) as f:
        return json.load(f)


def test_restart_budget_is_a_sliding_window():
    now = [0.0]
    budget = RestartBudget(2, window_s=10.0, clock=lambda: now[0])
    assert budget.allow() and budget.allow()
    assert not budget.allow()  # a third within 10 s
    now[0] = 10.5  # the first two left the window
    assert budget.allow() and budget.allow() and not budget.allow()
    assert not RestartBudget(0, 10.0).allow()  # 0: the first failure stops the run


def test_an_actor_that_fails_once_is_restarted_and_the_run_goes_on(tmp_path, monkeypatch):
    made = inject_env_failures(monkeypatch, lambda n: 200 if n == 0 else None)
    config, _ = parse_args(QUICK)
    summary = Trainer(config, str(tmp_path / "run"), quiet=True).run().summary
    assert len(made) == 2  # the first EnvPool and its replacement
    assert summary["actor_restarts"] == 1
    assert summary["stop_reason"] == "total_env_steps reached"
    assert (
        summary["updates"] == RunShape(config.total_env_steps, config.steps_per_update).num_updates
    )
    with open(tmp_path / "run" / "metrics.jsonl") as f:
        logged = [r["stats/actor_restarts"] for r in map(json.loads, f) if "charts/sps" in r]
    assert logged[-1] == 1 and logged[0] in (0, 1)


def test_an_actor_that_always_fails_stops_the_run_within_the_budget(tmp_path, monkeypatch, capsys):
    made = inject_env_failures(monkeypatch, lambda n: 100)
    workdir = tmp_path / "run"
    start = time.monotonic()
    code = main([*QUICK[:-1], str(workdir), "--quiet", "--config.sebulba.actor_max_restarts=2"])
    assert time.monotonic() - start < 60
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 1
    assert err[-1].startswith("error: actor 0 stopped: RuntimeError('injected env failure')")
    assert "restart budget is spent (2 restarts within 600s" in err[-1]
    assert len(made) == 3  # the first EnvPool and two replacements
    summary = _summary(workdir)
    assert summary["actor_restarts"] == 2
    assert summary["stop_reason"].startswith("error: actor 0 stopped")
    assert summary["latest_checkpoint_step"] == summary["updates"] > 0  # the final checkpoint


def test_a_lockstep_actor_restarts_exactly_where_it_failed(tmp_path, monkeypatch):
    """Deterministic mode: actor 1's first EnvPool fails mid-unroll; its replacement rebuilds the
    env from the same seed and the actions sent, acts that unroll again with the same params,
    and the run ends bit-identical to one without the failure."""
    config, _ = parse_args(
        [
            *QUICK,
            "--config.deterministic=true",
            "--config.sebulba.async_envs=false",
            "--config.sebulba.envs_per_actor=8",
            "--config.batch_size=16",
            "--config.sebulba.num_actor_threads=2",
            "--config.total_env_steps=6400",
            "--config.eval_every_updates=0",
            "--config.sebulba.env_epoch_updates=3",
        ]
    )
    clean = Trainer(config, str(tmp_path / "clean"), quiet=True).run().summary
    made = inject_env_failures(monkeypatch, lambda n: 50 if n == 1 else None)
    summary = Trainer(config, str(tmp_path / "run"), quiet=True).run().summary
    assert summary["actor_restarts"] == 1
    assert summary["updates"] == 20 and summary["stop_reason"] == "total_env_steps reached"
    assert len(made) == 2 * 7 + 1  # a pool per actor per epoch of 3 updates, and the restart
    assert summary["params_sha256"] == clean["params_sha256"]


# Deterministic mode: two actors of 8 sync envs, one unroll of each per update; new envs every 3
# updates, so every resume below replays recorded actions to rebuild the envs.
DETERMINISTIC = [
    "--config",
    CARTPOLE,
    "--quiet",
    "--config.deterministic=true",
    "--config.sebulba.async_envs=false",
    "--config.sebulba.actor_loop=python",
    "--config.sebulba.envs_per_actor=8",
    "--config.batch_size=16",
    "--config.sebulba.num_actor_threads=2",
    "--config.total_env_steps=3200",
    "--config.eval_every_updates=0",
    "--config.eval_episodes=2",
    "--config.log_every_updates=2",
    "--config.checkpoint_every_updates=4",
    "--config.stop_at_eval_return=none",
    "--config.sebulba.env_epoch_updates=3",
]


def _run(script, workdir, *extra):
    out = subprocess.run(
        [sys.executable, *script, *DETERMINISTIC, "--workdir", str(workdir), *extra],
        capture_output=True,
        text=True,
        timeout=300,
    )
    return out


def test_deterministic_runs_interrupted_by_sigterm_or_sigkill_resume_to_the_same_params(tmp_path):
    """10 updates uninterrupted; the same with SIGTERM after update 5 then --resume; the same
    killed by SIGKILL after update 9 then --resume from its last complete checkpoint: all three
    end with bit-identical params."""
    out = _run([TRAIN], tmp_path / "whole")
    assert out.returncode == 0, out.stderr[-3000:]
    whole = _summary(tmp_path / "whole")
    assert whole["updates"] == 10

    out = _run([AT_UPDATE, "SIGTERM", "5"], tmp_path / "term")
    assert out.returncode == 0, out.stderr[-3000:]
    stopped = _summary(tmp_path / "term")
    assert stopped["stop_reason"] == "SIGTERM" and stopped["updates"] in (5, 6)
    out = _run([TRAIN], tmp_path / "term", "--resume")
    assert out.returncode == 0, out.stderr[-3000:]
    resumed = _summary(tmp_path / "term")
    assert resumed["resumed_from_update"] == stopped["updates"]
    assert resumed["initial_params_sha256"] == stopped["params_sha256"]
    assert resumed["updates"] == 10
    assert resumed["params_sha256"] == whole["params_sha256"]

    out = _run([AT_UPDATE, "SIGKILL", "9"], tmp_path / "kill")
    assert out.returncode == -signal.SIGKILL
    assert not (tmp_path / "kill" / "summary.json").exists()
    complete = [int(n) for n in os.listdir(tmp_path / "kill" / "checkpoints") if n.isdigit()]
    assert complete and max(complete) in (4, 8)  # 8's save may have been cut short
    out = _run([TRAIN], tmp_path / "kill", "--resume")
    assert out.returncode == 0, out.stderr[-3000:]
    resumed = _summary(tmp_path / "kill")
    assert resumed["resumed_from_update"] == max(complete)
    assert resumed["params_sha256"] == whole["params_sha256"]


def test_sigkill_mid_run_resumes_from_the_last_complete_checkpoint(tmp_path):
    """A real SIGKILL at an arbitrary moment of the default (asynchronous) mode: --resume starts
    from the newest complete checkpoint, with exactly its params and counters."""
    workdir = tmp_path / "run"
    args = [
        sys.executable,
        TRAIN,
        *QUICK[:2],
        "--workdir",
        str(workdir),
        "--quiet",
        "--config.total_env_steps=100_000_000",
        "--config.checkpoint_every_updates=5",
        "--config.eval_every_updates=0",
    ]
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    ckpts, deadline = workdir / "checkpoints", time.monotonic() + 180
    while not (ckpts.exists() and sum(n.isdigit() for n in os.listdir(ckpts)) >= 2):
        assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read()[-3000:]
        time.sleep(0.05)
    proc.kill()
    proc.wait(timeout=30)
    last = max(int(n) for n in os.listdir(ckpts) if n.isdigit())
    saved = tree_digest(restore_params(str(workdir), step=last))
    out = subprocess.run(
        [*args[:-3], "--config.total_env_steps=1", "--resume"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    summary = _summary(workdir)
    assert summary["resumed_from_update"] == summary["updates"] == last  # the budget was reached
    assert summary["initial_params_sha256"] == saved


def _impala_with_nan_loss_from(update: int):
    """IMPALA whose rewards (so loss, gradients and params) turn NaN from update `update` on."""

    def make(config, network_config, env_spec, run_shape):
        agent = make_impala(config, network_config, env_spec, run_shape)

        def update_fn(state, rollout):
            poison = jnp.where(state.update_step + 1 >= update, jnp.nan, 1.0)
            return agent.learner.update(state, rollout._replace(reward=rollout.reward * poison))

        learner = dataclasses.replace(agent.learner, update=update_fn)
        return dataclasses.replace(agent, learner=learner)

    return AgentEntry(ImpalaConfig, make)


def test_a_nan_loss_stops_the_run_and_keeps_the_last_good_checkpoint(tmp_path, monkeypatch):
    monkeypatch.setitem(agents.REGISTRY, "impala_nan", _impala_with_nan_loss_from(7))
    config, _ = parse_args(
        [*QUICK, "--config.algorithm=impala_nan", "--config.checkpoint_every_updates=5"]
    )
    workdir = tmp_path / "run"
    with pytest.raises(
        NonFiniteError, match=r"non-finite .*loss.* at update 7; the last checkpoint"
    ):
        Trainer(config, str(workdir), quiet=True).run()
    summary = _summary(workdir)
    assert summary["updates"] == 6 and summary["latest_checkpoint_step"] == 5
    assert "params_sha256" not in summary  # the state was poisoned: nothing of it is saved
    params = restore_params(str(workdir))
    assert all(np.isfinite(x).all() for x in jax.tree.leaves(params))


def test_a_nan_chunk_on_anakin_keeps_the_last_checkpoint_and_digests_its_carry(
    tmp_path, monkeypatch
):
    """On Anakin a chunk's updates are not donated away when one turns non-finite: the summary
    digests the (poisoned) carry and `save_last` gets its params, as before the shared shell;
    no checkpoint of it is written."""
    monkeypatch.setitem(agents.REGISTRY, "impala_nan", _impala_with_nan_loss_from(7))
    config = load_config(
        f"{CARTPOLE}:quick", algorithm="impala_nan", checkpoint_every_updates=5, **IMPALA_ON_ANAKIN
    )
    workdir, handed = tmp_path / "run", []
    hooks = Hooks(save_last=lambda params, metric, env_steps: handed.append(env_steps))
    with pytest.raises(NonFiniteError, match=r"non-finite .*loss.* by update 10; the last"):
        Trainer(config, str(workdir), quiet=True, hooks=hooks).run()
    summary = _summary(workdir)
    assert summary["updates"] == summary["latest_checkpoint_step"] == 5
    assert summary["params_sha256"] and summary["state_sha256"] and handed == [5 * 8 * 20]
    params = restore_params(str(workdir))
    assert all(np.isfinite(x).all() for x in jax.tree.leaves(params))


def _quick_run(workdir):
    config, _ = parse_args([*QUICK, "--config.checkpoint_every_updates=20"])
    Trainer(config, str(workdir), quiet=True).run()


def _snapshot(workdir):
    """Every file under `workdir` with its size and modification time."""
    return {
        os.path.join(d, f): (
            os.stat(os.path.join(d, f)).st_size,
            os.stat(os.path.join(d, f)).st_mtime_ns,
        )
        for d, _, files in os.walk(workdir)
        for f in files
    }


def test_resuming_with_other_shapes_is_refused_and_nothing_is_overwritten(tmp_path, capsys):
    workdir = tmp_path / "run"
    _quick_run(workdir)
    before = _snapshot(workdir)
    code = main([*QUICK[:-1], str(workdir), "--resume", "--config.network.hidden_sizes=(32,)"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1, err
    assert "does not fit this config" in err and "in the checkpoint but" in err, err
    assert _snapshot(workdir) == before


def test_a_second_ctrl_c_leaves_at_once(tmp_path):
    # The first Ctrl-C (after update 2) asks for a clean stop; its final save is held open, so
    # the second one certainly lands in the middle of the shutdown.
    workdir, holding = tmp_path / "run", tmp_path / "holding"
    args = [
        sys.executable,
        AT_UPDATE,
        "SIGINT",
        "2",
        *QUICK[:2],
        "--workdir",
        str(workdir),
        "--quiet",
        "--config.total_env_steps=100_000_000",
    ]
    env = {**os.environ, "HOLD_SAVE": str(holding)}
    proc = subprocess.Popen(args, stderr=subprocess.PIPE, text=True, env=env)
    deadline = time.monotonic() + 180
    while not holding.exists():
        assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read()[-3000:]
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=30)  # the held save would take 120 s
    assert proc.returncode == 130, err[-3000:]
    assert err.strip().splitlines()[-1].startswith("error: interrupted: left at once"), err[-3000:]
