"""IMPALA (V-trace actor-critic)."""

from jaxrl_dist.agents.impala.agent import *  # noqa: F403
