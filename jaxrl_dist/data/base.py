"""The data seam's contract: actors write items, the learner loop reads batches.

A data flow is a class with `write(item) -> seconds waited` (any actor thread), `read(updates,
wait=True) -> Batch | None` (the main thread; None once the run stops), `size` and
`check_actors` (called at least every `POLL_S` while `read` waits, so a dead actor never hangs
the learner). `read(updates, wait=False)` never waits: it returns `NOT_READY` while a batch is
not ready (a learner loop serving several flows polls them in turn, and checks the actors
itself). Env steps are counted where data enters the seam and reported with each batch, so the
trainer counts what was acted, whatever the learner does with it.
"""

from __future__ import annotations

import time
from typing import Any, NamedTuple

import numpy as np

from jaxrl_dist.errors import RunError
from jaxrl_dist.types import Rollout


class NotReady:
    """`read(..., wait=False)`'s answer while no batch is ready (the flow keeps what it took)."""

    def __repr__(self) -> str:
        return "NOT_READY"


NOT_READY = NotReady()


class QueueItem(NamedTuple):
    """What an actor hands the data seam (`write`).

    Attributes:
      actor_index: the actor's global index (over all processes).
      rollout: a `[T + 1, B]` rollout.
      env_actions: from a lockstep actor, the env actions it sent during that unroll, `[T, B,
        ...]` by env id, for the replay of a resumed run (`lockstep.py`); None otherwise.
      memory: from a lockstep actor, each env's recurrent state after that unroll (`{}` for a
        memoryless policy), which a resumed run puts back; None otherwise.
    """

    actor_index: int
    rollout: Rollout
    env_actions: np.ndarray | None = None
    memory: Any = None


class Batch(NamedTuple):
    """What the learner loop gets from the data seam for one update.

    Attributes:
      data: host `[T + 1, B]` rollout, this process's share of the update's batch.
      env_steps: env steps that entered the seam since the previous read (this process).
      dropped: rollouts dropped as stragglers since the previous read.
      env_actions: lockstep mode, `[T, B, ...]` the env actions the batch's actors sent (for the
        replay of a resumed run); None otherwise.
      sample_ids: a replay's ids of what it drew, `[B, ...]` (handed back with the update's
        priorities); None otherwise.
      memory: lockstep mode, `[B, ...]` each env's recurrent state after the batch's unrolls
        (`{}` for a memoryless policy); None otherwise.
    """

    data: Rollout
    env_steps: int
    dropped: int = 0
    env_actions: np.ndarray | None = None
    sample_ids: np.ndarray | None = None
    memory: Any = None


class Liveness:
    """A reader's watch on its writers: `check(count)` (what the actors have written so far)
    raises RunError when the count has not moved for `timeout_s` while the actors live (a hung
    env or inference, not a crash: the supervisor restarts those)."""

    def __init__(self, timeout_s: float, what: str, count: int):
        self._timeout_s, self._what = timeout_s, what
        self._seen, self._since = count, time.monotonic()

    def check(self, count: int) -> None:
        now = time.monotonic()
        if count != self._seen:
            self._seen, self._since = count, now
        elif now - self._since > self._timeout_s:
            raise RunError(f"no {self._what} for {self._timeout_s:g}s from live actors")
