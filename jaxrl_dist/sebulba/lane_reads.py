"""Several agents' data seams read for the next update (`SebulbaEngine.prepare`): each learning
agent's lane is polled without waiting, and the agreement steps one of those ready on every
process (`rotation.py` picks which).

In deterministic mode the lanes take turns instead (`lanes_to_read`): the first lane whose
learner is the fewest lockstep rounds on reads alone, and the engine waits for its batch. Its
round's data need only the other agents' params of that round, which they have (their
learners are as many rounds on or more), so the agents' updates follow one order that the seed
alone sets, every agreement steps the lane on every process, and a budget stops the run at the
same update.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from jaxrl_dist.data.base import NOT_READY
from jaxrl_dist.data.on_policy import ACTOR_DEAD_TIMEOUT_S
from jaxrl_dist.errors import RunError
from jaxrl_dist.threads import POLL_S, RateCap

POLL_SLEEP_S = 0.001  # several agents: between polls of their data seams


def lanes_to_read(lanes: list[Any], lockstep: bool = False) -> list[tuple[int, Any]]:
    """The learning lanes a poll reads, by index: all of them, or in lockstep the one whose
    turn it is (see the module docstring); the others wait their turn, not their actors, so
    their clock of the last batch ready starts again."""
    learning = [(i, lane) for i, lane in enumerate(lanes) if lane.learning]
    if not lockstep:
        return learning
    turn = min(learning, key=lambda item: (item[1].learned_rounds(), item[0]))
    for _, lane in learning:
        if lane is not turn[1]:
            lane.last_ready = time.monotonic()
    return [turn]


class LaneReads:
    """Reads several lanes' data seams (see the module docstring); `caps`: the rate caps of
    the learners that have one (`config.max_updates_per_s`)."""

    def __init__(self, lanes: list[Any], caps: dict[str, RateCap], stop: threading.Event):
        self._lanes, self._caps, self._stop = lanes, caps, stop
        self.refused = 0  # the ready lanes the last agreement could not step; 0 after a step

    def poll(self) -> tuple[bool, int, list]:
        """Reads every learning lane without waiting until the ready lanes differ from those
        the last agreement could not step (none, after a step), or `POLL_S` passed. Every poll
        checks every agent's actors (restarting dead ones; RunError once the budget is spent),
        and an agent without a batch for `ACTOR_DEAD_TIMEOUT_S` ends the run. (stopped, the
        ready lanes' mask, the batches read now)."""
        deadline, fresh = time.monotonic() + POLL_S, []
        while True:
            mask = 0
            for i, lane in lanes_to_read(self._lanes):
                had = lane.batch is not None and lane.batch is not NOT_READY
                batch = lane.read(wait=False)
                if batch is None:
                    return True, 0, fresh
                if batch is not NOT_READY:
                    lane.last_ready = time.monotonic()
                    if not had:
                        fresh.append(batch)
                    cap = self._caps.get(lane.name)
                    if cap is None or not cap.hold():  # a capped learner waits its turn
                        mask |= 1 << i
            if (mask and mask != self.refused) or time.monotonic() > deadline:
                break
            time.sleep(POLL_SLEEP_S)
        self.check_actors()
        self.refused = mask  # until the engine steps one of them
        return False, mask, fresh

    def take_turn(self) -> tuple[bool, int, list]:
        """Deterministic mode: waits for the batch of the lane whose turn it is (a replay done
        with its round passes the turn on) and for its rate cap, so every agreement steps that
        lane on every process, or stops. (stopped, the lane's mask, its batch)."""
        while True:
            [(i, lane)] = lanes_to_read(self._lanes, lockstep=True)
            batch = lane.read(wait=not lane.flow.replays)  # an on-policy lane's comes
            if batch is None:
                return True, 0, []
            if batch is not NOT_READY:
                lane.last_ready = time.monotonic()
                cap = self._caps.get(lane.name)
                if cap is not None and not cap.wait(self._stop):
                    return True, 0, []
                return False, 1 << i, [batch]
            self.check_actors()
            time.sleep(POLL_SLEEP_S)

    def check_actors(self) -> None:
        """Restarts every agent's dead actors (RunError once the budget is spent); RunError
        when a learning agent has had no batch ready for `ACTOR_DEAD_TIMEOUT_S`."""
        now = time.monotonic()
        for lane in self._lanes:
            if lane.fleet is None:
                continue
            lane.fleet.check()
            if now - lane.last_ready > ACTOR_DEAD_TIMEOUT_S:
                raise RunError(
                    f"agent {lane.name}: no batch for {ACTOR_DEAD_TIMEOUT_S:.0f}s from live actors"
                )
