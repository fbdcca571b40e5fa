"""The XLA actor loop (`config.sebulba.actor_loop="xla"`): its jitted unroll against a Python
loop on the same EnvPool stream, a training run through it, its config checks and its watchdog."""

import json
import os
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxrl_dist.acting.xla_actor import make_unroll
from jaxrl_dist.agents.base import ActorCore
from jaxrl_dist.config import ConfigError
from jaxrl_dist.config.cli import load_config
from jaxrl_dist.envs import EpisodeTracker, make_env
from jaxrl_dist.run.trainer import Trainer
from jaxrl_dist.sebulba.engine import SebulbaEngine
from jaxrl_dist.types import assert_rollout_shapes

HERE = os.path.dirname(os.path.abspath(__file__))
ENV_KWARGS = {"max_episode_steps": 15}  # episodes end (truncated or terminated) within an unroll


def _pole_core() -> ActorCore:
    """A deterministic policy (push towards the pole's lean, scaled by `params`) whose per-env
    state counts its calls: the carry must hand it from unroll to unroll."""

    def init_state(identity, num_envs, key):
        return {"calls": jnp.zeros(num_envs, jnp.int32)}

    def act(params, obs, state):
        action = (obs[:, 2] + params * obs[:, 3] > 0).astype(jnp.int32)
        return action, {"calls": state["calls"]}, {"calls": state["calls"] + 1}

    return ActorCore(init_state, act, lambda params, obs, state: act(params, obs, state)[::2])


def _python_stream(num_envs: int, steps: int, params: float):
    """The same policy stepped from Python: `steps + 1` recv() results sorted by env id, the
    actions, and the episodes `EpisodeTracker` reports."""
    env = make_env("CartPole-v1", ENV_KWARGS, num_envs, num_envs, seed=5, num_threads=1)
    tracker, rows, actions, episodes = EpisodeTracker(num_envs), [], [], []
    env.async_reset()
    for t in range(steps + 1):
        obs, reward, terminated, truncated, info = env.recv()
        order = np.argsort(info["env_id"])
        info = {k: v[order] for k, v in info.items() if k in ("env_id", "elapsed_step")}
        row = (obs[order], reward[order], terminated[order], truncated[order])
        rows.append(row)
        episodes.append(tracker.update(info["env_id"], *row[1:], info))
        if t < steps:
            action = (row[0][:, 2] + params * row[0][:, 3] > 0).astype(np.int32)
            actions.append(action)
            env.send(action, np.arange(num_envs, dtype=np.int32))
    env.close()
    return rows, np.stack(actions), episodes


@pytest.mark.parametrize("groups", [1, 2, 4])
def test_unroll_matches_a_python_loop_step_for_step(groups):
    """One pool, or the same envs in 2 or 4 pools stepped in turn (`env_groups_per_actor`),
    each seeded as its envs are in one pool: the same rows, actions and episodes as the Python
    loop on one pool."""
    num_envs, width, t, unrolls, params = 8, 4, 12, 3, np.float32(0.5)
    rows, actions, episodes = _python_stream(num_envs, t * unrolls, params)
    n = num_envs // groups
    envs = [
        make_env("CartPole-v1", ENV_KWARGS, n, n, seed=5 + g * n, num_threads=1)
        for g in range(groups)
    ]
    xla = [env.xla() for env in envs]
    core = _pole_core()
    pools = [(recv, send) for _, recv, send, _ in xla]
    start, unroll = make_unroll(core, pools, unroll_length=t, width=width)
    for env in envs:
        env.async_reset()
    state = core.init_state(None, num_envs, None)
    handles, carry = jax.jit(start)(tuple(h for h, *_ in xla), state)
    unroll = jax.jit(unroll)
    returns, lengths = [], []
    for k in range(unrolls):
        handles, carry, out = unroll(params, handles, carry)
        out = jax.device_get(out)
        assert len(out.rollouts) == num_envs // width
        for part, r in enumerate(out.rollouts):
            cols = slice(part * width, (part + 1) * width)
            assert_rollout_shapes(r._replace(policy_version=np.zeros((t, width))))
            window = rows[k * t : (k + 1) * t + 1]  # row 0 is the last of the unroll before
            for i, name in enumerate(("obs", "reward", "terminated", "truncated")):
                want = np.stack([row[i][cols] for row in window])
                np.testing.assert_array_equal(getattr(r, name), want, err_msg=name)
            np.testing.assert_array_equal(r.action, actions[k * t : (k + 1) * t, cols])
            calls = np.arange(k * t, (k + 1) * t)[:, None] * np.ones((1, width), int)
            np.testing.assert_array_equal(r.agent_extras["calls"], calls)
        returns.append(out.episode_return[out.ended])
        lengths.append(out.episode_length[out.ended])
    for env in envs:
        env.close()
    # The episodes read where `ended` are EpisodeTracker's, in the same order (time, then env).
    want_returns = np.concatenate([e[0] for e in episodes[1:]])
    want_lengths = np.concatenate([e[1] for e in episodes[1:]])
    assert len(want_returns) >= num_envs  # every env ended at least one episode
    np.testing.assert_array_equal(np.concatenate(returns), want_returns)
    np.testing.assert_array_equal(np.concatenate(lengths), want_lengths)


