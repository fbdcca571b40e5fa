"""Intrinsic rewards (`config.intrinsic`): RND (Burda et al. 2018) beside an actor-critic's
learner, its own value head in the agent's network, and pre-training on it alone."""

from jaxrl_dist.agents.intrinsic.config import METHODS, IntrinsicConfig
from jaxrl_dist.agents.intrinsic.learner import with_intrinsic
from jaxrl_dist.agents.intrinsic.rnd import RND, IntrinsicLearnerState, RNDState, make_rnd

__all__ = [
    "METHODS",
    "RND",
    "IntrinsicConfig",
    "IntrinsicLearnerState",
    "RNDState",
    "make_rnd",
    "with_intrinsic",
]
