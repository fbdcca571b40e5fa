"""Supervised actor threads: a failed actor is restarted with a fresh EnvPool, within a budget.

The main thread calls `ActorSupervisor.check` on every wait for rollouts. An actor that died
(an environment error, an inference error, any exception: logged with its traceback by the
actor itself) is replaced by a new thread in the same slot, with a fresh EnvPool whose seed folds
in the restart count. More than `max_restarts` restarts in any `window_s` seconds stops the run
with a RunError that names the actor, its error and the budget; the trainer then writes its
final checkpoint.
"""

from __future__ import annotations

import collections
import logging
import time
from collections.abc import Callable

from jaxrl_dist.errors import RunError
from jaxrl_dist.acting.actor import Actor

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


class ActorSupervisor:
    """Owns this process's actor threads; restarts failed ones (main thread only).

    `spawn(slot, restarts, previous)` starts the actor of `slot` (0..num_actors-1), its
    `restarts`-th incarnation replacing the dead thread `previous` (None at first), and returns
    the running thread.
    """

    def __init__(
        self,
        spawn: Callable[[int, int, Actor | None], Actor],
        num_actors: int,
        budget: RestartBudget,
    ):
        self._spawn = spawn
        self._budget = budget
        self._restarts_by_slot = [0] * num_actors
        self.actors: list[Actor] = [spawn(slot, 0, None) for slot in range(num_actors)]

    @property
    def restarts(self) -> int:
        """Restarts so far, over all actors."""
        return sum(self._restarts_by_slot)

    def check(self) -> None:
        """Restarts every dead actor; raises RunError once the restart budget is spent."""
        for slot, actor in enumerate(self.actors):
            if actor.is_alive():
                continue
            # An actor only returns early on an error; one that returned without one is a bug,
            # and restarting it is still the right thing to do.
            error = actor.error or RuntimeError("the actor thread ended without an error")
            if not self._budget.allow():
                b = self._budget
                raise RunError(
                    f"actor {actor.index} stopped: {error!r}; the restart budget is spent "
                    f"({b.max_restarts} restarts within {b.window_s:g}s; raise "
                    "config.actor_max_restarts or config.actor_restart_window_s to allow more)"
                ) from error
            self._restarts_by_slot[slot] += 1
            log.warning(
                "restarting actor %d with a fresh env (restart %d of at most %d per %gs) after: %r",
                actor.index, self._restarts_by_slot[slot], self._budget.max_restarts,
                self._budget.window_s, error,
            )  # fmt: skip
            self.actors[slot] = self._spawn(slot, self._restarts_by_slot[slot], actor)

    def join(self, timeout_s: float) -> None:
        """Waits for every actor to end (the caller set their stop flag), `timeout_s` in all."""
        deadline = time.monotonic() + timeout_s
        for actor in self.actors:
            actor.join(timeout=max(0.0, deadline - time.monotonic()))
        stuck = [actor.index for actor in self.actors if actor.is_alive()]
        if stuck:  # daemon threads: they end with the process (most likely inside an env step)
            log.warning("actors %s did not stop within %gs; leaving them", stuck, timeout_s)
