"""A uniform replay: the data seam for learners that reuse what the actors collected.

Actor threads `write` their `QueueItem`s, the learner loop `read`s one `Batch` per update; the
on-policy queue (`on_policy.OnPolicyQueue`) is the other implementation of this seam.

Items are *segments*: each column `j` of an item's `[T + 1, b]` rollout is one env's segment of
`T` transitions, kept whole (sequence replay: n-step returns and recurrent replay build on it).
They live in preallocated NumPy rings of `capacity` segments, one per Rollout leaf (every
`agent_extras` entry included), laid out `[T + 1 or T, capacity, ...]` and allocated at the first
insert; when full, the oldest segment is overwritten. A read draws `batch_size` segments
uniformly with replacement and returns copies as a `[T + 1, batch_size]` rollout.

Rate limiter (DeepMind Reverb's `SampleToInsertRatio`, counted in segments): with
`SPI = samples_per_insert`, `diff = inserted * SPI - sampled`,
`min_diff = min_size * SPI - tolerance` and `max_diff = min_size * SPI + tolerance`,

  - one segment may be inserted iff `size < min_size` or `diff + SPI <= max_diff`;
  - `batch_size` segments may be sampled iff `size >= min_size` and
    `diff - batch_size >= min_diff`.

Inserts are checked segment by segment, so a wide item never needs more room than one segment.
Both sides are blocked exactly when `max_diff - SPI < diff < min_diff + batch_size`; that range
is empty, so no state can stall writers and reader together, iff
`max_diff - SPI >= min_diff + batch_size`, i.e. `2 * tolerance >= batch_size + SPI` (checked at
construction). The limits are kept as exact fractions, so that boundary is not lost to
rounding. Once `min_size` segments are in, `diff` stays within `[min_diff, max_diff]`: each
segment is sampled `SPI` times on average, give or take `tolerance` samples over the run.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from fractions import Fraction
from typing import TYPE_CHECKING

import jax
import numpy as np

from jaxrl_dist.data.base import Batch
from jaxrl_dist.errors import RunError
from jaxrl_dist.threads import POLL_S

if TYPE_CHECKING:  # the actor module imports the data package
    from jaxrl_dist.acting.actor import QueueItem

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
    ):
        if min_size < 1:
            raise ValueError(f"replay min_size must be at least 1, got {min_size}")
        if capacity < min_size:
            raise ValueError(f"replay capacity ({capacity}) is smaller than min_size ({min_size})")
        if batch_size < 1:
            raise ValueError(f"replay batch_size must be at least 1, got {batch_size}")
        if not samples_per_insert > 0 or math.isinf(samples_per_insert):
            raise ValueError(f"samples_per_insert must be positive, got {samples_per_insert}")
        least = (batch_size + samples_per_insert) / 2
        if not tolerance >= least * (1 - 1e-12):  # rounding of a tolerance computed as `least`
            raise ValueError(
                f"replay tolerance {tolerance} is below (batch_size + samples_per_insert) / 2 ="
                f" {least:g}: the rate limiter could block both inserts and samples"
            )
        spi = Fraction(samples_per_insert)
        tol = tolerance  # exact from here on, and not below the bound by a rounding error
        if not math.isinf(tolerance):
            tol = max(Fraction(tolerance), (batch_size + spi) / 2)
        self._spi, self._min_diff, self._max_diff = spi, min_size * spi - tol, min_size * spi + tol
        self._capacity, self._min_size, self._batch_size = capacity, min_size, batch_size
        self._rng = np.random.default_rng(seed)
        self._stop, self._dead_timeout_s = stop, dead_timeout_s
        # The learner loop may stop before the actors (`read_stop`); either ends a read.
        self._read_stop = read_stop or stop
        self.check_actors = check_actors
        self._cond = threading.Condition()
        self._treedef = None
        self._rings: list[np.ndarray] = []  # one per Rollout leaf, `[T + 1 or T, capacity, ...]`
        self._next = self._size = self._inserted = self._sampled = self._env_steps = 0
        self._insert_wait_s = self._sample_wait_s = 0.0

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
                "inserted": float(self._inserted),
                "sampled": float(self._sampled),
                "insert_wait_s": self._insert_wait_s,
                "sample_wait_s": self._sample_wait_s,
            }

    def _diff(self) -> Fraction:
        return self._inserted * self._spi - self._sampled

    def _can_insert(self, pending: int) -> bool:
        """Whether one more segment may go in after `pending` more have been inserted."""
        size = min(self._size + pending, self._capacity)
        return size < self._min_size or self._diff() + (pending + 1) * self._spi <= self._max_diff

    def _can_sample(self) -> bool:
        return self._size >= self._min_size and self._diff() - self._batch_size >= self._min_diff

    def write(self, item: QueueItem) -> float:
        """Inserts the `b` segments (columns) of `item.rollout`, `[T + 1, b]`, oldest first.

        Blocks while the rate limiter forbids the next segment (the learner is behind). If `stop`
        is set while blocked, returns without inserting the rest. Returns the seconds waited.
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
                while done + n < width and self._can_insert(n):
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
                self._inserted += n
                self._env_steps += n * unroll
                done += n
                self._cond.notify_all()
            self._insert_wait_s += waited
        return waited

    def _stopped(self) -> bool:
        return self._stop.is_set() or self._read_stop.is_set()

    def _stopped(self) -> bool:
        return self._stop.is_set() or self._read_stop.is_set()

    def read(self, updates: int) -> Batch | None:
        """Samples `batch_size` held segments uniformly with replacement: a `[T + 1, batch_size]`
        rollout of copies. Returns None once `stop` or `read_stop` is set.

        Waits while the limiter forbids sampling (too little data, or each segment already
        sampled `samples_per_insert` times); meanwhile calls `check_actors()` each `POLL_S` (its
        errors propagate) and raises RunError if no segment arrives for `dead_timeout_s`.
        `updates` is unused (the replay has no policy-lag limit).
        """
        del updates
        with self._cond:
            seen, last = self._inserted, time.monotonic()
        while True:
            with self._cond:
                start = time.perf_counter()
                ready = self._cond.wait_for(
                    lambda: self._stopped() or self._can_sample(), timeout=POLL_S
                )
                self._sample_wait_s += time.perf_counter() - start
                if self._stopped():
                    return None
                if ready:
                    idx = self._rng.integers(self._size, size=self._batch_size)
                    data = jax.tree.unflatten(self._treedef, [r[:, idx] for r in self._rings])
                    self._sampled += self._batch_size
                    env_steps, self._env_steps = self._env_steps, 0
                    self._cond.notify_all()
                    return Batch(data, env_steps, 0, None)
                inserted = self._inserted
            self.check_actors()  # outside the lock: it may restart actors that write
            now = time.monotonic()
            if inserted != seen:
                seen, last = inserted, now
            elif now - last > self._dead_timeout_s:
                raise RunError(f"no data inserted for {self._dead_timeout_s:g}s from live actors")
