"""The shipped JAX env sources: gymnax's envs (the source of bare ids on Anakin, or
`gymnax:ID`) and a user's own, `jax:module:factory` (`user_env`). Each makes an env with
gymnax's API and its params, which `jax_envs.JaxEnv` steps with EnvPool's semantics."""

from __future__ import annotations

import difflib
import functools
from typing import Any

from jaxrl_dist.envs.source import JAX, EnvSource
from jaxrl_dist.user_code import FactoryError, load_factory

GYMNAX_PREFIX = "gymnax:"
USER_PREFIX = "jax:"  # a user's own JAX env: jax:module:factory (`user_env`)


@functools.cache
def _gymnax_ids() -> tuple[str, ...]:
    import gymnax

    return tuple(gymnax.registered_envs)


def _gymnax_problem(env_id: str, env_kwargs: dict[str, Any]) -> str | None:
    name = env_id.removeprefix(GYMNAX_PREFIX)
    ids = _gymnax_ids()
    if name in ids:
        return None
    close = difflib.get_close_matches(name, ids, n=3, cutoff=0.5)
    hint = f" (did you mean {', '.join(close)}?)" if close else ""
    return (
        f"config.env_id={env_id!r} is not a JAX env{hint}; runtime='anakin' steps gymnax "
        "envs (gymnax.registered_envs), your own (jax:module:factory) and the games "
        "TicTacToe-v1 and ConnectFour-v1"
    )


def _gymnax_make(env_id: str, kwargs: dict[str, Any]) -> tuple[Any, Any]:
    import gymnax

    return gymnax.make(env_id.removeprefix(GYMNAX_PREFIX), **kwargs)


def user_env(env_id: str, kwargs: dict[str, Any]) -> tuple[Any, Any]:
    """`jax:module:factory`: `module.factory(**kwargs)` returns a JAX env with gymnax's API, or
    `(env, params)` as `gymnax.make` does. The env has `default_params` (unless the factory
    gives params), `observation_space(params)`, `action_space(params)` (gymnax spaces: Discrete
    with `n`, or Box of rank 0 or 1), `reset(key, params) -> (obs, state)` and
    `step(key, state, action, params) -> (obs, state, reward, done, info)`, where `done` is a
    termination and `info["truncated"]` (if given) a time limit. An env with `step_env` and
    `reset_env` (gymnax's `Environment`, or a class written after it without subclassing it,
    as Craftax's are) is stepped through them, its time limit from `is_truncated` where it has
    one; any other class's `step` must not reset by itself: the wrapper resets on the step
    after `done`, as EnvPool does. A multi-agent env (`num_agents`, `agents`) is refused."""
    name = f"config.env_id={env_id!r}"
    factory = load_factory(env_id, USER_PREFIX)
    made = factory(**kwargs)
    env, params = made if isinstance(made, tuple) and len(made) == 2 else (made, None)
    agents = _agent_count(env)
    if agents > 1:
        raise FactoryError(
            f"{name} made a multi-agent env ({type(env).__name__}, {agents} agents), but "
            "runtime='anakin' steps single-agent JAX envs (gymnax's API) and the board games "
            "TicTacToe-v1 and ConnectFour-v1; run agents that act at once on "
            "runtime='sebulba' as a PettingZoo Parallel env (pettingzoo:module:factory with "
            "config.sebulba.agents_per_env)"
        )
    missing = [
        m for m in ("reset", "step", "observation_space", "action_space") if not hasattr(env, m)
    ]
    if missing:
        raise FactoryError(
            f"{name} made a {type(env).__name__} without {', '.join(missing)}; return an env "
            "with gymnax's API (docs/guides/your-own-environment.md)"
        )
    if not callable(env.observation_space) or not callable(env.action_space):
        raise FactoryError(
            f"{name} made a {type(env).__name__}, whose spaces are not methods of the params "
            "(gymnax's API); a gymnasium env runs on runtime='sebulba' as gymnasium:ID"
        )
    if params is None:
        if getattr(env, "default_params", None) is None:
            raise FactoryError(
                f"{name}: its env has no default_params; give it one, or return (env, params)"
            )
        params = env.default_params
    return env, params


def _agent_count(env: Any) -> int:
    """How many agents `env` says it has (JaxMARL's `num_agents` and `agents`, PettingZoo's
    `possible_agents`); 1 for an env that says nothing."""
    counts = [1]
    number = getattr(env, "num_agents", None)
    if isinstance(number, int):
        counts.append(number)
    for names in (getattr(env, a, None) for a in ("agents", "possible_agents")):
        if isinstance(names, list | tuple):
            counts.append(len(names))
    return max(counts)


GYMNAX_SOURCE = EnvSource("gymnax", JAX, (GYMNAX_PREFIX,), check=_gymnax_problem, make=_gymnax_make)
USER_JAX_SOURCE = EnvSource(
    "jax", JAX, (USER_PREFIX,), check=lambda env_id, kwargs: None, make=user_env
)
