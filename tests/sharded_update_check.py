"""Run in its own process with JAX_NUM_CPU_DEVICES=4 (see test_sharded_update.py).

Compares the IMPALA learner update on a 4-device learner mesh with the 1-device update on the
same batch, and prints a JSON verdict.
"""

import json
import sys

import jax
import numpy as np

from jaxrl_dist.algorithms.impala import ImpalaConfig, make_impala
from jaxrl_dist.envs import EnvSpec
from jaxrl_dist.networks import NetworkConfig
from jaxrl_dist.runtime import Learner, select_devices
from jaxrl_dist.types import Rollout


def random_rollout(t=6, b=8, obs_dim=4, num_actions=3, seed=0) -> Rollout:
    rng = np.random.default_rng(seed)
    ended = rng.random((t + 1, b)) < 0.15
    return Rollout(
        obs=rng.normal(size=(t + 1, b, obs_dim)).astype(np.float32),
        reward=rng.normal(size=(t + 1, b)).astype(np.float32),
        terminated=ended & (rng.random((t + 1, b)) < 0.5),
        truncated=ended,
        action=rng.integers(0, num_actions, size=(t, b)).astype(np.int32),
        agent_extras={"logits": rng.normal(size=(t, b, num_actions)).astype(np.float32)},
        policy_version=np.zeros((t, b), np.int32),
    )


def run(learner_ids):
    spec = EnvSpec((4,), np.dtype(np.float32), 3)
    algo = make_impala(ImpalaConfig(), NetworkConfig(torso="mlp"), spec, num_updates=10)
    learner = Learner(algo, select_devices((0,), learner_ids))
    state = learner.put_state(algo.init(jax.random.PRNGKey(0)))
    for step in range(3):  # three updates: the optimizer state matters too
        state, metrics = learner.update(state, learner.put_batch(random_rollout(seed=step)))
    shardings = {str(x.sharding) for x in jax.tree.leaves(learner.put_batch(random_rollout()))}
    return jax.device_get(state.params), jax.device_get(metrics), shardings


def main():
    assert jax.device_count() == 4, f"expected 4 fake CPU devices, got {jax.device_count()}"
    params_1, metrics_1, _ = run((0,))
    params_4, metrics_4, shardings = run((0, 1, 2, 3))
    diffs = jax.tree.leaves(
        jax.tree.map(lambda a, b: float(np.max(np.abs(a - b))), params_1, params_4)
    )
    metric_diffs = {k: abs(float(metrics_1[k]) - float(metrics_4[k])) for k in metrics_1}
    json.dump(
        {
            "max_param_diff": max(diffs),
            "metric_diffs": metric_diffs,
            "shardings": sorted(shardings),
        },
        sys.stdout,
    )


if __name__ == "__main__":
    main()
