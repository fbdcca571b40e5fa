"""The Anakin runtime: runs end to end through scripts/train.py, resumes bit-identically, vmaps
seeds (each seed as its own run would go), gives the same results on 1 and 4 devices, shares
hooks, run-time hyperparameters, checkpoints and evaluation with Sebulba."""

import json
import os

import numpy as np
import pytest
from train_runs import IMPALA_ON_ANAKIN, interrupted_run, train_main

from jaxrl_dist.checkpoints.policy import load_policy
from jaxrl_dist.config import ConfigError
from jaxrl_dist.config.cli import load_config
from jaxrl_dist.run.hooks import Hooks
from jaxrl_dist.run.trainer import Trainer

QUICK = "configs/anakin_ppo_cartpole.py:quick"


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory):
    """One `scripts/train.py` run of the quick config, with an evaluation and a checkpoint."""
    workdir = str(tmp_path_factory.mktemp("anakin") / "run")
    return workdir, train_main(
        QUICK, workdir, "--config.eval_every_updates=20", "--config.checkpoint_every_updates=20"
    )


def test_quick_run_writes_what_a_sebulba_run_writes(quick_run):
    workdir, summary = quick_run
    assert summary["runtime"] == "anakin" and summary["stop_reason"] == "total_env_steps reached"
    assert summary["env_steps"] == 20_480 and summary["updates"] == 40
    assert summary["episodes"] > 0 and summary["final_eval_return"] is not None
    assert [e["updates"] for e in summary["evals"]] == [20, 40]
    assert summary["checkpoint_steps"] == [20, 40]
    lines = [json.loads(x) for x in open(os.path.join(workdir, "metrics.jsonl"))]
    logged = [x for x in lines if "charts/episode_return" in x]
    assert logged and all(x["charts/episode_return"] > 0 for x in logged)
    assert any("losses/pg_loss" in x for x in lines)
    assert summary["startup_s"] > 0 and summary["compile"]["compiles"] >= 1  # the shell's, too


def test_checkpoint_loads_as_a_policy_on_envpool(quick_run):
    """The saved params are the first seed's actor params: load_policy rebuilds the agent and
    plays EnvPool's CartPole with them."""
    workdir, summary = quick_run
    policy = load_policy(workdir)
    assert policy.step == 40
    from jaxrl_dist.envs import make_env

    env = make_env("CartPole-v1", {}, 4, 4, seed=0)
    obs, _ = env.reset()
    action = np.asarray(policy.act(obs))
    assert action.shape == (4,) and set(action.tolist()) <= {0, 1}


def _run(tmp_path, name, hooks=None, resume=False, **overrides):
    config = load_config(QUICK, **{"log_every_updates": 4, **overrides})
    trainer = Trainer(config, str(tmp_path / name), resume=resume, quiet=True, hooks=hooks)
    return trainer, trainer.run()


def test_resume_is_bit_identical(tmp_path):
    steps = {"total_env_steps": 16 * 512, "eval_every_updates": 8, "checkpoint_every_updates": 5}
    _, whole = _run(tmp_path, "whole", **steps)
    config = load_config(QUICK, log_every_updates=4, **steps)
    cut = interrupted_run(config, str(tmp_path / "cut"), 6 * 512)
    # The hook runs between chunks (which end at logs, evaluations and saves): update 8 here.
    assert 6 <= cut.updates < 16 and cut.stop_reason == "interrupted for the test"
    _, resumed = _run(tmp_path, "cut", resume=True, **steps)
    assert resumed.updates == whole.updates == 16
    assert resumed.summary["state_sha256"] == whole.summary["state_sha256"]
    assert resumed.summary["params_sha256"] == whole.summary["params_sha256"]
    assert [e["return"] for e in resumed.summary["evals"] if e["updates"] in (8, 16)] == [
        e["return"] for e in whole.summary["evals"]
    ]


def test_hyperparams_change_at_run_time(tmp_path):
    holder = []

    def lower(episodes, env_steps):
        if env_steps == 10 * 512:
            holder[0].set_hyperparams(learning_rate=1e-5)

    config = load_config(QUICK, log_every_updates=1)
    hooks = Hooks(on_iteration=lower)
    trainer = Trainer(config, str(tmp_path / "hp"), quiet=True, hooks=hooks)
    holder.append(trainer)
    result = trainer.run()
    assert result.summary["hparam_changes"][0]["updates"] == 10
    lines = [json.loads(x) for x in open(os.path.join(result.workdir, "metrics.jsonl"))]
    rates = {
        x["charts/updates"]: x.get("losses/learning_rate") for x in lines if "charts/updates" in x
    }
    # The base rate times the annealing fraction at the update's first optimizer step (40
    # updates x 16 steps): 1 - 144/640 at update 10, 1 - 160/640 at update 11.
    assert rates[10] == pytest.approx(2.5e-4 * 0.775) and rates[11] == pytest.approx(1e-5 * 0.75)


def test_total_episodes_and_schedules_on_anakin(tmp_path):
    """The run stops at a chunk's end once its seeds finished `total_episodes`; the scheduled
    entropy cost is the base times 1 - update / updates (40 updates of 512 steps)."""
    _, result = _run(
        tmp_path,
        "episodes",
        log_every_updates=1,
        total_episodes=100,
        **{"schedules.entropy_cost": "linear"},
    )
    assert result.stop_reason == "total_episodes reached"
    assert 100 <= result.summary["episodes"] and result.updates < 40
    lines = [json.loads(x) for x in open(os.path.join(result.workdir, "metrics.jsonl"))]
    used = {
        x["charts/updates"]: x["losses/schedule/entropy_cost"]
        for x in lines
        if "losses/schedule/entropy_cost" in x
    }
    assert len(used) == result.updates
    for update, value in used.items():
        assert value == pytest.approx(0.01 * (1 - (update - 1) / 40), rel=1e-5)


@pytest.mark.parametrize(
    ("overrides", "expect"),
    [
        (
            {"num_seeds": 2, "runtime": "sebulba"},
            "num_seeds=2 is not used by config.runtime='sebulba'",
        ),
        ({"runtime": "warp"}, "config.runtime='warp' must be one of"),
        ({"env_id": "Pong-v5"}, "is not a JAX env"),
        (
            {"replay.batch_size": 64},
            "config.replay.batch_size=64 is not used by config.algorithm='ppo'",
        ),
    ],
)
def test_refusals_are_one_line(tmp_path, overrides, expect):
    with pytest.raises(ConfigError) as e:
        Trainer(load_config(QUICK, **overrides), str(tmp_path / "x"))
    assert expect in str(e.value) and "\n" not in str(e.value)
    assert not os.path.exists(tmp_path / "x")


def test_impala_runs_on_anakin(tmp_path):
    """`impala_cartpole.py` with `--config.runtime=anakin`, its Sebulba fields at their
    defaults (as the refusal says: Anakin would not use them)."""
    config = load_config(
        "configs/impala_cartpole.py:quick",
        eval_every_updates=30,
        eval_episodes=4,
        **IMPALA_ON_ANAKIN,
    )
    result = Trainer(config, str(tmp_path / "impala"), quiet=True).run()
    assert result.updates == 30 and result.final_eval_return is not None


def test_minatar_breakout_quick_runs(tmp_path):
    config = load_config("configs/anakin_ppo_breakout_minatar.py:quick")
    result = Trainer(config, str(tmp_path / "minatar"), quiet=True).run()
    assert result.updates == 10 and result.final_eval_return is not None
