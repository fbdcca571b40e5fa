"""EnvPool environments: factory, spaces and episode statistics."""

from jaxrl_dist.envs.envpool_env import (
    EnvSpec,
    EpisodeTracker,
    check_env,
    derive_seed,
    env_spec,
    make_env,
)

__all__ = ["EnvSpec", "EpisodeTracker", "check_env", "derive_seed", "env_spec", "make_env"]
