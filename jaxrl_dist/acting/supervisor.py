"""Supervised threads (actors, inference servers): a failed one is restarted, within a budget.

The main thread calls `Supervisor.check` on every wait for data. A thread that died (an
environment error, an inference error, any exception: logged with its traceback by the thread
itself) is replaced by a new thread in the same slot (an actor with a fresh EnvPool whose seed
folds in the restart count; a server with fresh per-actor state). More than `max_restarts`
restarts in any `window_s` seconds, over every supervised thread of the process, stops the run
with a RunError that names the thread, its error and the budget; the trainer then writes its
final checkpoint.

A thread stuck inside one call that cannot time out (the XLA actor loop's jitted unroll: a
`recv` inside XLA waits forever) cannot be restarted either: a thread whose `busy_s()` passes
`hang_timeout_s` stops the run with a RunError at once.
"""

from __future__ import annotations

import collections
import logging
import threading
import time
from collections.abc import Callable

from jaxrl_dist.envs.envpool_env import PYTHON_LOOP_FIX
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
        self._lock = threading.Lock()  # actor threads spend it too (a Python env's workers)
        self.spent_on: list[str] = []  # what each restart was for, oldest first

    def allow(self) -> bool:
        """Spends one restart if the window has room; False once the budget is spent."""
        with self._lock:
            now = self._clock()
            while self._times and now - self._times[0] > self.window_s:
                self._times.popleft()
            if len(self._times) >= self.max_restarts:
                return False
            self._times.append(now)
            return True

    def allow_for(self, what: str) -> bool:
        """`allow()` for a restart outside the supervisor (a Python env's worker process),
        logged by what it was for."""
        allowed = self.allow()
        if allowed:
            with self._lock:
                self.spent_on.append(what)
        return allowed


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
        hang_timeout_s: float = 0.0,
    ):
        self._spawn = spawn
        self._budget = budget
        self._what = what
        self._hang_timeout_s = hang_timeout_s  # 0: no watchdog
        self._restarts_by_slot = [0] * count
        self.threads: list[threading.Thread] = [spawn(slot, 0) for slot in range(count)]

    @property
    def restarts(self) -> int:
        """Restarts so far, over all slots."""
        return sum(self._restarts_by_slot)

    def check(self) -> None:
        """Restarts every dead thread; raises RunError once the restart budget is spent, or when
        a thread has hung for `hang_timeout_s`."""
        for slot, thread in enumerate(self.threads):
            if thread.is_alive():
                self._watchdog(thread)
                continue
            # A thread only returns early on an error; one that returned without one is a bug,
            # and restarting it is still the right thing to do.
            error = thread.error or RuntimeError(f"the {self._what} thread ended without an error")
            if isinstance(error, RunError):  # not a fault a restart mends (an env's contract)
                raise RunError(f"{self._what} {thread.index} stopped: {error}") from error
            if not self._budget.allow():
                b = self._budget
                raise RunError(
                    f"{self._what} {thread.index} stopped: {error!r}; the restart budget is spent "
                    f"({b.max_restarts} restarts within {b.window_s:g}s; raise "
                    "config.sebulba.actor_max_restarts or config.sebulba.actor_restart_window_s "
                    "to allow more)"
                ) from error
            self._restarts_by_slot[slot] += 1
            log.warning(
                "restarting %s %d (restart %d of at most %d per %gs) after: %r",
                self._what,
                thread.index,
                self._restarts_by_slot[slot],
                self._budget.max_restarts,
                self._budget.window_s,
                error,
            )
            self.threads[slot] = self._spawn(slot, self._restarts_by_slot[slot])

    def _stuck_s(self, thread: threading.Thread) -> float:
        """How long `thread` has been inside one call that cannot time out, if past the limit
        (0 otherwise, or with no watchdog)."""
        busy = getattr(thread, "busy_s", None)
        if not self._hang_timeout_s or busy is None:
            return 0.0
        stuck_s = busy()
        return stuck_s if stuck_s > self._hang_timeout_s else 0.0

    def _watchdog(self, thread: threading.Thread) -> None:
        stuck_s = self._stuck_s(thread)
        if stuck_s:
            raise RunError(
                f"{self._what} {thread.index} has been inside one jitted EnvPool unroll for "
                f"{stuck_s:.0f}s (a recv inside XLA cannot time out), so the run stops; raise "
                "config.sebulba.actor_hang_timeout_s if unrolls are that slow, or use "
                f"{PYTHON_LOOP_FIX}"
            )

    def join(self, timeout_s: float) -> None:
        """Waits for every thread to end (the caller set their stop flag), `timeout_s` in all."""
        deadline = time.monotonic() + timeout_s
        hung = [thread.index for thread in self.threads if self._stuck_s(thread)]
        for thread in self.threads:
            if thread.index not in hung:  # a hung thread will not end: no wait for it
                thread.join(timeout=max(0.0, deadline - time.monotonic()))
        stuck = [t.index for t in self.threads if t.is_alive() and t.index not in hung]
        # Daemon threads: they end with the process (most likely inside an env step).
        if hung:
            log.warning(
                "%ss %s hung inside a call that cannot time out; leaving them", self._what, hung
            )
        if stuck:
            what = self._what
            log.warning("%ss %s did not stop within %gs; leaving them", what, stuck, timeout_s)
