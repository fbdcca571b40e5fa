"""Scripted players for EnvPool's turn-based board games: uniform random over legal actions, the
"win if you can, block if you must, else random" heuristic, and a perfect tic-tac-toe player.

Every player is a `Player`: `act(obs [n, ...], legal_mask [n, A], games [n]) -> action [n]`
int32, where `obs` is the mover's own view and `games` the game indices (a player may keep state
per game: which snapshot plays it); `end_game(game, seat_return)` tells it a game is over.

EnvPool's games (aligned with pgx 2.6.0) give each player planes `[..., 0]` = its own pieces and
`[..., 1]` = the opponent's; tic-tac-toe's action is the cell (row-major), connect four's the
column (a piece drops to the lowest empty row, the highest row index). Pure NumPy; each player
draws from its own `np.random.Generator`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import NamedTuple

import numpy as np


class Player:
    """Plays the seats of a game that the learner does not play."""

    def act(self, obs: np.ndarray, legal_mask: np.ndarray, games: np.ndarray) -> np.ndarray:
        """`[n]` int32 actions for the mover's views `obs [n, ...]` in games `games [n]`."""
        raise NotImplementedError

    def end_game(self, game: int, seat_return: float) -> None:
        """Game `game` ended with `seat_return` for this player's seat."""

    def restart(self) -> None:
        """Every game starts afresh (an evaluation's first games): a player with a memory per
        game forgets them all."""


class ScriptedPlayer(Player):
    """A player that needs no state: `choose(obs [n, ...], legal_mask [n, A]) -> action [n]`."""

    def __init__(self, choose: Callable[[np.ndarray, np.ndarray], np.ndarray]):
        self.choose = choose

    def act(self, obs: np.ndarray, legal_mask: np.ndarray, games: np.ndarray) -> np.ndarray:
        return np.asarray(self.choose(obs, legal_mask), np.int32)


def random_legal(rng: np.random.Generator) -> ScriptedPlayer:
    """Uniform over each row's legal actions."""
    return ScriptedPlayer(lambda obs, legal_mask: _uniform_over(rng, legal_mask))


def _uniform_over(rng: np.random.Generator, allowed: np.ndarray) -> np.ndarray:
    """One action per row, uniform over the row's True entries (every row has one)."""
    allowed = np.asarray(allowed, bool)
    if not allowed.any(axis=1).all():
        raise ValueError("a row of the legal-action mask has no legal action")
    # The k-th True entry with k uniform: cumulative counts reach k + 1 first there.
    counts = allowed.sum(axis=1)
    k = (rng.random(len(allowed)) * counts).astype(np.int64)
    return np.argmax(np.cumsum(allowed, axis=1) > k[:, None], axis=1).astype(np.int32)


class Rules(NamedTuple):
    """A game's geometry for the heuristic, vectorised over boards (`[..., H, W]` bool, NumPy
    or jax arrays: the JAX players of `envs/jax_players.py` use the same rules):
    `place(own [n, H, W], occupied [n, H, W]) -> [n, A, H, W]`, `own` with a new piece for each
    action (unchanged where the action places nothing), and `wins(own [..., H, W]) -> [...]`."""

    place: Callable[[np.ndarray, np.ndarray], np.ndarray]
    wins: Callable[[np.ndarray], np.ndarray]


def _place_cell(own: np.ndarray, occupied: np.ndarray) -> np.ndarray:
    n, h, w = own.shape
    cells = np.eye(h * w, dtype=bool).reshape(1, h * w, h, w)
    return own[:, None] | cells


def _drop_in_column(own: np.ndarray, occupied: np.ndarray) -> np.ndarray:
    n, h, w = own.shape
    lowest = h - 1 - occupied.sum(axis=1)  # [n, W]: pieces stack up from row h - 1
    rows = np.arange(h)[None, None, :, None]
    cols = np.arange(w)
    piece = (rows == lowest[:, :, None, None]) & (cols[None, :, None, None] == cols)  # [n,A,H,W]
    return own[:, None] | piece  # a full column (lowest -1) places nothing


