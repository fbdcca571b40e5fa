"""Which devices act and which learn, and the learner mesh."""

from __future__ import annotations

from typing import NamedTuple

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

DATA_AXIS = "data"


class Devices(NamedTuple):
    actor_devices: list[jax.Device]
    learner_mesh: Mesh

    @property
    def num_learner_devices(self) -> int:
        """Learner devices over all processes."""
        return self.learner_mesh.size

    def replicated(self) -> NamedSharding:
        """Params and optimizer state: a full copy on every learner device."""
        return NamedSharding(self.learner_mesh, PartitionSpec())

    def batch_sharding(self, axis: int = 1) -> NamedSharding:
        """Rollouts `[T(+1), B, ...]`: split along the env axis B (`axis`)."""
        return NamedSharding(self.learner_mesh, PartitionSpec(*[None] * axis, DATA_AXIS))


def select_devices(actor_ids: tuple[int, ...], learner_ids: tuple[int, ...]) -> Devices:
    """Builds the device split from local device ids; an empty `learner_ids` means all.

    Actors use this process's devices. The learner mesh takes the same local ids on every process
    (processes are alike), in process order, so process p's devices hold the p-th slice of the
    global batch. On one device, actors and learner share it. Raises ValueError naming a bad id.
    """
    local = _local_devices(jax.process_index())
    by_id = {i: d for i, d in enumerate(local)}
    for field, ids in (("actor_device_ids", actor_ids), ("learner_device_ids", learner_ids)):
        for i in ids:
            if i not in by_id:
                raise ValueError(
                    f"config.{field} names device {i} but only {len(local)} local devices exist "
                    f"(ids 0..{len(local) - 1})"
                )
    if len(set(learner_ids)) != len(learner_ids):
        raise ValueError(
            f"config.learner_device_ids={tuple(learner_ids)} names a device twice; fix it with "
            "config.learner_device_ids=<distinct ids>"
        )
    learners = []
    for process in range(jax.process_count()):
        devices = _local_devices(process)
        learners += [devices[i] for i in learner_ids] if learner_ids else devices
    return Devices([by_id[i] for i in actor_ids], Mesh(np.array(learners), (DATA_AXIS,)))


def _local_devices(process: int) -> list[jax.Device]:
    """One process's devices, ordered by id (the order `jax.local_devices()` gives locally)."""
    return sorted((d for d in jax.devices() if d.process_index == process), key=lambda d: d.id)
