"""A uniform replay: the data seam for learners that reuse what the actors collected.

Actor threads `write` their `QueueItem`s, the learner loop `read`s one `Batch` per update; the
on-policy queue (`on_policy.OnPolicyQueue`) is the other implementation of this seam.

Items are *segments*: each column `j` of an item's `[T + 1, b]` rollout is one env's segment of
`T` transitions, kept whole (sequence replay: n-step returns and recurrent replay build on it).
They live in preallocated NumPy rings of `capacity` segments, one per Rollout leaf (every
`agent_extras` entry included), laid out `[T + 1 or T, capacity, ...]` and allocated at the first
insert; when full, the oldest segment is overwritten. A read draws `batch_size` segments
uniformly with replacement and returns copies as a `[T + 1, batch_size]` rollout.

Rate limiter: `rate_limiter.RateLimiter` (DeepMind Reverb's `SampleToInsertRatio`), counted in
segments: each segment is sampled `samples_per_insert` times on average, give or take
`tolerance`. Inserts are checked segment by segment, so a wide item never needs more room than
one segment.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from fractions import Fraction

import jax
import numpy as np

import jaxrl_dist.data.snapshot as snapshot
from jaxrl_dist.data.base import NOT_READY, Batch, Liveness, NotReady, QueueItem
from jaxrl_dist.data.rate_limiter import RateLimiter
from jaxrl_dist.threads import POLL_S
from jaxrl_dist.types import Rollout

__all__ = ["Batch", "UniformReplay"]


class UniformReplay:
    """A FIFO ring of segments sampled uniformly, rate-limited to `samples_per_insert`.

    Thread-safe: any number of actor threads may `write` while the learner loop `read`s; one
    `threading.Condition` guards all the state, and every wait wakes each `POLL_S` to check
    `stop`. `check_actors` is also a public attribute (the run sets it once its actors exist);
    a `Batch` (`data.base`) reports `dropped=0` and `env_actions=None`.
    """

    def __init__(
        self,
        *,
        capacity: int,
        min_size: int,
        samples_per_insert: float,
        tolerance: float,
        batch_size: int,
        seed: int,
        stop: threading.Event,
        check_actors: Callable[[], None] = lambda: None,
        dead_timeout_s: float = 120.0,
        read_stop: threading.Event | None = None,
        items_per_segment: int = 1,
    ):
        """`items_per_segment`: what the limiter, `min_size` and `capacity` count per segment
        (1 here; a replay that samples transitions counts the T of each segment)."""
        if capacity < min_size:
            raise ValueError(f"replay capacity ({capacity}) is smaller than min_size ({min_size})")
        unit = "segments" if items_per_segment == 1 else "transitions"
        self._limiter = RateLimiter(
            min_size=min_size,
            samples_per_insert=samples_per_insert,
            tolerance=tolerance,
            batch_size=batch_size,
            insert_size=items_per_segment,
            unit=unit,
        )
        self._items_per_segment = items_per_segment
        self._capacity = capacity // items_per_segment  # segments
        self._batch_size = batch_size
        self._rng = np.random.default_rng(seed)
        self._stop, self._dead_timeout_s = stop, dead_timeout_s
        # The learner loop may stop before the actors (`read_stop`); either ends a read.
        self._read_stop = read_stop or stop
        self.check_actors = check_actors
        self._cond = threading.Condition()
        self._treedef = None
        self._rings: list[np.ndarray] = []  # one per Rollout leaf, `[T + 1 or T, capacity, ...]`
        self._next = self._size = self._env_steps = 0
        self._insert_wait_s = self._sample_wait_s = 0.0

    def rate_problem(self, samples_per_insert: float, tolerance: float) -> str | None:
        """Why `set_rate` would refuse this pair (one line), or None."""
        try:
            self._limiter.with_ratio(samples_per_insert, tolerance)
        except ValueError as e:
            return str(e)
        return None

    def set_rate(self, samples_per_insert: float, tolerance: float, resumed: bool = False) -> None:
        """Run-time replay settings: the rate limiter's ratio and tolerance from now on (the
        counts go on: `RateLimiter.with_ratio`); `resumed`: the ratio in force when the
        restored snapshot was taken, with the limiter's saved offset. ValueError (one line,
        nothing changed) for a pair the limiter refuses."""
        with self._cond:
            offset = self._limiter.offset if resumed else None
            self._limiter = self._limiter.with_ratio(samples_per_insert, tolerance, offset)
            self._cond.notify_all()

    @property
    def items_per_segment(self) -> int:
        """What the limiter counts per segment: 1, or T transitions."""
        return self._items_per_segment

    @staticmethod
    def env_steps_per_update(
        unroll_length: int, batch_size: int, samples_per_insert: float
    ) -> float:
        """Average env steps inserted per learner update: `T * batch_size / samples_per_insert`."""
        return unroll_length * batch_size / samples_per_insert

    @property
    def size(self) -> int:
        """Segments held now (at most `capacity`)."""
        with self._cond:
            return self._size

    def stats(self) -> dict[str, float]:
        """Cumulative `inserted` and `sampled` segments and seconds `insert_wait_s` (writers
        blocked by the limiter) and `sample_wait_s` (the reader waiting for data)."""
        with self._cond:
            return {
                "inserted": float(self._limiter.inserted),
                "sampled": float(self._limiter.sampled),
                "insert_wait_s": self._insert_wait_s,
                "sample_wait_s": self._sample_wait_s,
            }

    def write(self, item: QueueItem, limited: bool = True) -> float:
        """Inserts the `b` segments (columns) of `item.rollout`, `[T + 1, b]`, oldest first.

        Blocks while the rate limiter forbids the next segment (the learner is behind). If `stop`
        is set while blocked, returns without inserting the rest. Returns the seconds waited.
        `limited=False`: past the limiter (deterministic mode's rounds, `lockstep_replay.py`:
        they pace the actors instead), still counted by it.
        """
        leaves, treedef = jax.tree.flatten(item.rollout)
        leaves = [np.asarray(x) for x in leaves]
        unroll, width = item.rollout.action.shape[:2]
        waited, done = 0.0, 0
        with self._cond:
            if self._treedef is None:
                self._treedef = treedef
                self._rings = [
                    np.empty((x.shape[0], self._capacity, *x.shape[2:]), x.dtype) for x in leaves
                ]
            elif treedef != self._treedef:
                raise ValueError(f"replay item structure changed: {treedef} != {self._treedef}")
            while done < width:
                n = 0
                while done + n < width and (
                    not limited or self._limiter.can_insert(self._items(), n)
                ):
                    n += 1
                if n == 0:
                    if self._stop.is_set():
                        break
                    start = time.perf_counter()
                    self._cond.wait(POLL_S)
                    waited += time.perf_counter() - start
                    continue
                slots = (self._next + np.arange(n)) % self._capacity
                for ring, x in zip(self._rings, leaves, strict=True):
                    ring[:, slots] = x[:, done : done + n]
                self._next = (self._next + n) % self._capacity
                self._size = min(self._size + n, self._capacity)
                self._limiter.record_inserts(n)
                self._stored(slots)
                self._env_steps += n * unroll
                done += n
                self._cond.notify_all()
            self._insert_wait_s += waited
        return waited

    def snapshot(self) -> dict[str, np.ndarray]:
        """A copy of everything the replay holds (`data.snapshot`): the rings, the write
        position and size, env steps not yet handed to an update, the limiter's counts and the
        sampler's RNG. Taken under the lock, so it is one consistent moment."""
        with self._cond:
            arrays = {
                "counts": np.array(
                    [
                        self._next,
                        self._size,
                        self._env_steps,
                        self._limiter.inserted,
                        self._limiter.sampled,
                    ],
                    np.int64,
                ),
                "rng": snapshot.rng_array(self._rng),
                # A run-time ratio's offset, exact (a Fraction's numerator may pass int64).
                "rate_offset": np.array(str(self._limiter.offset)),
                **self._snapshot_extra(),
            }
            if self._treedef is not None:
                rings = [r.copy() for r in self._rings]
                arrays.update(snapshot.ring_arrays(self._treedef, rings))
            return arrays

    def restore(self, arrays: dict[str, np.ndarray]) -> None:
        """Takes back what `snapshot` returned (before any actor writes). Raises ValueError
        when it does not fit this replay (another capacity or segment length)."""
        with self._cond:
            if any(name.startswith(snapshot.RING) for name in arrays):
                treedef, rings = snapshot.rings_from_arrays(arrays)
                if any(r.shape[1] != self._capacity for r in rings):
                    raise ValueError(
                        f"the saved replay holds {rings[0].shape[1]} segments, this one "
                        f"{self._capacity}: resume with the run's own replay.capacity"
                    )
                self._treedef, self._rings = treedef, rings
            counts = [int(x) for x in arrays["counts"]]
            self._next, self._size, self._env_steps = counts[:3]
            offset = Fraction(str(arrays["rate_offset"])) if "rate_offset" in arrays else 0
            self._limiter.restore(*counts[3:], offset)  # `set_rate(..., resumed=True)`: its ratio
            snapshot.restore_rng(self._rng, arrays["rng"])
            self._restore_extra(arrays)

    def _snapshot_extra(self) -> dict[str, np.ndarray]:
        """Under the lock: what a subclass adds to a snapshot."""
        return {}

    def _restore_extra(self, arrays: dict[str, np.ndarray]) -> None:
        """Under the lock: a subclass takes its part of a snapshot back."""

    def _items(self) -> int:
        return self._size * self._items_per_segment

    def _stored(self, slots: np.ndarray) -> None:
        """Called (under the lock) after segments were written into ring `slots`."""

    def _draw(self) -> tuple[Rollout, np.ndarray]:
        """Under the lock: a batch of held data and ids of what was drawn (here: segments
        uniformly with replacement, `[T + 1, batch_size]`; their slots)."""
        idx = self._rng.integers(self._size, size=self._batch_size)
        return jax.tree.unflatten(self._treedef, [r[:, idx] for r in self._rings]), idx

    def _stopped(self) -> bool:
        return self._stop.is_set() or self._read_stop.is_set()

    def read(self, updates: int, wait: bool = True) -> Batch | NotReady | None:
        """Samples `batch_size` held segments uniformly with replacement: a `[T + 1, batch_size]`
        rollout of copies. Returns None once `stop` or `read_stop` is set.

        Waits while the limiter forbids sampling (too little data, or each segment already
        sampled `samples_per_insert` times); meanwhile calls `check_actors()` each `POLL_S` (its
        errors propagate) and raises RunError if no segment arrives for `dead_timeout_s`. With
        `wait=False` it returns `NOT_READY` instead of waiting (the caller checks the actors).
        `updates` is unused (the replay has no policy-lag limit).
        """
        del updates
        with self._cond:
            if not wait:
                if self._stopped():
                    return None
                return self._sample() if self._limiter.can_sample(self._items()) else NOT_READY
            alive = Liveness(self._dead_timeout_s, "data inserted", self._limiter.inserted)
        while True:
            with self._cond:
                start = time.perf_counter()
                ready = self._cond.wait_for(
                    lambda: self._stopped() or self._limiter.can_sample(self._items()),
                    timeout=POLL_S,
                )
                self._sample_wait_s += time.perf_counter() - start
                if self._stopped():
                    return None
                if ready:
                    return self._sample()
                inserted = self._limiter.inserted
            self.check_actors()  # outside the lock: it may restart actors that write
            alive.check(inserted)

    def _sample(self) -> Batch:
        """Under the lock, the limiter allowing it: a drawn batch, recorded as sampled, with the
        env steps inserted since the last one."""
        data, ids = self._draw()
        self._limiter.record_sample()
        env_steps, self._env_steps = self._env_steps, 0
        self._cond.notify_all()
        return Batch(data, env_steps, 0, None, ids)
