"""Env sources by name: where the envs that an `env_id` names come from, as agents, data flows
and engines each have a registry of their own.

A source is one of two kinds. A `POOL` source makes host pools in EnvPool's gymnasium protocol
(`reset`, `step`, and `recv`/`send` when `batch_size < num_envs`, `info["env_id"]`), which
Sebulba's actors step: EnvPool (the source of bare ids such as `CartPole-v1`), `gymnasium:`,
`pettingzoo:` and `factory:` (`envs/sources.py`). A `JAX` source makes a pure env with gymnax's
API (`reset(key, params)`, `step(key, state, action, params)`, spaces of the params) and its
params, which `JaxEnv` gives EnvPool's semantics inside Anakin's jitted program: gymnax (the
source of bare ids on Anakin) and `jax:module:factory` (`envs/jax_envs.py`).

An `env_id` is the source's prefix and what the source reads after it (`myenvs:Maze-v0`); a
bare id is the default source's of the kind the engine steps. A new source is one call:

    register_env_source(EnvSource("mine", POOL, ("mine:",), check=..., spec=..., make=...))

and then `--config.env_id=mine:anything` trains, evaluates and loads as any other env id.
"""

from __future__ import annotations

from jaxrl_dist.envs.envpool_env import ENVPOOL_SOURCE
from jaxrl_dist.envs.jax_sources import GYMNAX_SOURCE, USER_JAX_SOURCE
from jaxrl_dist.envs.python_sources import PYTHON_ENV_SOURCES
from jaxrl_dist.envs.source import JAX, POOL, RUNTIMES, EnvSource

_SOURCES: dict[str, EnvSource] = {}
_DEFAULTS: dict[str, str] = {}  # kind -> the name of the source of its bare ids


def register_env_source(source: EnvSource, *, default: bool = False) -> EnvSource:
    """Makes `source` answer for the env ids its prefixes start (`default`: also for the bare
    ids of its kind). Registering a name again replaces that source; a prefix another source
    claims, a prefix without a trailing ":" or an unknown kind is a ValueError (one line)."""
    if source.kind not in RUNTIMES:
        raise ValueError(f"EnvSource {source.name!r}: kind {source.kind!r}; use POOL or JAX")
    if not source.prefixes and not default:
        raise ValueError(f"EnvSource {source.name!r} claims no env ids; give it prefixes")
    for prefix in source.prefixes:
        if not prefix.endswith(":") or len(prefix) < 2:
            raise ValueError(f"EnvSource {source.name!r}: prefix {prefix!r}; end it in ':'")
        owner = next((s for s in _SOURCES.values() if prefix in s.prefixes), None)
        if owner is not None and owner.name != source.name:
            raise ValueError(
                f"EnvSource {source.name!r}: source {owner.name!r} has the prefix {prefix!r}; "
                "pick another"
            )
    _SOURCES[source.name] = source
    if default:
        _DEFAULTS[source.kind] = source.name
    return source


def find_source(env_id: str, kind: str) -> EnvSource:
    """The source of `env_id` for an engine stepping `kind` envs: the one whose prefix starts
    it (of whichever kind: `kind_problem` says when it is the other), else `kind`'s default."""
    for source in _SOURCES.values():
        if source.prefixes and env_id.startswith(source.prefixes):
            return source
    return _SOURCES[_DEFAULTS[kind]]


def source_names() -> dict[str, tuple[str, ...]]:
    """Every registered source's name and prefixes (for messages and docs)."""
    return {name: source.prefixes for name, source in _SOURCES.items()}


for _source in (ENVPOOL_SOURCE, GYMNAX_SOURCE):
    register_env_source(_source, default=True)
for _source in (*PYTHON_ENV_SOURCES, USER_JAX_SOURCE):
    register_env_source(_source)

__all__ = ["JAX", "POOL", "EnvSource", "find_source", "register_env_source", "source_names"]
