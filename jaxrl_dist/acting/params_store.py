"""Versioned parameters published by the learner, picked up by actors on their own devices;
in deterministic mode an agent's params by round, for the other agents' actors."""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np

from jaxrl_dist.threads import POLL_S
from jaxrl_dist.types import PyTree, local_replica, path_name

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

    def wait_version(self, version: int, stop: threading.Event) -> bool:
        """Waits until `version` (or a newer one) is published; False once `stop` is set."""
        with self._published:
            while self._latest is None or self._latest[1] < version:
                if stop.is_set():
                    return False
                self._published.wait(POLL_S)
        return True

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


@dataclasses.dataclass(frozen=True)
class ActingRound:
    """Where a lockstep actor is (`acting/lockstep.py`), for the players in its games: the
    round it plays now, acting or replaying it (`playing`), the round it acts next (`acting`),
    its run's stop, and `record(result)`, which keeps a result of the round it acts until the
    actor's unroll is whole (`result()` then records it)."""

    playing: Callable[[], int]
    acting: Callable[[], int]
    stop: threading.Event
    record: Callable[[Callable[[], None]], None]

    def replaying(self) -> bool:
        """Whether the actor replays a round it (or the run it resumes) acted already."""
        return self.playing() < self.acting()


class ActingStopped(Exception):
    """Raised in an actor thread that waited for params when its run stopped (not a failure)."""


class RoundParams:
    """An agent's params by lockstep round, for the other agents' actors in deterministic mode.

    Another agent `b` plays seats (or slots) in agent `a`'s games; for `a`'s data to follow from
    the seed alone, `b`'s moves in `a`'s round `u` (unroll `u` of every actor) use `b`'s params
    of its own round `u` (`b`'s unroll `u` is acted with them), whatever `b`'s learner has reached
    meanwhile. An actor resumed or restarted mid env epoch replays the epoch's rounds, `b`'s
    moves in them included, so the rounds since the epoch began are kept: `b` is at most one
    round ahead of any actor that plays it (its round `u + 1` waits for its actors' round `u`,
    which waits for `a`'s params of round `u`), so host copies of the rounds from
    `epoch_updates * ((newest - 1) // epoch_updates)` on are enough (at most an epoch and one).
    A checkpoint keeps them (`to_arrays`), so a resumed run's actors replay the same moves.
    """

    def __init__(self, epoch_updates: int):
        self._epoch = epoch_updates
        self._params: dict[int, PyTree] = {}  # round -> host params
        self._cond = threading.Condition()

    def record(self, round_: int, params: PyTree) -> None:
        """`params` (replicated, or on one device) are the ones round `round_` is acted with."""
        host = jax.tree.map(np.asarray, jax.device_get(local_replica(params)))
        with self._cond:
            self._params[round_] = host
            floor = self._epoch * ((max(self._params) - 1) // self._epoch)
            for old in [r for r in self._params if r < floor]:
                del self._params[old]
            self._cond.notify_all()

    def get(self, round_: int, stop: threading.Event) -> PyTree:
        """Round `round_`'s host params, waiting for the agent to reach it; raises
        `ActingStopped` once `stop` is set."""
        with self._cond:
            while round_ not in self._params:
                if self._params and round_ < min(self._params):
                    # Only after a resume from a checkpoint that kept no rounds (saved outside
                    # deterministic mode): that resume was logged as not exact.
                    return self._params[min(self._params)]
                if stop.is_set():
                    raise ActingStopped
                self._cond.wait(POLL_S)
            return self._params[round_]

    def to_arrays(self) -> dict[str, np.ndarray]:
        """The kept rounds' params as flat arrays, `<round>/<leaf path>`."""
        with self._cond:
            return {
                f"{r}/{path_name(path)}": leaf
                for r, params in self._params.items()
                for path, leaf in jax.tree_util.tree_flatten_with_path(params)[0]
            }

    def restore_arrays(self, arrays: dict[str, np.ndarray], template: PyTree) -> None:
        """Takes back what `to_arrays` wrote, in `template`'s tree structure (the actor params)."""
        paths, treedef = jax.tree_util.tree_flatten_with_path(template)
        names = [path_name(path) for path, _ in paths]
        rounds = sorted({int(key.partition("/")[0]) for key in arrays})
        with self._cond:
            self._params = {
                r: jax.tree.unflatten(treedef, [arrays[f"{r}/{name}"] for name in names])
                for r in rounds
            }
