"""Which learner steps next when one run trains several (issue 40): a round-robin over the
lanes whose batch is ready on every process (`Agreement.totals.ready`, a bitmask).

A lane is one agent's learner state, data flow and params store. Each step updates one lane:
the next ready one after the lane served last, so a lane that stays ready waits at most
`lanes - 1` steps whatever the others' data rates, and none starves. Data rates, not this
rotation, set each agent's share of the updates. Every process picks the same lane from the
same gathered masks.
"""

from __future__ import annotations


class Rotation:
    """Round-robin over `lanes` lanes, starting at lane 0."""

    def __init__(self, lanes: int):
        if lanes < 1:
            raise ValueError(f"a run has at least one lane, got {lanes}")
        self.lanes = lanes
        self.last = lanes - 1  # so lane 0 is the first served

    def pick(self, ready: int) -> int | None:
        """The lane to step among those set in the `ready` bitmask (the first after the last
        one picked), or None when none is ready (the loop polls again)."""
        for offset in range(1, self.lanes + 1):
            lane = (self.last + offset) % self.lanes
            if ready >> lane & 1:
                self.last = lane
                return lane
        return None
