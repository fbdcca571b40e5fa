"""The parts of a seated JAX game (`jax_games.SeatedJaxGame`): which seat each learner stream
plays against whom (`Stream`, `seat_streams`), how a network plays a seat (`NetworkPlayer`),
the state a game keeps and shares with other agents, and the game's spec and opening rule."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import jax
import numpy as np

from jaxrl_dist.envs.envpool_env import EnvSpec
from jaxrl_dist.envs.seats import LEARNER_ROLE, SNAPSHOT_ROLES
from jaxrl_dist.types import PyTree

PGX_GAMES = {"TicTacToe-v1": "tic_tac_toe", "ConnectFour-v1": "connect_four"}
SHORTEST_GAME = {"TicTacToe-v1": 5, "ConnectFour-v1": 7}  # the fewest moves that end a game
MEMORY_KEY_PURPOSE = 1  # a new game's opponent memory: fold_in of the new game's key
SELF_ROLE = "self"  # the other seat of a self-play game: the acting params, not learned from
NETWORK_ROLES = (SELF_ROLE, *SNAPSHOT_ROLES)


class Stream(NamedTuple):
    """One learner stream: the seat (player id) it plays, who plays the other seat, and
    whether that player acts greedily."""

    seat: int
    opponent: str
    greedy: bool = False


class NetworkPlayer(NamedTuple):
    """How the network roles ("self", "frozen", "pool") move: `init(key)` is a game's fresh
    memory (a recurrent core's state of one row; `{}` for a memoryless policy, so its games
    hold nothing more), and `sample` and `greedy` are pure functions of (params, the mover's
    observation `{AGENT_VIEW: [1, ...], ACTION_MASK: [1, A]}`, a key, the memory) -> (`[1]`
    action, the memory after the move), one sampled from the policy, one its mode (for greedy
    seats). The runtime builds them from the agent's actor half; the game knows no agent."""

    init: Callable[[jax.Array], PyTree]
    sample: Callable[[PyTree, PyTree, jax.Array, PyTree], tuple[jax.Array, PyTree]]
    greedy: Callable[[PyTree, PyTree, jax.Array, PyTree], tuple[jax.Array, PyTree]]


class AgentsShared(NamedTuple):
    """The shared state of a game with other agents' seats: the league (or ()), each other
    agent's current acting params by role ("agent:NAME"), and the leagues of those whose
    snapshots it plays by name (`jax_league.AgentLeagues`)."""

    league: Any
    agents: dict[str, PyTree]
    leagues: dict[str, Any] = {}


class GameState(NamedTuple):
    """One stream's game (every leaf `[B, ...]` when batched)."""

    game: Any  # the pgx state
    seat: jax.Array  # [] int32, the learner's player id
    opponent: jax.Array  # [] int32, index of the opponent's role in `SeatedJaxGame.roles`
    greedy: jax.Array  # [] bool
    snapshot: jax.Array  # [] int32, this game's league snapshot id (-1: not a pool game)
    slot: jax.Array  # [] int32, its league slot
    # The opponent's memory in this game: the network roles' and each other agent's (by role),
    # fresh at every new game, advanced at the opponent's moves only.
    memory: PyTree = ()
    agents_memory: PyTree = ()


def seat_streams(
    patterns: Sequence[tuple[str, ...]],
    greedy_seats: Sequence[bool],
    num_streams: int,
    greedy_roles: frozenset[str] = frozenset(),
) -> list[Stream]:
    """The first `num_streams` streams of the role `patterns` cycled (one role per seat, a
    learning mask already applied): each learner seat of a pattern is a stream, against the
    pattern's other seat, whose snapshot players act greedily where `greedy_seats[seat]`, and
    other agents (and the acting params in self-play, "self") where their role is in
    `greedy_roles`."""
    streams = []
    for pattern in itertools.cycle(patterns):
        for seat, role in enumerate(pattern):
            if role == LEARNER_ROLE:
                other = pattern[1 - seat]
                opponent = SELF_ROLE if other == LEARNER_ROLE else other
                # A greedy seat is greedy whoever plays it: a snapshot, or in self-play the
                # acting params (a replay agent's greedy learning seat, `exploration_mask`).
                greedy = other in (*SNAPSHOT_ROLES, LEARNER_ROLE) and bool(greedy_seats[1 - seat])
                greedy = greedy or opponent in greedy_roles
                streams.append(Stream(seat, opponent, greedy))
        if len(streams) >= num_streams:
            return streams[:num_streams]
    raise AssertionError("unreachable: every pattern has a learner seat")


def evaluation_streams(num_games: int, opponent: str) -> list[Stream]:
    """Game `i`: the learner in seat `i % 2` against `opponent` (the Sebulba evaluator's)."""
    return [Stream(i % 2, opponent) for i in range(num_games)]


def game_spec(env_id: str) -> EnvSpec:
    """One seat's view of the pgx game: EnvPool's spec of its port (int8 planes, as EnvPool's)."""
    import pgx

    game = pgx.make(PGX_GAMES[env_id])
    probe = jax.eval_shape(game.init, jax.random.PRNGKey(0))
    return EnvSpec(
        tuple(probe.observation.shape),
        np.dtype(np.int8),
        game.num_actions,
        num_players=game.num_players,
    )


def opening_problem(env_id: str, opening_plies: int) -> str | None:
    """Why `opening_plies` is too many for `env_id` on Anakin, or None: a new game must reach
    the learner's first move (the opening and one reply may not end it)."""
    most = SHORTEST_GAME[env_id] - 2
    if opening_plies > most:
        return (
            f"config.seats.opening_plies={opening_plies} could end a {env_id} game before "
            f"the learner's first move on Anakin; use at most {most}"
        )
    return None
