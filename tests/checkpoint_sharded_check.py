"""Run on 4 fake CPU devices (`four_device_checks.py`, in its own process).

Saves a state with one leaf split over 4 devices and restores it onto its own sharding, onto 2
devices and replicated; prints a JSON verdict."""

import json
import os
import tempfile

import jax
import numpy as np
import orbax.checkpoint as ocp
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from jaxrl_dist.checkpoints.store import Checkpointer, abstract_like, tree_digest


def verdict() -> dict:
    assert jax.device_count() == 4, jax.devices()
    four = Mesh(np.array(jax.devices()), ("data",))
    two = Mesh(np.array(jax.devices()[:2]), ("data",))
    split, whole = NamedSharding(four, PartitionSpec("data")), NamedSharding(four, PartitionSpec())
    state = {
        "buffer": jax.device_put(np.arange(24, dtype=np.float32).reshape(8, 3), split),
        "params": jax.device_put(np.linspace(0, 1, 5, dtype=np.float32), whole),
        "step": jax.device_put(np.int32(7), whole),
    }
    assert not state["buffer"].is_fully_replicated
    directory = tempfile.mkdtemp()
    halves = NamedSharding(two, PartitionSpec("data"))
    targets = [
        abstract_like(state),
        {
            **abstract_like(state),
            "buffer": jax.ShapeDtypeStruct((8, 3), np.float32, sharding=halves),
        },
        {
            **abstract_like(state),
            "buffer": jax.ShapeDtypeStruct((8, 3), np.float32, sharding=whole),
        },
    ]  # its own sharding, 2 devices, replicated
    with Checkpointer(directory) as ckpt:
        ckpt.save(1, state, {"updates": 1})
        ckpt.wait()
        restored = [ckpt.restore(target)[0] for target in targets]
    stored = ocp.StandardCheckpointer().metadata(f"{directory}/1/state").item_metadata.tree
    names = sorted(
        jax.tree_util.keystr(p) for p, _ in jax.tree_util.tree_flatten_with_path(stored)[0]
    )
    verdict = {
        "stored": names,
        "packed_files": sorted(os.listdir(f"{directory}/1/packed")),
        "same_bits": [tree_digest(r) == tree_digest(state) for r in restored],
        "restored_specs": [list(r["buffer"].sharding.spec) for r in restored],
        "restored_devices": [len(r["buffer"].sharding.device_set) for r in restored],
    }
    return verdict


if __name__ == "__main__":
    print(json.dumps(verdict()))
