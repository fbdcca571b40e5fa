"""Run on 4 fake CPU devices (tests/fake_devices.py): the Anakin program on a 1-device mesh and
on a 4-device mesh (the env axis split 4 ways) from the same seed; prints how far apart the
learner states are after a few updates, as one JSON line."""

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh

from jaxrl_dist.anakin.trainer import AnakinTrainer
from jaxrl_dist.config.cli import load_config

UPDATES = 6


def final_state(device_ids):
    config = load_config(
        "configs/anakin_ppo_cartpole.py:quick", batch_size=8, num_seeds=2,
        learner_device_ids=device_ids,
    )  # fmt: skip
    trainer = AnakinTrainer(config, "/tmp/unused_anakin_devices_check")
    anakin = trainer.anakin
    assert anakin.mesh.size == (len(device_ids) or 4)
    carry = anakin.init(jnp.arange(2, dtype=jnp.uint32))
    carry = anakin.train(carry, jnp.int32(UPDATES))
    shards = {len(x.sharding.device_set) for x in jax.tree.leaves(carry.acting)}
    return jax.device_get(carry), shards


def main():
    assert len(jax.devices()) == 4
    one, shards_one = final_state((0,))
    four, shards_four = final_state(())
    diffs = jax.tree.map(
        lambda a, b: float(np.max(np.abs(np.asarray(a, np.float64) - np.asarray(b, np.float64))))
        if np.size(a) else 0.0,
        one, four,
    )  # fmt: skip
    params = jax.tree.leaves(diffs.learner.params)
    print({
        "devices": [sorted(shards_one), sorted(shards_four)],
        "max_params_diff": max(params),
        "max_diff": max(jax.tree.leaves(diffs)),
        "update_step": np.asarray(four.learner.update_step).tolist(),
        "params_moved": float(np.max(np.abs(
            np.asarray(jax.tree.leaves(four.learner.params)[0])))),
    }.__repr__().replace("'", '"'))  # fmt: skip


if __name__ == "__main__":
    del Mesh
    main()
