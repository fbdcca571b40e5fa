"""Versioned parameters published by the learner, picked up by actors on their own devices."""

from __future__ import annotations

import threading

import jax
import jax.numpy as jnp

from jaxrl_dist.types import PyTree, local_replica

# A jitted copy always writes new buffers. `device_put(x, d, may_alias=False)` is not enough:
# from params replicated over several learner devices it returns device d's shard itself,
# which the next (donated) update then deletes under the actor.
_fresh_copy = jax.jit(lambda tree: jax.tree.map(jnp.copy, tree))


def _on(tree: PyTree, device: jax.Device) -> PyTree:
    """`tree` on `device`; no `device_put` (a Python call per leaf) when it is there already."""
    leaves = jax.tree.leaves(tree)
    if all(isinstance(x, jax.Array) and x.devices() == {device} for x in leaves):
        return tree
    return jax.device_put(tree, device)


class ParamsStore:
    """Holds the newest params as a copy on each actor device, with the learner version.

    The learner donates its state to the next update, so actors must never hold the learner's own
    buffers: `publish` makes a fresh device copy even when the actor and the learner share a
    device (or the actor's device is one of the learner mesh's).
    """

    def __init__(self, devices: list[jax.Device]):
        self._devices = list(dict.fromkeys(devices))
        self._latest: tuple[dict[jax.Device, PyTree], int] | None = None
        self._published = threading.Condition()

    def publish(self, params: PyTree, version: int) -> None:
        """`params`: replicated (possibly over several processes) or on one device."""
        local = local_replica(params)
        copies = {d: _fresh_copy(_on(local, d)) for d in self._devices}
        with self._published:
            self._latest = (copies, version)  # one reference swap: readers never see a mix
            self._published.notify_all()

    @property
    def version(self) -> int | None:
        """The newest published version (None before the first publish); no wait."""
        latest = self._latest
        return None if latest is None else latest[1]

    def get(
        self, device: jax.Device, timeout: float | None = None, min_version: int = 0
    ) -> tuple[PyTree, int]:
        """The newest (params on `device`, version), waiting up to `timeout` for a version of at
        least `min_version` (raises TimeoutError)."""
        latest = self._latest
        if latest is None or latest[1] < min_version:
            with self._published:
                ready = lambda: self._latest is not None and self._latest[1] >= min_version  # noqa: E731
                if not self._published.wait_for(ready, timeout):
                    raise TimeoutError(f"no params of version >= {min_version} were published")
                latest = self._latest
        copies, version = latest
        return copies[device], version
