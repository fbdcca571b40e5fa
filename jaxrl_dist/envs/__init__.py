"""EnvPool environments: factory, spaces and episode statistics."""

from jaxrl_dist.envs.envpool_env import (
    EnvSpec,
    EpisodeTracker,
    atari_protocol,
    check_env,
    derive_seed,
    env_spec,
    make_env,
    xla_loop_problem,
)

__all__ = [
    "EnvSpec",
    "EpisodeTracker",
    "atari_protocol",
    "check_env",
    "derive_seed",
    "env_spec",
    "make_env",
    "xla_loop_problem",
]
