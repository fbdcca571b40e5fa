"""A turn-based EnvPool game seen as one stream per learner seat: the actor loop runs unchanged.

EnvPool's games (`TicTacToe-v1`, `ConnectFour-v1`, ...) step one action per game, from the
player to move (`info["current_player"]`), and return every player's observation and reward
(`[games * players, ...]`, ordered as `info["players"]`). The learner should instead see, for each
seat it plays, an ordinary env: its own observations at its own turns, the reward it received
since its last turn, and the game's end. `SeatedGame` makes that view:

- each game has its own roles (`roles[g][s]`: `LEARNER` or a player's name), so one pool can
  mix self-play games with games against random; each (game, learner seat) pair is a stream,
  numbered in (game, seat) order; it emits an observation when its seat is to move, with the sum
  of that seat's rewards since its last observation (the other seats' moves included), and the
  seat's legal-action mask;
- the other seats are played inside the adapter by their `Player` (random, heuristic, a frozen
  snapshot), batched over the games where that player is to move; a player hears each game's
  end, and every finished game is kept as a `GameResult` (returns per seat, length, roles);
- with `opening_plies = k > 0`, each game starts with n moves drawn uniformly at random over
  the legal ones, n uniform in [0, k] per game, played inside the adapter whoever's seat it is
  (in no stream): self-play then meets openings its own policy would never choose;
- when a game ends (by any seat's move), every learner stream of it emits a final observation
  with its final reward and the end flags; the actor's reply to it is ignored, as EnvPool ignores
  the action after an episode ends, and the stream's next observation starts the next game
  (`elapsed_step == 0`, reward 0), the convention `jaxrl_dist.types.Rollout` expects.

It speaks the async pool's protocol (`async_reset`, `recv`, `send`, `close`, `config`), so
`Actor`, `SegmentBuffer` and `EpisodeTracker` handle the streams as they handle envs. Every
`recv()` returns every stream waiting for an action, and the actor answers all of them in one
`send()`: then every game is back in flight before the next `recv()`, so the pool's `recv()`
(which would wait forever for games nobody sent) always has its batch to return.

With `gather=True` the actor may instead hold streams (synchronous collection: a stream whose
unroll is full waits, its game paused, for the next params while the others play on): the
pool then returns one game per `recv()` (`batch_size=1`) and `recv()` gathers every game in
flight before it splits them, so a round's results are the ones a synchronous pool of every
game would give, in game order, however EnvPool's threads finished.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import jax
import numpy as np

from jaxrl_dist.envs.games import Player, random_legal
from jaxrl_dist.types import ACTION_MASK, AGENT_VIEW

# The roles a seat can be played by (`config.seats.games` names them).
LEARNER_ROLE = "learner"
POOL_ROLE = "pool"  # a frozen snapshot of the learner from the run's opponent pool
FROZEN_ROLE = "frozen"  # the learner's policy as the run started (init or warm start)
SCRIPTED_ROLES = ("random", "heuristic", "perfect")
SNAPSHOT_ROLES = (POOL_ROLE, FROZEN_ROLE)
# "agent:NAME": another agent of the run (`config.agents`), played with its current params.
AGENT_ROLE = "agent:"
# "pool:NAME" / "frozen:NAME" in an agent's view: another agent's opponent pool (its snapshots
# on its own cadence) or its starting policy, a league across agents (`config/agents.py`).
LEARNER = LEARNER_ROLE
OPENING = "<opening>"  # who makes a game's random opening moves (no role can be named so)


def agent_snapshot(role: str) -> tuple[str, str] | None:
    """("pool" | "frozen", NAME) of another agent's snapshot role "pool:NAME" / "frozen:NAME",
    else None."""
    kind, sep, name = role.partition(":")
    return (kind, name) if sep and kind in SNAPSHOT_ROLES and name else None


class GameResult(NamedTuple):
    """A finished game: its index, `[P]` returns per seat, moves made, and who played each seat."""

    game: int
    returns: np.ndarray
    length: int
    roles: tuple[str, ...]


def same_roles(num_games: int, roles: Sequence[str]) -> list[tuple[str, ...]]:
    """Every game with the same `roles` per seat."""
    return [tuple(roles)] * num_games


class SeatedGame:
    """Streams per learner seat over an async EnvPool game pool (see the module docstring).

    Args:
      pool: an EnvPool game, gymnasium API, any `batch_size <= num_envs`.
      roles: `roles[g][s]`, who plays seat `s` of game `g`: `LEARNER` or a name in `players`.
      players: `{name: Player}` for the seats the learner does not play.
      opening_plies: the most random opening moves a game starts with (see the module
        docstring); 0: none. Moves that cannot end a game (tic-tac-toe and connect four: up
        to 4): a game decided in its opening still ends as any game does.
      rng: draws the openings (needed when `opening_plies > 0`).
      gather: `recv()` gathers every game in flight (see the module docstring); the pool's
        `batch_size` must be 1.
    """

    def __init__(
        self,
        pool: Any,
        roles: Sequence[Sequence[str]],
        players: dict[str, Player],
        opening_plies: int = 0,
        rng: np.random.Generator | None = None,
        gather: bool = False,
    ):
        n = pool.config["num_envs"]
        if gather and pool.config["batch_size"] != 1:
            raise ValueError("gather=True needs a pool of batch_size 1 (it gathers the games)")
        roles = [tuple(r) for r in roles]
        if len(roles) != n or len({len(r) for r in roles}) != 1:
            raise ValueError(f"roles must name every seat of each of the pool's {n} games")
        unknown = {name for r in roles for name in r} - {LEARNER, *players}
        if unknown:
            raise ValueError(f"roles name players {sorted(unknown)} that are not in players")
        learner = np.array([[name == LEARNER for name in r] for r in roles])
        if not learner.any():
            raise ValueError(f"no seat is played by the learner: put {LEARNER!r} in roles")
        self._pool = pool
        self._roles = roles
        self._players = players
        self._stream = np.where(learner, np.cumsum(learner).reshape(learner.shape) - 1, -1)
        self._pair = [divmod(int(i), learner.shape[1]) for i in np.flatnonzero(learner)]
        self.config = {**pool.config, "num_envs": len(self._pair)}
        p = learner.shape[1]
        self._pending = np.zeros((n, p), np.float64)  # rewards not yet delivered, per seat
        self._return = np.zeros((n, p), np.float64)  # this game's rewards so far, per seat
        self._turns = np.zeros((n, p), np.int32)  # stream observations this game, per seat
        self._moves = np.zeros(n, np.int32)
        if opening_plies < 0 or (opening_plies and rng is None):
            raise ValueError("opening_plies must be >= 0, and > 0 needs an rng")
        self._max_opening, self._rng = opening_plies, rng
        self._opening = np.zeros(n, np.int32)  # random moves this game starts with
        if opening_plies:
            self._players = {**players, OPENING: random_legal(rng)}
        self._gather, self._in_flight = gather, 0  # games sent to the pool, not yet received
        self._waiting = [set() for _ in range(n)]  # seats of a game awaiting the actor
        self._ready: list[tuple] = []
        self.finished: list[GameResult] = []

    # --- the pool protocol ---------------------------------------------------------------------

    def async_reset(self) -> None:
        self._pool.async_reset()
        self._in_flight = len(self._roles)

    def recv(self) -> tuple[dict[str, np.ndarray], np.ndarray, np.ndarray, np.ndarray, dict]:
        """Every stream observation waiting for the learner's action: `(obs, reward [n],
        terminated [n], truncated [n], info)`; `obs` is `{AGENT_VIEW: [n, ...], ACTION_MASK:
        [n, A]}` (`jaxrl_dist.types`), `info["env_id"]` the stream ids, with
        `info["elapsed_step"]`, `info["legal_action_mask"]` and `info["seat"]`."""
        while not self._ready:
            self._advance(*self._pool_recv())
        ready, self._ready = self._ready, []
        obs, reward, terminated, truncated, stream, elapsed, mask, seat = zip(*ready, strict=True)
        info = {
            "env_id": np.array(stream, np.int32),
            "elapsed_step": np.array(elapsed, np.int32),
            "legal_action_mask": np.stack(mask),
            "seat": np.array(seat, np.int32),
        }
        obs = {AGENT_VIEW: np.stack(obs), ACTION_MASK: info["legal_action_mask"]}
        return obs, np.array(reward, np.float32), np.array(terminated), np.array(truncated), info

    def send(self, action: np.ndarray, env_id: np.ndarray) -> None:
        """The learner's actions for streams `env_id`; steps the games whose turn they were."""
        games, actions = [], []
        for a, stream in zip(np.asarray(action), np.asarray(env_id), strict=True):
            g, seat = self._pair[int(stream)]
            waiting = self._waiting[g]
            if seat not in waiting:
                raise ValueError(f"stream {stream} was not waiting for an action")
            waiting.discard(seat)
            if not waiting:  # the game's turn (or, after its end, its reset step) can go on
                games.append(g)
                actions.append(a)
        if games:
            self._pool_send(np.stack(actions), np.array(games, np.int32))

    def close(self) -> None:
        self._pool.close()

    def _pool_send(self, action: np.ndarray, games: np.ndarray) -> None:
        self._in_flight += len(games)
        self._pool.send(action, games)

    def _pool_recv(self) -> tuple:
        """One pool `recv()`, or with `gather` every game in flight as one result."""
        if not self._gather:
            result = self._pool.recv()
            self._in_flight -= len(result[4]["env_id"])
            return result
        if not self._in_flight:
            raise RuntimeError("no game is in flight: the actor holds every stream of the pool")
        parts = []
        while self._in_flight:
            parts.append(self._pool.recv())
            self._in_flight -= len(parts[-1][4]["env_id"])
        return jax.tree.map(lambda *leaves: np.concatenate(leaves), *parts)

    # --- one pool result -----------------------------------------------------------------------

    def _advance(self, obs, reward, terminated, truncated, info) -> None:
        """Splits one pool `recv()` into stream observations, game results and other players'
        moves (sent at once, one call per player)."""
        games = np.asarray(info["env_id"])
        position = {int(g): i for i, g in enumerate(games)}
        players = info["players"]
        rows = np.zeros((len(games), self._pending.shape[1]), np.int64)  # obs row of a seat
        for row, (g, p) in enumerate(zip(players["env_id"], players["id"], strict=True)):
            rows[position[int(g)], int(p)] = row
        # Game order, not the order EnvPool's threads finished in: the openings' and the
        # scripted players' draws go to the same games in every rerun.
        new = np.sort(games[np.asarray(info["elapsed_step"]) == 0])
        for per_game in (self._pending, self._return, self._turns, self._moves):
            per_game[new] = 0
        if self._max_opening:
            self._opening[new] = self._rng.integers(0, self._max_opening + 1, len(new))
        seat_reward = np.asarray(reward, np.float64)[rows]
        self._pending[games] += seat_reward
        self._return[games] += seat_reward
        self._moves[np.setdiff1d(games, new)] += 1
        to_move = np.asarray(info["current_player"])
        masks = np.asarray(info["legal_action_mask"], bool)
        ended = np.logical_or(terminated, truncated)
        moves: dict[str, list[int]] = {}
        for i in np.argsort(games, kind="stable"):
            g, seat = games[i], int(to_move[i])
            if ended[i]:
                self._end(g, obs, rows[i], bool(terminated[i]), bool(truncated[i]), masks[i])
            elif self._moves[g] < self._opening[g]:
                moves.setdefault(OPENING, []).append(i)
            elif self._stream[g, seat] >= 0:
                self._emit(g, seat, obs[rows[i, seat]], False, False, masks[i])
            else:
                moves.setdefault(self._roles[g][seat], []).append(i)
        for name, at in moves.items():
            seats = to_move[at]
            actions = self._players[name].act(obs[rows[at, seats]], masks[at], games[at])
            self._pool_send(np.asarray(actions, np.int32), games[at].astype(np.int32))

    def _emit(self, g: int, seat: int, view, terminated: bool, truncated: bool, mask) -> None:
        reward, self._pending[g, seat] = self._pending[g, seat], 0.0
        self._ready.append(
            (
                view,
                reward,
                terminated,
                truncated,
                self._stream[g, seat],
                self._turns[g, seat],
                mask,
                seat,
            )
        )
        self._turns[g, seat] += 1
        self._waiting[g].add(seat)

    def _end(self, g: int, obs, rows, terminated: bool, truncated: bool, mask) -> None:
        """Every learner seat's final observation (the pool's reset step waits for all their
        replies; with none, it goes at once); the other players hear the result."""
        all_legal = np.ones_like(mask)  # no move is made from a final observation
        for seat, name in enumerate(self._roles[g]):
            if name == LEARNER:
                self._emit(g, seat, obs[rows[seat]], terminated, truncated, all_legal)
            else:
                self._players[name].end_game(g, float(self._return[g, seat]))
        self.finished.append(
            GameResult(g, self._return[g].copy(), int(self._moves[g]), self._roles[g])
        )
        self._pending[g] = 0.0
        if not self._waiting[g]:
            self._pool_send(np.zeros(1, np.int32), np.array([g], np.int32))
