"""The learner side of the rollout queue: one process's share of an update's batch."""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable

from jaxrl_dist.errors import RunError
from jaxrl_dist.acting.actor import POLL_S, QueueItem

ACTOR_DEAD_TIMEOUT_S = 120.0  # no rollout for this long from live actors: give up


def collect_rollouts(
    rollouts: queue.Queue,
    check_actors: Callable[[], None],
    need: int,
    stop: threading.Event,
    updates: int,
    max_policy_lag: int = 0,
    in_actor_order: bool = False,
) -> tuple[list[QueueItem] | None, int]:
    """Takes `need` items from the actors' queue.

    Returns (the items, or None once `stop` is set; how many were dropped as stragglers, acted
    more than `max_policy_lag` updates before `updates`). Never waits without checking the
    actors: `check_actors()` runs at least every `POLL_S` while the queue is empty (it restarts
    dead actors, or raises RunError), and none delivering for `ACTOR_DEAD_TIMEOUT_S` raises
    RunError. `in_actor_order` (deterministic mode) sorts them by actor, each actor's in its own
    order.
    """
    got, last_item, dropped = [], time.monotonic(), 0
    if stop.is_set():
        return None, dropped
    check_actors()
    while len(got) < need:
        if stop.is_set():
            return None, dropped
        try:
            item = rollouts.get(timeout=POLL_S)
            last_item = time.monotonic()
        except queue.Empty:
            if stop.is_set():  # no restarts while stopping
                continue
            check_actors()
            if time.monotonic() - last_item > ACTOR_DEAD_TIMEOUT_S:
                msg = f"no rollout for {ACTOR_DEAD_TIMEOUT_S:.0f}s from live actors"
                raise RunError(msg) from None
            continue
        lag = updates - int(item.rollout.policy_version.min())
        if max_policy_lag and lag > max_policy_lag:
            dropped += 1
            continue  # a straggler: acted with params too old to learn from
        got.append(item)
    if in_actor_order:
        got.sort(key=lambda item: item.actor_index)  # a stable sort
    return got, dropped
