"""IMPALA: actor-critic with V-trace off-policy correction (Espeholt et al. 2018).

The IMPALA loss, pure, over `[T + 1, B]` rollouts.

Episode boundaries (see `jaxrl_dist.types`): a terminated transition bootstraps from zero; a
truncated one bootstraps from the value of its final observation (EnvPool returns the final
observation at the step that ends the episode) and cuts the trace there; the reset transition that
follows an episode end is masked out of every loss term.
"""

from __future__ import annotations

from typing import Any

import chex
import jax
import jax.numpy as jnp

from jaxrl_dist.agents.common import masked_mean, transitions, value_means
from jaxrl_dist.agents.distributions import Categorical, Gaussian
from jaxrl_dist.agents.impala.config import ImpalaConfig
from jaxrl_dist.agents.intrinsic import IntrinsicConfig
from jaxrl_dist.ops import vtrace_td_error_and_advantage
from jaxrl_dist.types import Rollout


def impala_loss(
    policy: Any,
    values: jax.Array,
    rollout: Rollout,
    config: ImpalaConfig,
    dist: Categorical | Gaussian = Categorical(),
    intrinsic: tuple[jax.Array, IntrinsicConfig] | None = None,
) -> tuple[jax.Array, dict[str, jax.Array]]:
    """The IMPALA loss on a batch of segments.

    Args:
      policy: `[T + 1, B, ...]` the learner's distribution params on `rollout.obs` (logits
        `[T + 1, B, A]`, or a Gaussian's `{"mean", "log_std"}`).
      values: `[T + 1, B]` state values on `rollout.obs` (`[T + 1, B, 2]` with `intrinsic`:
        the env reward's head, the intrinsic reward's).
      rollout: `[T + 1, B]` rollout; `agent_extras["log_prob"]` `[T, B]` holds the behaviour
        policy's log-probability of each action taken.
      config: the loss coefficients.
      dist: the action distribution `policy` parameterises.
      intrinsic: (`r_int` `[T, B]`, its config): the intrinsic head learns V-trace targets of
        `r_int`, non-episodic (discounted across episode ends, Burda et al. 2018, so its
        baseline loss counts the reset transitions too); the policy follows the two
        advantages weighted by `advantage_weights`.

    Returns:
      (scalar loss, metrics). Every term is averaged over the valid (non-reset) transitions.
    """
    chex.assert_rank(values, 2 if intrinsic is None else 3)
    ext_values = values if intrinsic is None else values[..., 0]
    chex.assert_equal_shape([ext_values[:-1], rollout.agent_extras["log_prob"]])
    # Truncation bootstraps from V(final obs), termination from 0; reset transitions are masked.
    r_t, discount_t, mask = transitions(rollout, ext_values, config.discount, config.reward_scale)
    policy_t = jax.tree.map(lambda x: x[:-1], policy)
    log_pi_a = dist.log_prob(policy_t, rollout.action)
    rho_tm1 = jnp.exp(jax.lax.stop_gradient(log_pi_a) - rollout.agent_extras["log_prob"])
    vtrace = _vtrace(ext_values, r_t, discount_t, rho_tm1, config)
    pg_advantage = vtrace.pg_advantage
    baseline_loss = 0.5 * masked_mean(jnp.square(vtrace.errors), mask)
    if intrinsic is not None:
        r_int, c = intrinsic
        int_discount = jnp.full_like(r_int, c.discount)
        int_vtrace = _vtrace(values[..., 1], r_int, int_discount, rho_tm1, config)
        w_ext, w_int = c.advantage_weights
        pg_advantage = w_ext * pg_advantage + w_int * int_vtrace.pg_advantage
        # Its returns run on across episode ends: the reset transitions count for this head.
        baseline_loss += 0.5 * jnp.mean(jnp.square(int_vtrace.errors))
    pg_loss = -masked_mean(log_pi_a * jax.lax.stop_gradient(pg_advantage), mask)
    entropy = masked_mean(dist.entropy(policy_t), mask)
    loss = pg_loss + config.baseline_cost * baseline_loss - config.entropy_cost * entropy
    metrics = {
        "loss": loss,
        "pg_loss": pg_loss,
        "baseline_loss": baseline_loss,
        "entropy": entropy,
        "rho_mean": masked_mean(rho_tm1, mask),
        # How far off-policy the batch is: the share of importance weights V-trace truncates.
        "rho_clipped_fraction": masked_mean(rho_tm1 > config.clip_rho_threshold, mask),
        **value_means(values[:-1], mask),
        # Far from 0 when the critic lags the returns: the policy gradient then follows its bias.
        "advantage_mean": masked_mean(pg_advantage, mask),
        "valid_fraction": mask.mean(),
    }
    return loss, metrics


def _vtrace(values: jax.Array, r_t, discount_t, rho_tm1, config: ImpalaConfig):
    """V-trace of one value head's `values` `[T + 1, B]` with `config`'s lambda and clips."""
    return vtrace_td_error_and_advantage(
        values[:-1],
        values[1:],
        r_t,
        discount_t,
        rho_tm1,
        lambda_=config.lambda_,
        clip_rho_threshold=config.clip_rho_threshold,
        clip_pg_rho_threshold=config.clip_pg_rho_threshold,
    )
