"""Where a run's envs come from, named by `env_id` (plain ids keep their meaning):

- an EnvPool id (`CartPole-v1`, `Breakout-v5`, `TicTacToe-v1`): EnvPool's C++ pools (here);
- `gymnasium:ID`, `pettingzoo:module:factory` and `factory:NAME`: Python envs in worker
  processes (`python_sources.py`).

Each registers as an `EnvSource` (`envs/registry.py`), as JAX envs (gymnax ids,
`jax:module:factory`) do in `envs/jax_envs.py`. `make_env`, `check_env`, `env_spec` and
`xla_loop_problem` answer for every host-pool source, a user's registered one included, so the
actors, evaluators, `load_policy` and `scripts/evaluate.py` never ask which one they have.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from jaxrl_dist.envs.envpool_env import EnvSpec
from jaxrl_dist.envs.probe import PROBED, probe_problem
from jaxrl_dist.envs.python_sources import (  # noqa: F401  re-exported: the names callers import
    FACTORY,
    GYMNASIUM,
    PETTINGZOO,
    PYTHON_SOURCES,
    default_workers,
    is_python_env,
    python_factory,
    register_env_factory,
    worker_layout_problem,
)
from jaxrl_dist.envs.registry import find_source
from jaxrl_dist.envs.source import POOL, EnvSource, PoolOptions, kind_problem
from jaxrl_dist.envs.workers import START_TIMEOUT_S


def check_env(
    env_id: str, env_kwargs: dict[str, Any], *, start_timeout_s: float = START_TIMEOUT_S
) -> str | None:
    """A one-line problem with `env_id`/`env_kwargs` for its source (`envs/registry.py`), or
    None. Last, one env is made, reset and stepped once as the run would (`envs/probe.py`; a
    Python env's worker within `start_timeout_s`)."""
    source = find_source(env_id, POOL)
    problem = kind_problem(env_id, source, POOL) or source.check(env_id, env_kwargs)
    return problem or _probe(source, env_id, env_kwargs, start_timeout_s)


def _probe(
    source: EnvSource, env_id: str, env_kwargs: dict[str, Any], start_timeout_s: float
) -> str | None:
    """`probe_problem` for one env of `env_id`, once per process for an env that passed (a
    run's evaluation env, a second run of the same env: no second worker to start)."""
    key = (env_id, repr(sorted(env_kwargs.items(), key=lambda kv: kv[0])), start_timeout_s)
    if key in PROBED:
        return None
    if source.probe is not None:
        make = functools.partial(source.probe, env_id, env_kwargs, start_timeout_s)
    else:
        options = PoolOptions(
            seed=0, num_threads=1, step_timeout_s=start_timeout_s, start_timeout_s=start_timeout_s
        )
        make = functools.partial(source.make, env_id, env_kwargs, 1, 1, options)
    problem = probe_problem(env_id, make, env_spec(env_id, env_kwargs))
    if problem is None:
        PROBED.add(key)
    return problem


def env_spec(env_id: str, env_kwargs: dict[str, Any]) -> EnvSpec:
    """What the networks need to know about `env_id`'s envs (after `check_env` passed)."""
    return find_source(env_id, POOL).spec(env_id, env_kwargs)


def xla_loop_problem(env_id: str, env_kwargs: dict[str, Any]) -> str | None:
    """Why `env_id` cannot be stepped inside XLA (the XLA actor loop), or None."""
    source = find_source(env_id, POOL)
    if source.xla_loop_problem is not None:
        return source.xla_loop_problem(env_id, env_kwargs)
    noun = source.noun or f"an env of {source.name}'s pools"
    return (
        f"config.sebulba.actor_loop='xla' steps EnvPool inside XLA; {env_id} is {noun}: use "
        "config.sebulba.actor_loop='python'"
    )


def make_env(
    env_id: str,
    env_kwargs: dict[str, Any],
    num_envs: int,
    batch_size: int,
    *,
    seed: int,
    num_threads: int = 0,
    thread_affinity_offset: int = -1,
    restart: Callable[[str], bool] | None = None,
    step_timeout_s: float = 60.0,
    start_timeout_s: float = START_TIMEOUT_S,
) -> Any:
    """A pool of `num_envs` envs in EnvPool's gymnasium protocol; env `i` seeded `seed + i`.

    `batch_size < num_envs`: asynchronous, `recv()` returns the first `batch_size` envs to
    finish (`info["env_id"]`). EnvPool: `num_threads` C++ threads (0: one per batch slot),
    pinned from `thread_affinity_offset` if >= 0. Python envs: `num_threads` worker processes
    (0: `default_workers`); a failed worker is replaced when `restart(reason)` allows it, and
    one silent for `step_timeout_s` counts as failed; a worker has `start_timeout_s` to start
    (`process_pool.py`). `env_kwargs["obs_indices"]` cuts the observations
    (`envs/observation.py`)."""
    options = PoolOptions(
        seed, num_threads, thread_affinity_offset, restart, step_timeout_s, start_timeout_s
    )
    return find_source(env_id, POOL).make(env_id, env_kwargs, num_envs, batch_size, options)
