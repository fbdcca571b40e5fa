"""The Anakin runtime's envs, chosen by `config.env_id`: gymnax tasks (`envs/jax_envs.py`) and
EnvPool's board games played as their pgx originals with the run's seats (`envs/jax_games.py`)."""

from __future__ import annotations

from typing import Any

import numpy as np

from jaxrl_dist.agents.base import ActorCore
from jaxrl_dist.config import TrainConfig, jsonable
from jaxrl_dist.config.sections import SeatsConfig, names_checkpoint
from jaxrl_dist.envs import EnvSpec, jax_league
from jaxrl_dist.envs.jax_envs import jax_env_problem, make_jax_env
from jaxrl_dist.envs.jax_game_parts import (
    PGX_GAMES,
    NetworkPlayer,
    game_spec,
    opening_problem,
    seat_streams,
)
from jaxrl_dist.envs.jax_games import SeatedJaxGame
from jaxrl_dist.envs.jax_marl import JaxMarlStreams, is_jaxmarl, jaxmarl_problem
from jaxrl_dist.envs.seats import SCRIPTED_ROLES
from jaxrl_dist.evaluation.jax_envs import network_player
from jaxrl_dist.run.preflight import eval_env_problem


def anakin_env_problem(config: TrainConfig) -> str | None:
    """A one-line problem with the config's env for the Anakin runtime, or None."""
    if is_jaxmarl(config.env_id):
        return jaxmarl_problem(config.env_id, config.env_kwargs, config.batch_size)
    if config.env_id not in PGX_GAMES:
        return jax_env_problem(config.env_id, config.env_kwargs)
    if config.env_kwargs:
        return (
            f"config.env_kwargs={config.env_kwargs!r}: the pgx game behind "
            f"{config.env_id} takes none on Anakin; leave it empty"
        )
    seats = config.seats
    if names_checkpoint(seats.eval_opponent):
        return (
            f"config.seats.eval_opponent={seats.eval_opponent!r}: a checkpoint opponent "
            f"plays on Sebulba; on Anakin use one of {SCRIPTED_ROLES}"
        )
    return opening_problem(config.env_id, seats.opening_plies)


def _jax_env_check(env_id: str, env_kwargs: dict[str, Any]) -> str | None:
    if env_id in PGX_GAMES:
        return f"config.env_id={env_id!r} is a board game: it cannot be another env's evaluation"
    return jax_env_problem(env_id, env_kwargs)


def anakin_eval_env_problem(config: TrainConfig, spec: EnvSpec) -> str | None:
    """What is wrong with the evaluation's own JAX env, or None (`eval_env_problem`)."""
    if config.env_id in PGX_GAMES and config.own_eval_env:
        return (
            f"config.eval_env_id={config.eval_env_id!r}: {config.env_id}'s evaluation plays the "
            "run's own game against config.seats.eval_opponent; leave config.eval_env_id and "
            "config.eval_env_kwargs unset"
        )
    return eval_env_problem(
        config, spec, _jax_env_check, lambda env_id, kw: make_jax_env(env_id, kw).spec
    )


def anakin_spec(config: TrainConfig) -> EnvSpec:
    if config.env_id in PGX_GAMES:
        return game_spec(config.env_id)
    if is_jaxmarl(config.env_id):
        return JaxMarlStreams(config.env_id, config.env_kwargs).spec
    return make_jax_env(config.env_id, config.env_kwargs).spec


def make_anakin_env(
    config: TrainConfig,
    core: ActorCore,
    others: dict[str, NetworkPlayer] | None = None,
    greedy_roles: frozenset[str] = frozenset(),
) -> Any:
    """The batch of `config.batch_size` envs (a game's: learner streams) one seed steps;
    `others`, `greedy_roles`: the run's other agents' players by role and those that act
    greedily (`config.agents`; `seated_game`)."""
    if config.env_id in PGX_GAMES:
        return seated_game(
            config.env_id, config.seats, config.batch_size, core, others, greedy_roles
        )
    if is_jaxmarl(config.env_id):  # a stream per (env, agent): IPPO
        return JaxMarlStreams(config.env_id, config.env_kwargs)
    return make_jax_env(config.env_id, config.env_kwargs)


def seated_game(
    env_id: str,
    seats: SeatsConfig,
    num_streams: int,
    core: ActorCore,
    others: dict[str, NetworkPlayer] | None = None,
    greedy_roles: frozenset[str] = frozenset(),
) -> SeatedJaxGame:
    """The Anakin env of a turn-based config: `num_streams` learner streams of `seats`' role
    patterns (learning mask applied), its league's rules from `seats`' pool settings; the
    other agents' seats ("agent:NAME", an agent's view of `config.agents`) played by `others`,
    greedily for the roles in `greedy_roles`."""
    patterns = [seats.learned(tuple(p)) for p in seats.games]
    greedy_seats = [seats.greedy_seat(s) for s in range(len(seats.games[0]))]
    rules = jax_league.LeagueRules(
        capacity=seats.pool_capacity,
        every_updates=seats.pool_every_updates,
        sampling=seats.pool_sampling,
        pfsp_exponent=seats.pool_pfsp_exponent,
    )
    return SeatedJaxGame(
        env_id,
        seat_streams(patterns, greedy_seats, num_streams, greedy_roles),
        network_player(core),
        opening_plies=seats.opening_plies,
        league=rules,
        others=others,
    )


def greedy_seat_streams(seats: SeatsConfig, env: Any) -> np.ndarray | None:
    """`[B]` bool: the learner's streams of `env` (a `SeatedJaxGame`) in a seat that
    `seats.exploration_mask` makes greedy (a replay agent's greedy seat); None when none is."""
    if not seats.enabled or not seats.exploration_mask:
        return None
    mask = np.array([seats.greedy_seat(stream.seat) for stream in env.streams], bool)
    return mask if mask.any() else None


def changed_seats_problem(config: TrainConfig, saved: dict[str, Any]) -> str | None:
    """Why a resume of a board game with `config` cannot go on from a run saved with the config
    `saved` (one line), or None: the games' env states hold each stream's roles and whether its
    opponent acts greedily, so other seats or another exploration mask would play the saved
    ones (or misread them)."""
    if not config.seats.enabled:
        return None
    for field in ("seats", "exploration_mask"):
        if field in saved and saved[field] != jsonable(getattr(config, field)):
            return (
                f"config.{field} differs from the resumed run's (its games hold their roles); "
                "resume with the run's own, or start a new --workdir"
            )
    return None