def _tictactoe_wins(own: np.ndarray) -> np.ndarray:
    rows, cols = own.all(axis=-1).any(axis=-1), own.all(axis=-2).any(axis=-1)
    diagonal = own[..., [0, 1, 2], [0, 1, 2]].all(axis=-1)
    anti = own[..., [0, 1, 2], [2, 1, 0]].all(axis=-1)
    return rows | cols | diagonal | anti


def _four_in_a_row(own: np.ndarray) -> np.ndarray:
    h, w = own.shape[-2:]
    at = lambda r, c: own[..., r : h - 3 + r, c : w - 3 + c]  # noqa: E731  shifted windows
    rows = own[..., :, : w - 3] & own[..., :, 1 : w - 2] & own[..., :, 2 : w - 1] & own[..., :, 3:]
    cols = own[..., : h - 3, :] & own[..., 1 : h - 2, :] & own[..., 2 : h - 1, :] & own[..., 3:, :]
    down = at(0, 0) & at(1, 1) & at(2, 2) & at(3, 3)
    up = at(0, 3) & at(1, 2) & at(2, 1) & at(3, 0)
    # Methods, not np.any: the same rules run on jax arrays inside jit (`envs/jax_players.py`).
    return rows.any(axis=(-2, -1)) | cols.any(axis=(-2, -1)) | (down | up).any(axis=(-2, -1))


RULES = {
    "TicTacToe-v1": Rules(_place_cell, _tictactoe_wins),
    "ConnectFour-v1": Rules(_drop_in_column, _four_in_a_row),
}


def heuristic(rules: Rules, rng: np.random.Generator) -> ScriptedPlayer:
    """Win if you can, block the opponent's win if you must, else uniform random (ties among
    winning or blocking moves broken uniformly too). Vectorised over the rows."""

    def policy(obs: np.ndarray, legal_mask: np.ndarray) -> np.ndarray:
        legal_mask = np.asarray(legal_mask, bool)
        own, opp = obs[..., 0].astype(bool), obs[..., 1].astype(bool)
        occupied = own | opp
        wins = rules.wins(rules.place(own, occupied)) & legal_mask  # [n, A]
        blocks = rules.wins(rules.place(opp, occupied)) & legal_mask
        preferred = np.where(wins.any(axis=1, keepdims=True), wins, blocks)
        allowed = np.where(preferred.any(axis=1, keepdims=True), preferred, legal_mask)
        return _uniform_over(rng, allowed)

    return ScriptedPlayer(policy)


# --- perfect tic-tac-toe ------------------------------------------------------------------------

_LINES = tuple(
    sum(1 << c for c in cells)
    for cells in (
        (0, 1, 2),
        (3, 4, 5),
        (6, 7, 8),
        (0, 3, 6),
        (1, 4, 7),
        (2, 5, 8),
        (0, 4, 8),
        (2, 4, 6),
    )
)
_ALL_CELLS = 0x1FF  # a full board


@functools.cache
def tictactoe_value(own: int, opp: int) -> int:
    """The game's value for the player to move (1 win, 0 draw, -1 loss) under perfect play;
    boards are 9-bit masks of cells (bit `3 * row + col`)."""
    if _won(opp):
        return -1
    empty = ~(own | opp) & _ALL_CELLS
    if not empty:
        return 0
    return max(-tictactoe_value(opp, own | 1 << a) for a in range(9) if empty >> a & 1)


def tictactoe_action_values(view: np.ndarray) -> np.ndarray:
    """`[9]` value of each move for the mover of `view` (`[3, 3, 2]`), -2 where occupied."""
    own, opp = (
        int(np.dot(view[..., c].reshape(9).astype(np.int64), 1 << np.arange(9))) for c in (0, 1)
    )
    return _move_values(own, opp)


