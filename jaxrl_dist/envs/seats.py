"""A turn-based EnvPool game seen as one stream per learner seat: the actor loop runs unchanged.

EnvPool's games (`TicTacToe-v1`, `ConnectFour-v1`, ...) step one action per game, from the
player to move (`info["current_player"]`), and return every player's observation and reward
(`[games * players, ...]`, ordered as `info["players"]`). The learner should instead see, for each
seat it plays, an ordinary env: its own observations at its own turns, the reward it received
since its last turn, and the game's end. `SeatedGame` makes that view:

- stream `g * L + k` is seat `learner_seats[k]` of game `g` (L learner seats per game); it emits
  an observation when its seat is to move, with the sum of that seat's rewards since its last
  observation (the other seats' moves included), and the seat's legal-action mask;
- seats not played by the learner are played inside the adapter by their `SeatPolicy` (random,
  heuristic, a frozen snapshot), batched over the games where they are to move;
- when a game ends (by any seat's move), every learner stream of it emits a final observation
  with its final reward and the end flags; the actor's reply to it is ignored, as EnvPool ignores
  the action after an episode ends, and the stream's next observation starts the next game
  (`elapsed_step == 0`, reward 0), the convention `jaxrl_dist.types.Rollout` expects.

It speaks the async pool's protocol (`async_reset`, `recv`, `send`, `close`, `config`), so
`Actor`, `SegmentBuffer` and `EpisodeTracker` handle the streams as they handle envs. Every
`recv()` returns every stream waiting for an action, and the actor answers all of them in one
`send()`: then every game is back in flight before the next `recv()`, so the pool's `recv()`
(which would wait forever for games nobody sent) always has its batch to return.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from jaxrl_dist.envs.games import SeatPolicy


class SeatedGame:
    """Streams per learner seat over an async EnvPool game pool (see the module docstring).

    Args:
      pool: an EnvPool game, gymnasium API, any `batch_size <= num_envs`.
      num_players: P, the game's seats.
      learner_seats: the seats whose streams the actor sees (at least one).
      opponents: `{seat: SeatPolicy}` for every other seat.
    """

    def __init__(
        self,
        pool: Any,
        num_players: int,
        learner_seats: Sequence[int],
        opponents: dict[int, SeatPolicy],
    ):
        seats = set(range(num_players))
        learner_seats = tuple(learner_seats)
        if (
            not learner_seats
            or set(learner_seats) - seats
            or len(set(learner_seats)) < len(learner_seats)
        ):
            raise ValueError(f"learner_seats={learner_seats} must be distinct seats of {seats}")
        if set(opponents) != seats - set(learner_seats):
            raise ValueError(
                f"opponents must play exactly seats {sorted(seats - set(learner_seats))}; "
                f"got {sorted(opponents)}"
            )
        self._pool = pool
        self._players = num_players
        self._learner = learner_seats
        self._stream_of_seat = {s: k for k, s in enumerate(learner_seats)}
        self._opponents = opponents
        n = pool.config["num_envs"]
        self._games = n
        self.config = {**pool.config, "num_envs": n * len(learner_seats)}
        self._pending = np.zeros((n, num_players), np.float64)  # rewards not yet delivered
        self._turns = np.zeros((n, len(learner_seats)), np.int32)  # stream obs this game
        self._waiting = [set() for _ in range(n)]  # streams of a game awaiting the actor
        self._ready: list[tuple] = []

    # --- the pool protocol ---------------------------------------------------------------------

    def async_reset(self) -> None:
        self._pool.async_reset()

    def recv(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        """Every stream observation waiting for the learner's action: `(obs [n, ...], reward
        [n], terminated [n], truncated [n], info)` with `info["env_id"]` the stream ids and
        `info["elapsed_step"]`, `info["legal_action_mask"]`, `info["seat"]`."""
        while not self._ready:
            self._advance(*self._pool.recv())
        ready, self._ready = self._ready, []
        obs, reward, terminated, truncated, stream, elapsed, mask, seat = zip(*ready, strict=True)
        info = {
            "env_id": np.array(stream, np.int32),
            "elapsed_step": np.array(elapsed, np.int32),
            "legal_action_mask": np.stack(mask),
            "seat": np.array(seat, np.int32),
        }
        return (np.stack(obs), np.array(reward, np.float32), np.array(terminated),
                np.array(truncated), info)  # fmt: skip

    def send(self, action: np.ndarray, env_id: np.ndarray) -> None:
        """The learner's actions for streams `env_id`; steps the games whose turn they were."""
        action = np.asarray(action)
        games, actions = [], []
        for a, stream in zip(action, np.asarray(env_id), strict=True):
            g, k = divmod(int(stream), len(self._learner))
            waiting = self._waiting[g]
            if k not in waiting:
                raise ValueError(f"stream {stream} was not waiting for an action")
            waiting.discard(k)
            if not waiting:  # the game's turn (or, after its end, its reset step) can go on
                games.append(g)
                actions.append(a)
        if games:
            self._pool.send(np.stack(actions), np.array(games, np.int32))

    def close(self) -> None:
        self._pool.close()

    # --- one pool result -----------------------------------------------------------------------

    def _advance(self, obs, reward, terminated, truncated, info) -> None:
        """Splits one pool `recv()` into stream observations and opponent moves."""
        games = np.asarray(info["env_id"])
        position = {int(g): i for i, g in enumerate(games)}
        players = info["players"]
        rows = np.zeros((len(games), self._players), np.int64)  # obs row of (game, player)
        for row, (g, p) in enumerate(zip(players["env_id"], players["id"], strict=True)):
            rows[position[int(g)], int(p)] = row
        elapsed = np.asarray(info["elapsed_step"])
        to_move = np.asarray(info["current_player"])
        masks = np.asarray(info["legal_action_mask"], bool)
        ended = np.logical_or(terminated, truncated)
        self._pending[games[elapsed == 0]] = 0.0  # a new game (its reset step's reward is 0)
        self._pending[games] += np.asarray(reward, np.float64)[rows]
        self._turns[games[elapsed == 0]] = 0
        opponent_moves: dict[int, list[int]] = {}
        for i, g in enumerate(games):
            if ended[i]:
                self._emit_end(g, obs, rows[i], bool(terminated[i]), bool(truncated[i]), masks[i])
            elif int(to_move[i]) in self._stream_of_seat:
                self._emit_turn(g, int(to_move[i]), obs[rows[i, to_move[i]]], masks[i])
            else:
                opponent_moves.setdefault(int(to_move[i]), []).append(i)
        for seat, at in opponent_moves.items():
            views = obs[rows[at, seat]]
            actions = self._opponents[seat](views, masks[at])
            self._pool.send(np.asarray(actions, np.int32), games[at].astype(np.int32))

    def _emit(self, g: int, seat: int, view, terminated: bool, truncated: bool, mask) -> None:
        k = self._stream_of_seat[seat]
        reward, self._pending[g, seat] = self._pending[g, seat], 0.0
        stream = g * len(self._learner) + k
        self._ready.append(
            (view, reward, terminated, truncated, stream, self._turns[g, k], mask, seat)
        )
        self._turns[g, k] += 1
        self._waiting[g].add(k)

    def _emit_turn(self, g: int, seat: int, view, mask) -> None:
        self._emit(g, seat, view, False, False, mask)

    def _emit_end(self, g: int, obs, rows, terminated: bool, truncated: bool, mask) -> None:
        """Every learner seat's final observation; the pool's reset step waits for all replies."""
        all_legal = np.ones_like(mask)  # no move is made from a final observation
        for seat in self._learner:
            self._emit(g, seat, obs[rows[seat]], terminated, truncated, all_legal)
        self._pending[g] = 0.0