def test_a_run_with_the_xla_actor_loop_trains_on_device_rollouts(tmp_path):
    config = load_config(
        "configs/impala_cartpole.py:quick",
        **{
            "sebulba.actor_loop": "xla",
            "sebulba.async_envs": False,
            "sebulba.env_groups_per_actor": 2,
        },  # one group steps while the policy acts on the other
        total_env_steps=12_800,
        log_every_updates=5,
    )
    summary = Trainer(config, str(tmp_path), quiet=True).run().summary
    # 2 groups x 16 envs x 20 steps per unroll, cut into two rollouts of 16: the learner batch.
    assert summary["env_steps"] >= 12_800 and summary["updates"] == summary["env_steps"] // 320
    assert summary["episodes"] > 0 and summary["actor_restarts"] == 0
    with open(tmp_path / "metrics.jsonl") as f:
        logs = [json.loads(line) for line in f if "timers/unroll_s" in line]
    assert logs and all(m["timers/unroll_s"] > 0 and m["timers/env_s"] == 0 for m in logs)
    assert all(0 < m["charts/episode_return"] <= 500 for m in logs)


@pytest.mark.parametrize(
    "overrides, field",
    [
        ({"sebulba.actor_loop": "jit"}, "actor_loop"),
        ({"sebulba.actor_loop": "xla", "sebulba.async_envs": True}, "async_envs"),
        (
            {
                "sebulba.actor_loop": "xla",
                "sebulba.async_envs": False,
                "sebulba.inference.client": "server",
            },
            "inference",
        ),
        (
            {
                "sebulba.actor_loop": "xla",
                "sebulba.async_envs": False,
                "sebulba.actor_hang_timeout_s": 0,
            },
            "actor_hang",
        ),
        ({"sebulba.env_groups_per_actor": 2}, "env_groups_per_actor"),  # the Python loop
        (
            {
                "sebulba.actor_loop": "xla",
                "sebulba.async_envs": False,
                "sebulba.env_groups_per_actor": 3,
            },
            "env_groups",
        ),
        (
            {
                "sebulba.actor_loop": "xla",
                "sebulba.async_envs": False,
                "sebulba.env_groups_per_actor": 0,
            },
            "env_groups",
        ),
    ],
)
def test_the_xla_actor_loop_refuses_what_it_cannot_do(overrides, field):
    with pytest.raises(ConfigError, match=f"config.sebulba.(actor_loop|{field})") as e:
        load_config("configs/impala_cartpole.py:quick", **overrides)
    assert "\n" not in str(e.value)


def test_the_xla_actor_loop_refuses_64_bit_envs_before_the_run():
    config = load_config(
        "configs/impala_cartpole.py:quick",
        env_id="HalfCheetah-v5",
        **{"sebulba.actor_loop": "xla", "sebulba.async_envs": False, "network.tanh_squash": True},
    )
    with pytest.raises(ConfigError, match="cannot step HalfCheetah-v5: .* float64") as e:
        SebulbaEngine.machine(config)
    assert "\n" not in str(e.value) and "actor_loop='python'" in str(e.value)


def test_the_xla_actor_loop_refuses_actor_devices_envpool_has_no_xla_calls_for(monkeypatch):
    """EnvPool registers its XLA calls for CPUs and CUDA GPUs: a TPU actor is refused in one
    line before the run (here a CPU device reporting itself as a TPU)."""
    from jaxrl_dist.envs.envpool_env import xla_device_problem

    assert xla_device_problem(["cpu", "gpu"]) is None
    assert "not tpu" in xla_device_problem(["cpu", "tpu"])

    class Tpu:
        platform = "tpu"

    devices = [Tpu()]
    monkeypatch.setattr(
        "jaxrl_dist.sebulba.engine.learner_devices",
        lambda config: type("D", (), {"actor_devices": devices})(),
    )
    config = load_config(
        "configs/impala_cartpole.py:quick",
        **{"sebulba.actor_loop": "xla", "sebulba.async_envs": False},
    )
    with pytest.raises(ConfigError, match="EnvPool provides for CPUs and CUDA GPUs only") as e:
        SebulbaEngine.machine(config)
    assert "\n" not in str(e.value) and "env_groups_per_actor=1" in str(e.value)
    devices[:] = []  # no TPU: the check passes on to the env's own
    SebulbaEngine.machine(config)


def test_a_hung_unroll_stops_the_run_with_its_reason(tmp_path):
    """An unroll that never returns (here a callback that sleeps an hour, as a `recv` stuck
    inside XLA would) stops the run within the watchdog's limit: exit 1, the reason in the
    summary and on stderr, a final checkpoint, and no wait for the stuck thread."""
    args = [
        sys.executable,
        os.path.join(HERE, "hang_unroll.py"),
        "--config",
        "configs/impala_cartpole.py:quick",
        "--config.sebulba.actor_loop=xla",
        "--config.sebulba.async_envs=False",
        "--config.sebulba.actor_hang_timeout_s=2",
        "--workdir",
        str(tmp_path),
    ]
    done = subprocess.run(args, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1, done.stderr[-2000:]
    assert "inside one jitted EnvPool unroll" in done.stderr
    assert "did not stop within" not in done.stderr  # the hung thread was not waited for
    assert "actors [0] hung inside a call that cannot time out" in done.stderr
    with open(tmp_path / "summary.json") as f:
        summary = json.load(f)
    assert "inside one jitted EnvPool unroll" in summary["stop_reason"]
    assert summary["latest_checkpoint_step"] == 0
