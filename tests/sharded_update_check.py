"""Run on 4 fake CPU devices (`four_device_checks.py`, in its own process).

Compares learner updates on a 4-device learner mesh with the 1-device updates on the same
batches, for IMPALA and PPO, discrete and continuous (with observation normalisation), and prints
a JSON verdict per case.
"""

import json
import sys

import jax
import numpy as np

from jaxrl_dist.agents.base import RunShape
from jaxrl_dist.agents.impala import ImpalaConfig, make_impala
from jaxrl_dist.agents.ppo import PPOConfig, make_ppo
from jaxrl_dist.envs import EnvSpec
from jaxrl_dist.learning.learner import Learner
from jaxrl_dist.learning.mesh import select_devices
from jaxrl_dist.networks import NetworkConfig
from jaxrl_dist.types import Rollout

DISCRETE = EnvSpec((4,), np.dtype(np.float32), 3)
CONTINUOUS = EnvSpec((4,), np.dtype(np.float32), 0, 2, (-1.0, -1.0), (1.0, 1.0))


def random_rollout(spec: EnvSpec, t=6, b=8, seed=0) -> Rollout:
    rng = np.random.default_rng(seed)
    ended = rng.random((t + 1, b)) < 0.15
    if spec.continuous:
        action = rng.normal(size=(t, b, spec.action_dim)).astype(np.float32)
    else:
        action = rng.integers(0, spec.num_actions, size=(t, b)).astype(np.int32)
    return Rollout(
        obs=(3.0 + 2.0 * rng.normal(size=(t + 1, b, 4))).astype(np.float32),
        reward=rng.normal(size=(t + 1, b)).astype(np.float32),
        terminated=ended & (rng.random((t + 1, b)) < 0.5),
        truncated=ended,
        action=action,
        agent_extras={"log_prob": np.log(rng.uniform(0.1, 0.9, size=(t, b))).astype(np.float32)},
        policy_version=np.zeros((t, b), np.int32),
    )


CASES = {
    "impala": (make_impala, ImpalaConfig(), DISCRETE, NetworkConfig(torso="mlp")),
    "ppo": (make_ppo, PPOConfig(num_minibatches=2), DISCRETE, NetworkConfig(torso="mlp")),
    "ppo_continuous_obs_norm": (
        make_ppo,
        PPOConfig(num_minibatches=2),
        CONTINUOUS,
        NetworkConfig(torso="mlp", normalize_obs=True, tanh_squash=True),
    ),
    "impala_continuous": (make_impala, ImpalaConfig(), CONTINUOUS, NetworkConfig(torso="mlp")),
}


def run(case, learner_ids):
    make, algo_config, spec, net_config = CASES[case]
    t, b = 6, 8  # random_rollout's unroll and batch
    agent = make(algo_config, net_config, spec, RunShape(10 * t * b, t * b))  # 10 updates
    assert RunShape(10 * t * b, t * b).num_updates == 10
    learner = Learner(agent.learner, select_devices((0,), learner_ids), seed=0)
    state = learner.init_state()
    for step in range(3):  # three updates: the optimizer state matters too
        batch = learner.put_batch(random_rollout(spec, t, b, seed=step))
        state, metrics, priorities = learner.update(state, batch)
        assert priorities is None  # the actor-critic agents take no priorities back
    shardings = {str(x.sharding) for x in jax.tree.leaves(batch)}
    return jax.device_get(learner.actor_params(state)), jax.device_get(metrics), shardings


def compare(case):
    params_1, metrics_1, _ = run(case, (0,))
    params_4, metrics_4, shardings = run(case, (0, 1, 2, 3))
    diffs = jax.tree.map(lambda a, b: float(np.max(np.abs(a - b))), params_1, params_4)
    return {
        "max_param_diff": max(jax.tree.leaves(diffs)),
        "metric_diffs": {k: abs(float(metrics_1[k]) - float(metrics_4[k])) for k in metrics_1},
        "shardings": sorted(shardings),
    }


def verdict() -> dict:
    assert jax.device_count() == 4, f"expected 4 fake CPU devices, got {jax.device_count()}"
    return {case: compare(case) for case in CASES}


if __name__ == "__main__":
    json.dump(verdict(), sys.stdout)
