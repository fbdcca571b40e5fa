"""The scripted players of `envs/games.py` as pure JAX functions, for board games inside jit.

Each is `choose(view [H, W, 2], legal [A] bool, key) -> [] int32` for one board (vmap it over a
batch), with the NumPy players' rules and distributions: uniform over the legal moves; the
"win if you can, block if you must, else uniform" heuristic (the same `Rules`, run on jax
arrays); and the perfect tic-tac-toe player, uniform among the moves of the best minimax value,
read from a table of every position built once from `games.tictactoe_action_values`' search.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np

from jaxrl_dist.envs.games import (
    RULES,
    Rules,
    _move_values,
    _tictactoe_positions,
    scripted_problem,
)

Choose = Callable[[jax.Array, jax.Array, jax.Array], jax.Array]


def uniform_over(allowed: jax.Array, key: jax.Array) -> jax.Array:
    """One index uniform over the True entries of `allowed [A]` (at least one)."""
    return jax.random.categorical(key, jnp.where(allowed, 0.0, -jnp.inf)).astype(jnp.int32)


def random_legal(view: jax.Array, legal: jax.Array, key: jax.Array) -> jax.Array:
    del view
    return uniform_over(legal, key)


def heuristic(rules: Rules) -> Choose:
    """Win if you can, block the opponent's win if you must, else uniform (ties uniform)."""

    def choose(view: jax.Array, legal: jax.Array, key: jax.Array) -> jax.Array:
        own, opp = view[None, ..., 0].astype(bool), view[None, ..., 1].astype(bool)
        occupied = own | opp
        wins = rules.wins(rules.place(own, occupied))[0] & legal  # [A]
        blocks = rules.wins(rules.place(opp, occupied))[0] & legal
        preferred = jnp.where(wins.any(), wins, blocks)
        return uniform_over(jnp.where(preferred.any(), preferred, legal), key)

    return choose


_POWERS = 3 ** np.arange(9)  # a board's table row: cell i empty 0, the mover's 1, the other's 2


@functools.cache
def _best_moves_table() -> np.ndarray:
    """`[3 ** 9, 9]` bool: the moves of the best value for the mover of every reachable
    non-final position (rows of other boards all False: never read)."""
    table = np.zeros((3**9, 9), bool)
    for own, opp in _tictactoe_positions():
        values = _move_values(own, opp)
        cells = np.arange(9)
        row = int(np.dot((own >> cells & 1) + 2 * (opp >> cells & 1), _POWERS))
        table[row] = values == values.max()
    return table


def perfect_tictactoe(view: jax.Array, legal: jax.Array, key: jax.Array) -> jax.Array:
    """Uniform among the moves of the best minimax value: it never loses."""
    cells = view.reshape(9, 2).astype(jnp.int32)
    row = jnp.dot(cells[:, 0] + 2 * cells[:, 1], jnp.asarray(_POWERS, jnp.int32))
    best = jnp.asarray(_best_moves_table())[row] & legal
    return uniform_over(jnp.where(best.any(), best, legal), key)


def scripted_choose(name: str, env_id: str) -> Choose:
    """The JAX scripted player `name` ("random", "heuristic", "perfect") for `env_id`, an
    EnvPool game id; ValueError (one line, `games.scripted_problem`) where the game has no
    such player."""
    problem = scripted_problem(name, env_id)
    if problem:
        raise ValueError(problem)
    if name == "random":
        return random_legal
    if name == "heuristic":
        return heuristic(RULES[env_id])
    return perfect_tictactoe
