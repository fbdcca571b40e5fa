"""Run on 4 fake CPU devices (`four_device_checks.py`): the Anakin program on a 1-device mesh and
on a 4-device mesh (the env axis split 4 ways) from the same seed; prints how far apart the
learner states are after a few updates: one JSON line, a result per config (the on-policy and
the replay data flows), keyed by config file name."""

import json

import jax
import jax.numpy as jnp
import numpy as np

from jaxrl_dist.config.cli import load_config
from jaxrl_dist.run.trainer import Trainer

UPDATES = 6
CONFIGS = ("anakin_ppo_cartpole.py", "anakin_rainbow_cartpole.py")


def final_state(config_file, device_ids):
    config = load_config(
        f"configs/{config_file}:quick",
        batch_size=8,
        **{"anakin.num_seeds": 2},
        learner_device_ids=device_ids,
    )
    trainer = Trainer(config, "/tmp/unused_anakin_devices_check")
    anakin = trainer.engine.anakin
    assert anakin.mesh.size == (len(device_ids) or 4)
    carry = anakin.init(jnp.arange(2, dtype=jnp.uint32), None)
    start = jax.device_get(carry.learner.params)
    carry = anakin.train(carry, jnp.int32(UPDATES))
    shards = {len(x.sharding.device_set) for x in jax.tree.leaves(carry.acting)}
    return jax.device_get(carry), shards, start


def largest(diffs) -> float:
    return max(jax.tree.leaves(diffs), default=0.0)


def gap(a, b) -> float:
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.max(np.abs(a - b))) if a.size else 0.0


def compare(config_file) -> dict:
    one, shards_one, _ = final_state(config_file, (0,))
    four, shards_four, start = final_state(config_file, ())
    diffs = jax.tree.map(gap, one, four)
    return {
        "devices": [sorted(shards_one), sorted(shards_four)],
        "max_params_diff": largest(diffs.learner.params),
        "max_diff": largest(diffs),
        "update_step": np.asarray(four.learner.update_step).tolist(),
        "params_moved": largest(jax.tree.map(gap, start, four.learner.params)),
    }


def verdict() -> dict:
    assert len(jax.devices()) == 4
    return {name: compare(name) for name in CONFIGS}


if __name__ == "__main__":
    print(json.dumps(verdict()))
