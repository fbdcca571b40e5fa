"""Supervised threads (actors, inference servers): a failed one is restarted, within a budget.

The main thread calls `Supervisor.check` on every wait for data. A thread that died (an
environment error, an inference error, any exception: logged with its traceback by the thread
itself) is replaced by a new thread in the same slot (an actor with a fresh EnvPool whose seed
folds in the restart count; a server with fresh per-actor state). More than `max_restarts`
restarts in any `window_s` seconds, over every supervised thread of the process, stops the run
with a RunError that names the thread, its error and the budget; the trainer then writes its
final checkpoint.
"""

from __future__ import annotations

import collections
import logging
import threading
import time
from collections.abc import Callable

from jaxrl_dist.errors import RunError

log = logging.getLogger(__name__)


class RestartBudget:
    """At most `max_restarts` restarts within any `window_s` seconds (a sliding window)."""

    def __init__(
        self, max_restarts: int, window_s: float, clock: Callable[[], float] = time.monotonic
    ):
        self.max_restarts = max_restarts
        self.window_s = window_s
        self._clock = clock
        self._times: collections.deque[float] = collections.deque()

    def allow(self) -> bool:
        """Spends one restart if the window has room; False once the budget is spent."""
        now = self._clock()
        while self._times and now - self._times[0] > self.window_s:
            self._times.popleft()
        if len(self._times) >= self.max_restarts:
            return False
        self._times.append(now)
        return True


class Supervisor:
    """Owns threads of one kind (`what`: "actor", "inference server"); restarts failed ones
    (main thread only). A thread has `index` and `error` (the exception it died of, or None).

    `spawn(slot, restarts)` starts the thread of `slot` (0..count-1), its `restarts`-th
    incarnation, and returns it running.
    """

    def __init__(
        self,
        spawn: Callable[[int, int], threading.Thread],
        count: int,
        budget: RestartBudget,
        what: str = "actor",
    ):
        self._spawn = spawn
        self._budget = budget
        self._what = what
        self._restarts_by_slot = [0] * count
        self.threads: list[threading.Thread] = [spawn(slot, 0) for slot in range(count)]

    @property
    def restarts(self) -> int:
        """Restarts so far, over all slots."""
        return sum(self._restarts_by_slot)

    def check(self) -> None:
        """Restarts every dead thread; raises RunError once the restart budget is spent."""
        for slot, thread in enumerate(self.threads):
            if thread.is_alive():
                continue
            # A thread only returns early on an error; one that returned without one is a bug,
            # and restarting it is still the right thing to do.
            error = thread.error or RuntimeError(f"the {self._what} thread ended without an error")
            if not self._budget.allow():
                b = self._budget
                raise RunError(
                    f"{self._what} {thread.index} stopped: {error!r}; the restart budget is spent "
                    f"({b.max_restarts} restarts within {b.window_s:g}s; raise "
                    "config.actor_max_restarts or config.actor_restart_window_s to allow more)"
                ) from error
            self._restarts_by_slot[slot] += 1
            log.warning(
                "restarting %s %d (restart %d of at most %d per %gs) after: %r",
                self._what, thread.index, self._restarts_by_slot[slot], self._budget.max_restarts,
                self._budget.window_s, error,
            )  # fmt: skip
            self.threads[slot] = self._spawn(slot, self._restarts_by_slot[slot])

    def join(self, timeout_s: float) -> None:
        """Waits for every thread to end (the caller set their stop flag), `timeout_s` in all."""
        deadline = time.monotonic() + timeout_s
        for thread in self.threads:
            thread.join(timeout=max(0.0, deadline - time.monotonic()))
        stuck = [thread.index for thread in self.threads if thread.is_alive()]
        if stuck:  # daemon threads: they end with the process (most likely inside an env step)
            what = self._what
            log.warning("%ss %s did not stop within %gs; leaving them", what, stuck, timeout_s)
