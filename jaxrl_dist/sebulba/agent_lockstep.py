"""Deterministic mode among several agents, one agent's part (`sebulba/lane.py` holds one).

Each agent's actors play its games in lockstep rounds (`acting/lockstep.py`), and the other
agents move there with their params of the same round (`RoundParams`): the lane records this
agent's as it reaches each round (an on-policy agent's round `u` is acted with its version
`u`; a replay agent's with the version its learner reached before the round,
`data/lockstep_replay.py`). A checkpoint keeps them with this agent's env actions of the epoch
(`LaneReplayLog`), so each agent's resumed actors replay the epoch, the others' moves included.
"""

from __future__ import annotations

from typing import Any

from jaxrl_dist.acting.params_store import RoundParams
from jaxrl_dist.data import snapshot as npz
from jaxrl_dist.sebulba.resume import LaneReplayLog
from jaxrl_dist.types import keys_under

ITEM, ROUNDS = "lockstep", "rounds/"  # the checkpoint item; its rounds' keys


class AgentLockstep:
    """One learning agent's rounds and replay log among several (see the module docstring).

    Args:
      epoch_updates: rounds per env epoch.
      replay_log: the on-policy agent's env actions of the epoch; None for a replay agent
        (its data snapshot keeps its own, `data/lockstep_replay.py`).
    """

    def __init__(self, epoch_updates: int, replay_log: LaneReplayLog | None):
        self.rounds = RoundParams(epoch_updates)
        self.replay_log = replay_log

    def items(self, updates: int) -> dict[str, bytes]:
        """This process's checkpoint item after `updates` updates."""
        arrays = {ROUNDS + k: v for k, v in self.rounds.to_arrays().items()}
        if self.replay_log is not None:
            arrays.update(self.replay_log.arrays(updates))
        return {ITEM: npz.to_bytes(arrays)}

    def restore(self, ckpt: Any, template: Any, updates: int) -> dict | None:
        """Takes back the latest checkpoint's item (`template`: the actor params); returns
        this process's env actions to replay (`LaneReplayLog.from_arrays`) or None."""
        saved = ckpt.restore_data(ckpt.latest_step(), ITEM)
        if saved is None:
            return None
        arrays = npz.from_bytes(saved)
        self.rounds.restore_arrays(keys_under(arrays, ROUNDS), template)
        if self.replay_log is None:
            return None
        return self.replay_log.from_arrays(arrays, updates)
