"""PPO's advantages, value targets and decoupled clipped-surrogate loss (pure)."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from jaxrl_dist.agents.common import masked_mean, transitions
from jaxrl_dist.agents.distributions import Categorical, Gaussian
from jaxrl_dist.agents.intrinsic.config import IntrinsicConfig
from jaxrl_dist.agents.ppo.config import PPOConfig
from jaxrl_dist.ops import truncated_generalized_advantage_estimation, vtrace_td_error_and_advantage
from jaxrl_dist.types import Rollout


def advantages_and_targets(
    values: jax.Array, log_pi: jax.Array, rollout: Rollout, config: PPOConfig
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """Advantages `[T, B]`, value targets `[T, B]` and the transition mask `[T, B]`.

    `values` `[T + 1, B]` and `log_pi` `[T, B]` (log-probabilities of the actions taken) are the
    learner's, before this update; V-trace compares `log_pi` with the behaviour log-probs.
    """
    r_t, discount_t, mask = transitions(rollout, values, config.discount, config.reward_scale)
    return (*_estimate(r_t, discount_t, values, log_pi, rollout, config), mask)


def intrinsic_advantages_and_targets(
    values: jax.Array,
    log_pi: jax.Array,
    rollout: Rollout,
    r_int: jax.Array,
    discount: float,
    config: PPOConfig,
) -> tuple[jax.Array, jax.Array]:
    """Advantages and value targets `[T, B]` of the intrinsic rewards `r_int` `[T, B]` for the
    intrinsic value head's `values` `[T + 1, B]`: non-episodic (Burda et al. 2018), so every
    transition is discounted by `discount`, across episode ends too; same estimator as the
    env reward's."""
    discount_t = jnp.full_like(r_int, discount)
    return _estimate(r_int, discount_t, values, log_pi, rollout, config)


def combined_advantages_and_targets(
    values: jax.Array,
    log_pi: jax.Array,
    rollout: Rollout,
    r_int: jax.Array,
    config: PPOConfig,
    intrinsic: IntrinsicConfig,
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """With an intrinsic value head: the policy's advantages `[T, B]` (the two rewards'
    weighted by `intrinsic.advantage_weights`), the value targets `[T, B, 2]` (the env
    reward's head's, the intrinsic head's) and the env reward's transition mask `[T, B]`, for
    `values` `[T + 1, B, 2]` and the intrinsic rewards `r_int` `[T, B]`."""
    ext_adv, ext_target, mask = advantages_and_targets(values[..., 0], log_pi, rollout, config)
    int_adv, int_target = intrinsic_advantages_and_targets(
        values[..., 1], log_pi, rollout, r_int, intrinsic.discount, config
    )
    w_ext, w_int = intrinsic.advantage_weights
    return w_ext * ext_adv + w_int * int_adv, jnp.stack([ext_target, int_target], -1), mask


def _estimate(
    r_t: jax.Array,
    discount_t: jax.Array,
    values: jax.Array,
    log_pi: jax.Array,
    rollout: Rollout,
    config: PPOConfig,
) -> tuple[jax.Array, jax.Array]:
    """(advantages, value targets) `[T, B]` by `config.advantage_estimator`."""
    if config.advantage_estimator == "gae":
        adv = truncated_generalized_advantage_estimation(r_t, discount_t, config.gae_lambda, values)
        return adv, adv + values[:-1]
    rho = jnp.exp(log_pi - rollout.agent_extras["log_prob"])
    vtrace = vtrace_td_error_and_advantage(
        values[:-1], values[1:], r_t, discount_t, rho, config.gae_lambda
    )
    # q - v, not pg_advantage: the surrogate already weights by min(c, pi_old / mu) once.
    return vtrace.q_estimate - values[:-1], vtrace.errors + values[:-1]


def ppo_loss(
    policy: Any,
    values: jax.Array,
    batch: dict[str, jax.Array],
    config: PPOConfig,
    dist: Categorical | Gaussian = Categorical(),
) -> tuple[jax.Array, dict[str, jax.Array]]:
    """Clipped-surrogate PPO loss on a minibatch of transitions, decoupled for stale data.

    The ratio pi / pi_old is clipped around the policy at the start of this update (`old_log_prob`)
    and each sample is weighted by `min(max_behaviour_weight, pi_old / mu)`, mu the behaviour
    policy that acted (Hilton et al. 2021, "Batch size-invariance for policy optimization"). On
    fresh data (pi_old = mu) this is the standard PPO objective.

    Args:
      policy: `[T, b, ...]` the current params' distribution params at the transitions' obs.
      values: `[T, b]` the current params' values there (`[T, b, 2]` with an intrinsic value
        head: both heads learn, their losses summed; the intrinsic head's over every
        transition, as its returns run on across episode ends).
      batch: `action`, `behaviour_log_prob`, `old_log_prob`, `advantage`, `target`,
        `old_value`, `mask`, each `[T, b]` (actions `[T, b, ...]`; `target` and `old_value`
        shaped like `values`).
      config: coefficients.
      dist: the action distribution `policy` parameterises.
    """
    mask = batch["mask"]
    adv = batch["advantage"]
    if config.normalize_advantages:
        mean = masked_mean(adv, mask)
        std = jnp.sqrt(masked_mean(jnp.square(adv - mean), mask))
        adv = (adv - mean) / (std + 1e-8)
    log_ratio = dist.log_prob(policy, batch["action"]) - batch["old_log_prob"]
    ratio = jnp.exp(log_ratio)
    clipped = jnp.clip(ratio, 1.0 - config.clip_eps, 1.0 + config.clip_eps)
    weight = jnp.minimum(
        config.max_behaviour_weight, jnp.exp(batch["old_log_prob"] - batch["behaviour_log_prob"])
    )
    weight = jax.lax.stop_gradient(weight)
    pg_loss = -masked_mean(weight * jnp.minimum(ratio * adv, clipped * adv), mask)
    value_loss = jnp.square(values - batch["target"])
    if config.clip_value:
        old = batch["old_value"]
        v_clipped = old + jnp.clip(values - old, -config.clip_eps, config.clip_eps)
        value_loss = jnp.maximum(value_loss, jnp.square(v_clipped - batch["target"]))
    if value_loss.ndim > mask.ndim:  # the intrinsic head learns the reset transitions too
        value_loss = 0.5 * (masked_mean(value_loss[..., 0], mask) + jnp.mean(value_loss[..., 1]))
    else:
        value_loss = 0.5 * masked_mean(value_loss, mask)
    entropy = masked_mean(dist.entropy(policy), mask)
    loss = pg_loss + config.value_cost * value_loss - config.entropy_cost * entropy
    return loss, {
        "loss": loss,
        "pg_loss": pg_loss,
        "value_loss": value_loss,
        "entropy": entropy,
        "approx_kl": masked_mean((ratio - 1.0) - log_ratio, mask),  # Schulman's k3 estimator
        "behaviour_weight": masked_mean(weight, mask),
        "clip_fraction": masked_mean((jnp.abs(ratio - 1.0) > config.clip_eps).astype(float), mask),
    }
