"""Pure RL maths on trajectories and transitions, rlax naming (`v_tm1`, `r_t`, `discount_t`)."""

from jaxrl_dist.ops.continuous_control import (
    clipped_double_q_target,
    deterministic_actor_loss,
    sac_actor_loss,
    sac_critic_loss,
    sac_temperature_loss,
    smoothed_target_action,
    td3_critic_loss,
)
from jaxrl_dist.ops.gae import truncated_generalized_advantage_estimation
from jaxrl_dist.ops.multistep import n_step_bootstrapped_returns
from jaxrl_dist.ops.transforms import signed_hyperbolic, signed_parabolic
from jaxrl_dist.ops.value_learning import (
    categorical_double_q_learning,
    categorical_l2_project,
    double_q_learning,
    q_learning,
)
from jaxrl_dist.ops.vtrace import VTraceOutput, vtrace_td_error_and_advantage

__all__ = [
    "VTraceOutput",
    "categorical_double_q_learning",
    "clipped_double_q_target",
    "deterministic_actor_loss",
    "categorical_l2_project",
    "double_q_learning",
    "n_step_bootstrapped_returns",
    "q_learning",
    "sac_actor_loss",
    "sac_critic_loss",
    "sac_temperature_loss",
    "signed_hyperbolic",
    "signed_parabolic",
    "smoothed_target_action",
    "td3_critic_loss",
    "truncated_generalized_advantage_estimation",
    "vtrace_td_error_and_advantage",
]
