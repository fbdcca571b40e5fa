"""The learner: the algorithm's update jitted on the learner mesh, batch split along envs.

The mesh may span several processes: each process hands in its own slice of the global batch,
and params come back replicated on every learner device of every process.
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import numpy as np

from jaxrl_dist.agents.base import Algorithm, LearnerState, Metrics
from jaxrl_dist.learning.mesh import Devices, local_replica
from jaxrl_dist.types import Rollout


class Learner:
    """Owns the jitted, donated update. Params are replicated, rollouts sharded on axis B.

    With `jax.jit` + `NamedSharding` the loss's means over B are global means (XLA inserts the
    cross-device reductions), so the update is the same function on 1 or N devices.
    """

    def __init__(self, algorithm: Algorithm, devices: Devices):
        self._replicated = devices.replicated()
        self._batch_sharding = devices.batch_sharding()
        self.num_devices = devices.num_learner_devices
        self.num_local_devices = len(devices.learner_mesh.local_devices)
        self._update = jax.jit(
            algorithm.update,
            in_shardings=(self._replicated, self._batch_sharding),
            out_shardings=(self._replicated, self._replicated),
            donate_argnums=0,
        )

    def init_state(self, init: Callable[[], LearnerState]) -> LearnerState:
        """Runs `init()` (no arguments: seeds are Python ints) jitted straight into the replicated
        layout: every process computes the same state, none is copied between them."""
        return jax.jit(init, out_shardings=self._replicated)()

    def put_state(self, state: LearnerState) -> LearnerState:
        """Host values (the same on every process) -> replicated on the learner mesh."""
        return jax.device_put(state, self._replicated)

    def put_batch(self, rollout: Rollout) -> Rollout:
        """This process's host `[T(+1), B_local]` rollout -> its slice of the global `[T(+1), B]`
        batch, each local learner device holding `B_local / num_local_devices` envs."""
        if rollout.batch_size % self.num_local_devices:
            raise ValueError(
                f"batch of {rollout.batch_size} envs does not split over "
                f"{self.num_local_devices} local learner devices; make config.batch_size a "
                "multiple of the learner device count"
            )
        return jax.tree.map(
            lambda x: jax.make_array_from_process_local_data(self._batch_sharding, x), rollout
        )

    def update(self, state: LearnerState, batch: Rollout) -> tuple[LearnerState, Metrics]:
        """One update; `state` is donated (do not use it afterwards)."""
        return self._update(state, batch)


def host_metrics(metrics: Metrics) -> dict[str, float]:
    """Replicated scalar metrics as floats (this process's copy: a sync with the update)."""
    return {k: float(np.asarray(v)) for k, v in local_replica(metrics).items()}
