"""Pure RL maths on trajectories, rlax naming (`v_tm1`, `r_t`, `discount_t`)."""

from jaxrl_dist.ops.gae import truncated_generalized_advantage_estimation
from jaxrl_dist.ops.vtrace import VTraceOutput, vtrace_td_error_and_advantage

__all__ = [
    "VTraceOutput",
    "truncated_generalized_advantage_estimation",
    "vtrace_td_error_and_advantage",
]
