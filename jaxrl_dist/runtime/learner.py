"""The learner: the algorithm's update jitted on the learner mesh, batch split along envs."""

from __future__ import annotations

import jax
import numpy as np

from jaxrl_dist.algorithms.base import Algorithm, LearnerState, Metrics
from jaxrl_dist.runtime.mesh import Devices
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
        self._update = jax.jit(
            algorithm.update,
            in_shardings=(self._replicated, self._batch_sharding),
            out_shardings=(self._replicated, self._replicated),
            donate_argnums=0,
        )

    def put_state(self, state: LearnerState) -> LearnerState:
        return jax.device_put(state, self._replicated)

    def put_batch(self, rollout: Rollout) -> Rollout:
        """Host `[T(+1), B]` rollout -> learner devices, each holding `B / num_devices` envs."""
        if rollout.batch_size % self.num_devices:
            raise ValueError(
                f"batch of {rollout.batch_size} envs does not split over {self.num_devices} "
                "learner devices; make config.batch_size a multiple of the learner device count"
            )
        return jax.device_put(rollout, self._batch_sharding)

    def update(self, state: LearnerState, batch: Rollout) -> tuple[LearnerState, Metrics]:
        """One update; `state` is donated (do not use it afterwards)."""
        return self._update(state, batch)


def host_metrics(metrics: Metrics) -> dict[str, float]:
    return {k: float(np.asarray(v)) for k, v in jax.device_get(metrics).items()}
