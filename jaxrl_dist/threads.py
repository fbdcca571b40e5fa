"""Explicit concurrency helpers: every blocking wait has a timeout and checks a stop flag."""

from __future__ import annotations

import contextlib
import queue
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

# Every blocking call wakes at least this often to check the stop flag.
POLL_S = 0.1


def put_until_stopped(q: queue.Queue, item: Any, stop: threading.Event) -> float:
    """Puts `item` into the bounded queue `q`, waiting for room in `POLL_S` slices until `stop`
    is set (then the item is dropped). Returns the seconds spent waiting."""
    start = time.perf_counter()
    while not stop.is_set():
        try:
            q.put(item, timeout=POLL_S)
            break
        except queue.Full:
            continue
    return time.perf_counter() - start


@contextlib.contextmanager
def switch_interval(seconds: float) -> Iterator[None]:
    """CPython's GIL switch interval set to `seconds` inside the block (0: left as it is), put
    back after. A thread blocked on the GIL while another runs Python waits up to this long: a
    GIL-free call (an XLA step, an EnvPool recv) that returns beside a busy Python thread pays
    it on every return (5 ms by default)."""
    before = sys.getswitchinterval()
    if seconds:
        sys.setswitchinterval(seconds)
    try:
        yield
    finally:
        sys.setswitchinterval(before)


class RateCap:
    """At most `rate` events a second, without bursts (the SEED trainer's
    `max_train_frequency`): an event of `n` (a chunk of `n` updates) may start `n / rate`
    seconds after the one before started, or at once if that time has passed; time not used
    is not saved up for later."""

    def __init__(self, rate: float, clock=time.monotonic):
        self.rate, self._clock = rate, clock
        self._next = 0.0  # when the next event may start (clock seconds)
        self.waited_s = 0.0  # the seconds an event was held back, in all
        self._held_since: float | None = None  # `hold`: ready since then, not yet due
        self._last = (clock(), 0, 0.0)  # at the last `window`: time, events, seconds waited

    def due_in(self) -> float:
        """Seconds until the next event may start (0: now)."""
        return max(0.0, self._next - self._clock())

    def wait(self, stop: threading.Event) -> bool:
        """Sleeps until the next event may start, in `POLL_S` slices until `stop` is set;
        whether it may start (False: stopped first)."""
        start = time.perf_counter()
        while (left := self.due_in()) > 0 and not stop.is_set():
            time.sleep(min(left, POLL_S))
        self.waited_s += time.perf_counter() - start
        return not stop.is_set()

    def hold(self) -> bool:
        """Whether an event that is ready must wait (not due yet), for a caller that polls
        instead of `wait`ing: the time from its first hold to its `take` counts as waited."""
        if not self.due_in():
            return False
        if self._held_since is None:
            self._held_since = self._clock()
        return True

    def take(self, n: int = 1) -> None:
        """An event of `n` starts now."""
        now = self._clock()
        if self._held_since is not None:
            self.waited_s += now - self._held_since
            self._held_since = None
        self._next = max(self._next, now) + n / self.rate

    def window(self, events: int) -> dict[str, float]:
        """Since the last call (or the start), given the events counted now: their rate
        (`charts/updates_per_s`) and the seconds events were held back (`wait`, `hold` to
        `take`: `stats/cap_wait_s`)."""
        now, (then, before, waited) = self._clock(), self._last
        self._last = (now, events, self.waited_s)
        return {
            "charts/updates_per_s": (events - before) / max(now - then, 1e-9),
            "stats/cap_wait_s": self.waited_s - waited,
        }

    def restart(self, events: int) -> None:
        """Windows count from now and `events` (a run starts or resumes)."""
        self._last = (self._clock(), events, self.waited_s)
