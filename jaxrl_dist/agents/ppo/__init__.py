"""PPO."""

from jaxrl_dist.agents.ppo.agent import *  # noqa: F403
