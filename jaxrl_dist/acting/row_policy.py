"""A policy that plays many games (or streams) a few at a time, each with its own memory.

A seat's opponent in a turn-based game moves in some of its games at each step; a recurrent
policy there must act from the memory of the game it moves in, start afresh when that game
starts, and never carry one game's memory into another. `RowPolicy` keeps one actor-state row
per game (a recurrent core's state, the row's key stream) on its device, acts for the games it
is given (`agents/base.py`: `row_policies`, one jitted call padded to a fixed row count) and
starts a row afresh at its next move after `restart`. A memoryless policy pays a gather and a
scatter of its key rows and nothing else.
"""

from __future__ import annotations

from typing import Any

import jax
import numpy as np

from jaxrl_dist.agents.base import ActorCore, evaluation_state, row_policies
from jaxrl_dist.envs.games import Player
from jaxrl_dist.types import ACTION_MASK, AGENT_VIEW, PyTree, pad_request


class RowPolicy:
    """Greedy or sampled actions of one agent's actor half for `rows` games.

    Args:
      core: the agent's actor half.
      rows: the games (or streams) it plays, numbered `0 .. rows - 1`.
      greedy: the policy's mode (True) or a sample from it.
      key: the rows' key streams (each row its own).
      device: where the state lives and the policy runs (None: JAX's default device).
    """

    def __init__(
        self,
        core: ActorCore,
        rows: int,
        greedy: bool,
        key: jax.Array,
        device: jax.Device | None = None,
    ):
        self._step = row_policies(core)[0 if greedy else 1]
        self._rows, self._device = rows, device
        # Row `rows`: the padding row, whose results are dropped.
        self._state = jax.device_put(evaluation_state(core, rows + 1, key), device)
        self._fresh = np.ones(rows, bool)  # the row's next move starts a game

    def act(self, params: PyTree, obs: Any, at: np.ndarray) -> np.ndarray:
        """`[n]` actions of rows `at [n]` (distinct) for their observations `obs [n, ...]`."""
        at = np.asarray(at, np.int32)
        n = len(at)
        first = self._fresh[at]
        self._fresh[at] = False
        obs, rows, first = pad_request(obs, at, first, self._rows, self._rows)
        obs = jax.device_put(obs, self._device)
        action, self._state = self._step(params, obs, self._state, rows, first)
        return np.asarray(action)[:n]

    def act_masked(
        self, params: PyTree, view: np.ndarray, legal_mask: np.ndarray, at: np.ndarray
    ) -> np.ndarray:
        """`act` on a game's observation: the mover's view with its legal-action mask; int32
        indices, or float32 `[n, D]` continuous actions (a mask of width 0)."""
        obs = {AGENT_VIEW: view, ACTION_MASK: np.asarray(legal_mask, bool)}
        action = self.act(params, obs, at)
        return action.astype(np.int32 if action.dtype.kind in "iub" else np.float32)

    def restart(self, at: Any = None) -> None:
        """Rows `at` (None: every row) start afresh at their next move: a new game."""
        self._fresh[slice(None) if at is None else at] = True


class ParamsPlayer(Player):
    """Plays a seat of many games with a `RowPolicy` and `params` (set at any time: another
    agent's before each evaluation, a saved policy's once), a memory per game."""

    def __init__(self, policy: RowPolicy, params: PyTree = None):
        self._policy, self.params = policy, params

    def act(self, obs: np.ndarray, legal_mask: np.ndarray, games: np.ndarray) -> np.ndarray:
        return self._policy.act_masked(self._params(), obs, legal_mask, games)

    def restart(self) -> None:
        self._policy.restart()

    def end_game(self, game: int, seat_return: float) -> None:
        self._policy.restart(game)

    def _params(self) -> PyTree:
        return self.params
