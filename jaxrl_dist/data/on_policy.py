"""The on-policy data flow: a bounded queue between the actors and the learner.

Back-pressure (`queue_size` rollouts per actor) bounds policy lag; `max_policy_lag` drops
stragglers; in lockstep (deterministic) mode a batch is one unroll of every actor in actor order.
Every rollout is learned from once.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable

import jax
import numpy as np

from jaxrl_dist.data.base import NOT_READY, Batch, NotReady
from jaxrl_dist.errors import RunError
from jaxrl_dist.threads import POLL_S, put_until_stopped
from jaxrl_dist.types import concatenate_rollouts

ACTOR_DEAD_TIMEOUT_S = 120.0  # no rollout for this long from live actors: give up


class OnPolicyQueue:
    """Actors `write` `QueueItem`s (`data/base.py`); `read` takes `items_per_batch`
    of them for the next update.

    Args:
      maxsize: rollouts the queue holds (then `write` waits: back-pressure).
      items_per_batch: actor rollouts per update (this process's batch / segments per rollout).
      max_policy_lag: drop rollouts acted more than this many updates ago (0 keeps every one).
      in_actor_order: lockstep mode: sort each batch by actor, and keep the env actions.
      stop_writers: set when the actors stop; a waiting `write` returns then.
      stop_reading: set when the learner loop stops; a waiting `read` returns None then.
    """

    def __init__(
        self,
        maxsize: int,
        items_per_batch: int,
        max_policy_lag: int,
        in_actor_order: bool,
        stop_writers: threading.Event,
        stop_reading: threading.Event,
    ):
        self._queue: queue.Queue = queue.Queue(maxsize=maxsize)
        self._need, self._max_lag, self._ordered = items_per_batch, max_policy_lag, in_actor_order
        self._stop_writers, self._stop = stop_writers, stop_reading
        self.check_actors: Callable[[], None] = lambda: None
        # What `read` has taken towards the next batch: items, their env steps, stragglers.
        self._got: list = []
        self._steps = self._dropped = 0

    @staticmethod
    def env_steps_per_update(unroll_length: int, batch_size: int) -> float:
        return float(unroll_length * batch_size)

    @property
    def size(self) -> int:
        return self._queue.qsize()

    def write(self, item) -> float:
        return put_until_stopped(self._queue, item, self._stop_writers)

    def read(self, updates: int, wait: bool = True) -> Batch | NotReady | None:
        """The next batch (None once the run stops). Never waits without checking the actors:
        `check_actors()` runs at least every `POLL_S` while the queue is empty (it restarts dead
        actors, or raises RunError), and none delivering for `ACTOR_DEAD_TIMEOUT_S` raises
        RunError. With `wait=False` it takes what the queue holds now and returns `NOT_READY`
        short of a batch, keeping what it took for the next call (the caller checks the
        actors); it never takes more than one batch's items, so back-pressure stays."""
        if self._stop.is_set():
            return None
        if wait:
            self.check_actors()
        last_item = time.monotonic()
        while len(self._got) < self._need:
            if self._stop.is_set():
                return None
            try:
                item = self._queue.get(timeout=POLL_S) if wait else self._queue.get_nowait()
                last_item = time.monotonic()
            except queue.Empty:
                if not wait:
                    return NOT_READY
                if self._stop.is_set():  # no restarts while stopping
                    continue
                self.check_actors()
                if time.monotonic() - last_item > ACTOR_DEAD_TIMEOUT_S:
                    msg = f"no rollout for {ACTOR_DEAD_TIMEOUT_S:.0f}s from live actors"
                    raise RunError(msg) from None
                continue
            self._steps += item.rollout.unroll_length * item.rollout.batch_size
            lag = updates - int(item.rollout.policy_version.min())
            if self._max_lag and lag > self._max_lag:
                self._dropped += 1
                continue  # a straggler: acted with params too old to learn from
            self._got.append(item)
        got, steps, dropped = self._got, self._steps, self._dropped
        self._got, self._steps, self._dropped = [], 0, 0
        env_actions = memory = None
        if self._ordered:  # items in actor order (a stable sort): columns in global actor order
            got.sort(key=lambda item: item.actor_index)
            firsts = [item for item in got if item.env_actions is not None]  # one per unroll
            env_actions = np.concatenate([item.env_actions for item in firsts], axis=1)
            memories = [item.memory for item in firsts]
            memory = jax.tree.map(lambda *rows: np.concatenate(rows), *memories)
        rollout = concatenate_rollouts([i.rollout for i in got])
        return Batch(rollout, steps, dropped, env_actions, memory=memory)
