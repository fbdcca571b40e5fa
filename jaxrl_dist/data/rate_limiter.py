"""The replays' rate limiter: DeepMind Reverb's `SampleToInsertRatio`, counted in items.

An insert adds `insert_size` items at once (a replay of segments counts one per segment; one that
samples transitions counts the `T` transitions of each segment), a sample takes `batch_size`.
With `SPI = samples_per_insert` (samples per item), `diff = inserted * SPI - sampled`,
`min_diff = min_size * SPI - tolerance` and `max_diff = min_size * SPI + tolerance`:

  - an insert may go in iff `size < min_size` or `diff + insert_size * SPI <= max_diff`;
  - a batch may be sampled iff `size >= min_size` and `diff - batch_size >= min_diff`.

Both sides are blocked exactly when `max_diff - insert_size * SPI < diff < min_diff +
batch_size`; that range is empty, so no state can stall writers and reader together, iff
`2 * tolerance >= batch_size + insert_size * SPI` (checked at construction). The limits are
exact fractions, so that boundary is not lost to rounding. Once `min_size` items are in, `diff`
stays within `[min_diff, max_diff]`: each item is sampled `SPI` times on average, give or take
`tolerance` samples over the run. Not thread-safe: the replay holds its lock around each call.
"""

from __future__ import annotations

import math
from fractions import Fraction


class RateLimiter:
    def __init__(
        self,
        *,
        min_size: int,
        samples_per_insert: float,
        tolerance: float,
        batch_size: int,
        insert_size: int = 1,
        unit: str = "segments",
    ):
        """`unit` names what is counted, for the error messages."""
        if min_size < 1:
            raise ValueError(f"replay min_size ({unit}) must be at least 1, got {min_size}")
        if batch_size < 1:
            raise ValueError(f"replay batch_size must be at least 1, got {batch_size}")
        if not samples_per_insert > 0 or math.isinf(samples_per_insert):
            raise ValueError(f"samples_per_insert must be positive, got {samples_per_insert}")
        least = (batch_size + insert_size * samples_per_insert) / 2
        if not tolerance >= least * (1 - 1e-12):  # rounding of a tolerance computed as `least`
            bound = "(batch_size + samples_per_insert) / 2"
            if insert_size != 1:
                bound = f"(batch_size + {insert_size} * samples_per_insert) / 2"
            raise ValueError(
                f"replay tolerance {tolerance} is below {bound} = {least:g}: the rate limiter "
                "could block both inserts and samples"
            )
        spi = Fraction(samples_per_insert)
        tol = tolerance  # exact from here on, and not below the bound by a rounding error
        if not math.isinf(tolerance):
            tol = max(Fraction(tolerance), (batch_size + insert_size * spi) / 2)
        self._spi, self._insert_size, self._batch_size = spi, insert_size, batch_size
        self._min_size = min_size
        self._min_diff, self._max_diff = min_size * spi - tol, min_size * spi + tol
        self.inserted = self.sampled = 0  # items
        self._offset = Fraction(0)  # `with_ratio`: where a new ratio took over

    def _diff(self) -> Fraction:
        return self.inserted * self._spi - self.sampled + self._offset

    def restore(self, inserted: int, sampled: int, offset: Fraction | int = 0) -> None:
        """Takes back a snapshot's counts (and the offset of a ratio changed at run time)."""
        self.inserted, self.sampled, self._offset = inserted, sampled, Fraction(offset)

    @property
    def offset(self) -> Fraction:
        """Where the ratio in force took over from another (`with_ratio`); 0 if it never did."""
        return self._offset

    def with_ratio(
        self, samples_per_insert: float, tolerance: float, offset: Fraction | None = None
    ) -> RateLimiter:
        """A limiter of another ratio (and its tolerance) that goes on from this one's counts
        (run-time replay settings; ValueError as at construction): `diff` keeps its distance
        from the middle of the allowed range, within the new range, so neither side is held
        for what the old ratio owed; before the first sample (the replay still filling)
        nothing is owed, and the new ratio counts from the start. `offset`: exactly this one
        instead (a resume puts back the limiter it saved)."""
        new = RateLimiter(
            min_size=self._min_size,
            samples_per_insert=samples_per_insert,
            tolerance=tolerance,
            batch_size=self._batch_size,
            insert_size=self._insert_size,
        )
        new.inserted, new.sampled = self.inserted, self.sampled
        if offset is not None:
            new._offset = Fraction(offset)
        elif self.sampled:
            middle = (self._min_diff + self._max_diff) / 2
            new_middle = (new._min_diff + new._max_diff) / 2
            target = min(max(self._diff() - middle + new_middle, new._min_diff), new._max_diff)
            new._offset = target - new._diff()
        return new

    def can_insert(self, size: int, pending: int = 0) -> bool:
        """Whether one more insert may go in after `pending` more (the replay holds `size` items
        before them, at most its capacity)."""
        if size + pending * self._insert_size < self._min_size:
            return True
        step = (pending + 1) * self._insert_size * self._spi
        return self._diff() + step <= self._max_diff

    def can_sample(self, size: int) -> bool:
        return size >= self._min_size and self._diff() - self._batch_size >= self._min_diff

    def record_inserts(self, count: int) -> None:
        self.inserted += count * self._insert_size

    def record_sample(self) -> None:
        self.sampled += self._batch_size
