"""Pure RL maths on trajectories, rlax naming (`v_tm1`, `r_t`, `discount_t`)."""

from jaxrl_dist.ops.vtrace import VTraceOutput, vtrace_td_error_and_advantage

__all__ = ["VTraceOutput", "vtrace_td_error_and_advantage"]
