"""The contract of an env source (`EnvSource`), its two kinds, and the line that names the
runtime a source's envs need. The registry (`registry.py`) holds the sources; the shipped ones
are defined beside what they make (`envpool_env.py`, `python_sources.py`, `jax_sources.py`)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from jaxrl_dist.envs.workers import START_TIMEOUT_S

POOL = "pool"  # host pools in EnvPool's protocol, stepped by runtime='sebulba'
JAX = "jax"  # pure JAX envs, stepped inside runtime='anakin''s program
RUNTIMES = {POOL: "sebulba", JAX: "anakin"}
STEPS = {POOL: "Sebulba steps EnvPool and Python envs", JAX: "Anakin steps JAX envs"}


@dataclasses.dataclass(frozen=True)
class PoolOptions:
    """How a run wants a `POOL` source's pool made (a source reads what applies to it).

    Attributes:
      seed: env `i` is seeded `seed + i`.
      num_threads: EnvPool's C++ threads, or a Python source's worker processes (0: its
        default).
      thread_affinity_offset: EnvPool's threads pinned from this core (-1: not pinned).
      restart: `restart(reason) -> bool`: whether a failed worker may be replaced (the actors'
        restart budget); None: never.
      step_timeout_s: a worker silent this long counts as failed.
      start_timeout_s: how long a worker may take to start.
    """

    seed: int
    num_threads: int = 0
    thread_affinity_offset: int = -1
    restart: Callable[[str], bool] | None = None
    step_timeout_s: float = 60.0
    start_timeout_s: float = START_TIMEOUT_S


@dataclasses.dataclass(frozen=True)
class EnvSource:
    """Where the envs of some env ids come from.

    Attributes:
      name: the source's name (one registration per name).
      kind: `POOL` or `JAX` (module docstring).
      prefixes: the env-id prefixes it claims, each ending in ":" (() for a default source,
        which claims the bare ids of its kind).
      check: `check(env_id, env_kwargs) -> str | None`: one line saying what is wrong with the
        env id or its options and how to fix it, or None when envs can be made.
      make: a `POOL` source's `make(env_id, env_kwargs, num_envs, batch_size, options)` -> a
        pool (`options`: a `PoolOptions`; env `i` seeded `options.seed + i`); a `JAX`
        source's `make(env_id, env_kwargs) -> (env, params)` with gymnax's API (`JaxEnv`
        reads the spec from its spaces, `max_episode_steps` and `obs_indices` taken out of
        `env_kwargs` first).
      spec: a `POOL` source's `spec(env_id, env_kwargs) -> EnvSpec`: what the networks need
        (after `check`).
      xla_loop_problem: a `POOL` source whose pools EnvPool's XLA handles step: why `env_id`
        cannot be stepped inside XLA, or None; no such function: never inside XLA.
      noun: what the source's envs are called in messages ("a Python env").
      probe: a `POOL` source's `probe(env_id, env_kwargs, start_timeout_s)` -> a pool of one
        env for the start-up probe (`envs/probe.py`); no such function: `make` with one env.
    """

    name: str
    kind: str
    prefixes: tuple[str, ...]
    check: Callable[[str, dict[str, Any]], str | None]
    make: Callable[..., Any]
    spec: Callable[[str, dict[str, Any]], Any] | None = None
    xla_loop_problem: Callable[[str, dict[str, Any]], str | None] | None = None
    noun: str = ""
    probe: Callable[[str, dict[str, Any], float], Any] | None = None


def kind_problem(env_id: str, source: EnvSource, kind: str) -> str | None:
    """One line when `env_id`'s source makes envs another engine steps than the one that
    steps `kind` envs, else None."""
    if source.kind == kind:
        return None
    noun = source.noun or ("a JAX env" if source.kind == JAX else "an env of host pools")
    runtime = RUNTIMES[source.kind]
    return (
        f"config.env_id={env_id!r} is {noun} ({source.name}), stepped by runtime={runtime!r}; "
        f"set config.runtime={runtime!r} ({STEPS[kind]})"
    )
