"""The learner side of the rollout queue: one process's share of an update's batch."""

from __future__ import annotations

import queue
import threading
import time

from jaxrl_dist.errors import RunError
from jaxrl_dist.runtime.actor import POLL_S, Actor
from jaxrl_dist.types import Rollout

ACTOR_DEAD_TIMEOUT_S = 120.0  # no rollout for this long from live actors: give up


def check_actors(actors: list[Actor]) -> None:
    """Raises RunError if an actor thread died (with its exception as the cause)."""
    for actor in actors:
        if actor.error is not None or not actor.is_alive():
            err = actor.error
            raise RunError(f"actor {actor.index} stopped: {err!r}") from err


def collect_rollouts(
    rollouts: queue.Queue,
    actors: list[Actor],
    need: int,
    stop: threading.Event,
    updates: int,
    max_policy_lag: int = 0,
    in_actor_order: bool = False,
) -> tuple[list[Rollout] | None, int]:
    """Takes `need` rollouts from the actors' `(actor index, rollout)` queue.

    Returns (the rollouts, or None once `stop` is set; how many were dropped as stragglers,
    acted more than `max_policy_lag` updates before `updates`). Never waits without checking
    the actors: a dead actor, or none delivering for `ACTOR_DEAD_TIMEOUT_S`, raises RunError.
    `in_actor_order` (deterministic mode) sorts them by actor, each actor's in its own order.
    """
    got, last_item, dropped = [], time.monotonic(), 0
    if stop.is_set():
        return None, dropped
    check_actors(actors)
    while len(got) < need:
        if stop.is_set():
            return None, dropped
        try:
            actor_index, rollout = rollouts.get(timeout=POLL_S)
            last_item = time.monotonic()
        except queue.Empty:
            check_actors(actors)
            if time.monotonic() - last_item > ACTOR_DEAD_TIMEOUT_S:
                msg = f"no rollout for {ACTOR_DEAD_TIMEOUT_S:.0f}s from live actors"
                raise RunError(msg) from None
            continue
        lag = updates - int(rollout.policy_version.min())
        if max_policy_lag and lag > max_policy_lag:
            dropped += 1
            continue  # a straggler: acted with params too old to learn from
        got.append((actor_index, rollout))
    if in_actor_order:
        got.sort(key=lambda item: item[0])  # a stable sort
    return [rollout for _, rollout in got], dropped
