"""The throughput benchmark's stage helpers (`benchmarks/stages.py`), in process: which stage
bounds the pipeline (`bottleneck`), and the learner stage's synthetic batch."""

import os
import sys

import jax
import numpy as np
import pytest

from jaxrl_dist.config.cli import parse_args
from jaxrl_dist.types import Rollout, assert_rollout_shapes

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CARTPOLE_QUICK = os.path.join(ROOT, "configs", "impala_cartpole.py") + ":quick"
PENDULUM_QUICK = os.path.join(ROOT, "configs", "ppo_pendulum.py") + ":quick"

sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
import stages  # noqa: E402

# --- stages.bottleneck ---------------------------------------------------------------------------


def _measured(raw=1000.0, actors=800.0, learner=600.0) -> dict:
    return {
        "raw_async": {"sps": raw},
        "actors": {"sps": actors},
        "learner": {"with_transfer_samples_per_s": learner, "resident_samples_per_s": 1e9},
    }


def test_bottleneck_names_the_learner_when_it_is_slowest():
    """The learner's transfer + update samples/s is the smallest capacity: it is named."""
    out = stages.bottleneck(_measured(learner=100.0))
    assert out["stage"].startswith("learner")
    assert sorted(out["capacities_sps"].values()) == [100.0, 800.0, 1000.0]
    assert "learner_busy_s_per_s" not in out  # no end-to-end run, no timers


def test_bottleneck_names_the_actors_when_they_are_slowest():
    """Actors below both raw EnvPool and the learner: actors named; raw EnvPool alone: env named."""
    assert stages.bottleneck(_measured(actors=50.0))["stage"].startswith("actors")
    only_raw = stages.bottleneck({"raw_async": {"sps": 5.0}})
    assert only_raw["stage"].startswith("environment")
    assert list(only_raw["capacities_sps"].values()) == [5.0]


def test_bottleneck_end_to_end_fields_from_the_timers():
    """Learner busy = batch + transfer + update + publish; queue waits as given; e2e / slowest."""
    measured = _measured(actors=200.0)
    measured["end_to_end"] = {
        "sps": 50.0,
        "timers_s_per_s": {
            "env_s": 0.9,
            "inference_s": 0.5,
            "rollout_s": 0.2,  # actors' timers: not counted
            "queue_put_s": 0.4,
            "queue_get_s": 0.05,
            "batch_s": 0.01,
            "transfer_s": 0.1,
            "update_s": 0.3,
            "publish_s": 0.04,
        },
    }
    out = stages.bottleneck(measured)
    assert out["stage"].startswith("actors")
    assert out["learner_busy_s_per_s"] == pytest.approx(0.45)
    assert out["actors_waiting_on_queue_s_per_s"] == pytest.approx(0.4)
    assert out["learner_waiting_on_actors_s_per_s"] == pytest.approx(0.05)
    assert out["end_to_end_over_slowest_stage"] == pytest.approx(50.0 / 200.0)

    measured["end_to_end"]["timers_s_per_s"] = {"update_s": 0.7}  # missing timers count as 0
    out = stages.bottleneck(measured)
    assert out["learner_busy_s_per_s"] == pytest.approx(0.7)
    assert out["actors_waiting_on_queue_s_per_s"] == 0.0
    assert out["learner_waiting_on_actors_s_per_s"] == 0.0


# --- stages.synthetic_rollout --------------------------------------------------------------------


@pytest.mark.parametrize("config_spec", [CARTPOLE_QUICK, PENDULUM_QUICK], ids=["discrete", "cont"])
def test_synthetic_rollout_has_the_real_layout_and_updates(config_spec):
    """The learner benchmark's synthetic `[T + 1, B]` batch: the layout the learner checks, the
    env's observation shape and dtype, actions of the policy's shape, and one update on it gives
    finite metrics."""
    config, _ = parse_args(["--config", config_spec, "--workdir", "unused"])
    spec, _, agent = stages.build(config)
    state = agent.learner.init(jax.random.PRNGKey(0))
    t, b = config.unroll_length, config.batch_size
    rollout = stages.synthetic_rollout(agent, spec, agent.learner.actor_params(state), t, b, seed=3)

    assert isinstance(rollout, Rollout)
    assert_rollout_shapes(rollout)
    assert rollout.obs.shape == (t + 1, b, *spec.obs_shape)
    assert rollout.obs.dtype == spec.obs_dtype
    for x in (rollout.reward, rollout.terminated, rollout.truncated):
        assert x.shape == (t + 1, b)
    assert rollout.terminated.dtype == rollout.truncated.dtype == np.bool_
    expected_action = (t, b, spec.action_dim) if spec.continuous else (t, b)
    assert rollout.action.shape == expected_action
    assert rollout.policy_version.shape == (t, b)
    assert rollout.agent_extras
    for v in rollout.agent_extras.values():
        assert v.shape[:2] == (t, b)
    if not spec.continuous:
        assert rollout.action.min() >= 0 and rollout.action.max() < spec.num_actions

    new_state, metrics = jax.jit(agent.learner.update)(state, rollout)
    metrics = jax.device_get(metrics)
    assert metrics
    for name, value in metrics.items():
        assert np.all(np.isfinite(value)), (name, value)
    assert int(new_state.update_step) == int(state.update_step) + 1
