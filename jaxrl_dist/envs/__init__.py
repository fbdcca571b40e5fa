"""Environments: EnvPool pools, Python envs in worker processes, JAX envs; spaces and episode
statistics. `make_env`, `check_env`, `env_spec` and `xla_loop_problem` answer for every source
named by an `env_id` (`envs/sources.py`); a new source registers with `register_env_source`
(`envs/registry.py`).

Names are imported on first use, so a Python env's worker process (which imports
`envs/steppers.py`) does not import JAX.
"""

from typing import TYPE_CHECKING

from jaxrl_dist._lazy import lazy_exports

_EXPORTS = {
    "EnvSpec": "jaxrl_dist.envs.envpool_env",
    "EpisodeTracker": "jaxrl_dist.envs.envpool_env",
    "atari_protocol": "jaxrl_dist.envs.envpool_env",
    "derive_seed": "jaxrl_dist.envs.envpool_env",
    "check_env": "jaxrl_dist.envs.sources",
    "env_spec": "jaxrl_dist.envs.sources",
    "make_env": "jaxrl_dist.envs.sources",
    "xla_loop_problem": "jaxrl_dist.envs.sources",
    "register_env_factory": "jaxrl_dist.envs.sources",
    "EnvSource": "jaxrl_dist.envs.source",
    "register_env_source": "jaxrl_dist.envs.registry",
    "POOL": "jaxrl_dist.envs.source",
    "JAX": "jaxrl_dist.envs.source",
}
__all__ = [  # the names of _EXPORTS, literal so linters know them
    "JAX",
    "POOL",
    "EnvSource",
    "EnvSpec",
    "EpisodeTracker",
    "atari_protocol",
    "check_env",
    "derive_seed",
    "env_spec",
    "make_env",
    "register_env_factory",
    "register_env_source",
    "xla_loop_problem",
]
__getattr__ = lazy_exports(__name__, _EXPORTS)

if TYPE_CHECKING:  # what the names are, for type checkers and readers
    from jaxrl_dist.envs.envpool_env import EnvSpec, EpisodeTracker, atari_protocol, derive_seed
    from jaxrl_dist.envs.registry import register_env_source
    from jaxrl_dist.envs.source import JAX, POOL, EnvSource
    from jaxrl_dist.envs.sources import (
        check_env,
        env_spec,
        make_env,
        register_env_factory,
        xla_loop_problem,
    )