def _move_values(own: int, opp: int) -> np.ndarray:
    """`[9]` value of each move for the mover of bit boards `own`, `opp`; -2 where occupied."""
    values = np.full(9, -2, np.int64)
    for a in range(9):
        if not (own | opp) >> a & 1:
            values[a] = -tictactoe_value(opp, own | 1 << a)
    return values


def perfect_tictactoe(rng: np.random.Generator) -> ScriptedPlayer:
    """A minimax player: uniform among the moves of the best value (it never loses)."""

    def policy(obs: np.ndarray, legal_mask: np.ndarray) -> np.ndarray:
        values = np.stack([tictactoe_action_values(view) for view in obs])
        values = np.where(legal_mask, values, -3)
        return _uniform_over(rng, values == values.max(axis=1, keepdims=True))

    return ScriptedPlayer(policy)


def tictactoe_exact_losses(
    greedy: Callable[[np.ndarray, np.ndarray], np.ndarray],
) -> tuple[float, float]:
    """The probability that a deterministic policy loses to `perfect_tictactoe` (uniform among
    the best moves), as first and as second player: every line perfect play may choose is
    followed with its probability, no sampling. `greedy(views [n, 3, 3, 2], legal [n, 9]) ->
    [n]` is asked once, for every position the policy can meet."""
    positions = _tictactoe_positions()
    views = np.zeros((len(positions), 9, 2), np.int8)
    for i, (own, opp) in enumerate(positions):
        views[i, :, 0] = own >> np.arange(9) & 1
        views[i, :, 1] = opp >> np.arange(9) & 1
    legal = views.sum(axis=2) == 0
    moves = np.asarray(greedy(views.reshape(-1, 3, 3, 2), legal))
    move = dict(zip(positions, moves.tolist(), strict=True))

    @functools.cache
    def policy_to_move(own: int, opp: int) -> float:
        own |= 1 << move[(own, opp)]
        return 0.0 if _won(own) or own | opp == _ALL_CELLS else perfect_to_move(opp, own)

    @functools.cache
    def perfect_to_move(own: int, opp: int) -> float:
        values = _move_values(own, opp)
        best = np.flatnonzero(values == values.max()).tolist()
        lost = [
            1.0
            if _won(own | 1 << a)
            else 0.0
            if (own | opp | 1 << a) == _ALL_CELLS
            else policy_to_move(opp, own | 1 << a)
            for a in best
        ]
        return sum(lost) / len(best)

    return policy_to_move(0, 0), perfect_to_move(0, 0)


def _won(board: int) -> bool:
    return any(board & line == line for line in _LINES)


@functools.cache
def _tictactoe_positions() -> tuple[tuple[int, int], ...]:
    """Every reachable non-final position as (mover's cells, the other's cells)."""
    seen, stack = set(), [(0, 0)]
    while stack:
        own, opp = stack.pop()
        if (own, opp) in seen or _won(opp) or own | opp == _ALL_CELLS:
            continue
        seen.add((own, opp))
        stack += [(opp, own | 1 << a) for a in range(9) if not (own | opp) >> a & 1]
    return tuple(sorted(seen))


def scripted_problem(name: str, env_id: str) -> str | None:
    """Why the scripted player `name` cannot play `env_id` (one line), or None."""
    games = {"random": None, "heuristic": sorted(RULES), "perfect": ["TicTacToe-v1"]}
    if name not in games:
        return f"no scripted player {name!r}; use random, heuristic or perfect"
    if games[name] is not None and env_id not in games[name]:
        return f"the {name!r} player knows only {games[name]}, not {env_id}"
    return None


def scripted_player(name: str, env_id: str, rng: np.random.Generator) -> ScriptedPlayer:
    """The scripted player `name` ("random", "heuristic", "perfect") for `env_id`; ValueError
    (one line) where the game has no such player."""
    problem = scripted_problem(name, env_id)
    if problem:
        raise ValueError(problem)
    if name == "random":
        return random_legal(rng)
    if name == "heuristic":
        return heuristic(RULES[env_id], rng)
    return perfect_tictactoe(rng)
