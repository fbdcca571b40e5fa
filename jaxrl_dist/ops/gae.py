"""Truncated generalized advantage estimation (GAE) on batched trajectories.

Implements the advantage estimator of Schulman et al. 2016, "High-Dimensional Continuous
Control Using Generalized Advantage Estimation" (https://arxiv.org/abs/1506.02438), with the
semantics of `rlax.truncated_generalized_advantage_estimation` (rlax 0.1.9), extended to
trailing batch dimensions: time is axis 0, rewards and discounts are `[T]` or `[T, B, ...]`
and values carry one extra (bootstrap) step, `[T + 1]` or `[T + 1, B, ...]`.

The backward recursion `A_t = delta_t + discount_t * lambda_t * A_{t+1}` is a linear
recurrence computed with a single reverse `lax.scan` over the whole `[T, B, ...]` block.
"""

import chex
import jax
import jax.numpy as jnp

from jaxrl_dist.ops.loops import time_unroll

Array = chex.Array
Numeric = chex.Numeric


def truncated_generalized_advantage_estimation(
    r_t: Array,
    discount_t: Array,
    lambda_: Numeric,
    values: Array,
    stop_target_gradients: bool = False,
) -> Array:
    """Calculates truncated generalized advantage estimates (Schulman et al. 2016).

    With TD errors `delta_t = r_t + discount_t * V(x_{t+1}) - V(x_t)` (rlax convention: `r_t`
    and `discount_t` follow the action taken in `x_t`), the advantage truncated at the end of
    the sequence is `A_t = sum_{l=0}^{T-1-t} (prod_{t<=i<t+l} discount_i lambda_i) delta_{t+l}`
    (GAE eq. 16 with per-step discounts), computed backwards as
    `A_t = delta_t + discount_t * lambda_t * A_{t+1}`, `A_T = 0`. A zero discount ends an
    episode: `A_t` then depends on nothing after step `t`.

    Args:
        r_t: rewards at times `[1, T]`, shape `[T, B, ...]` (or `[T]`).
        discount_t: discounts at times `[1, T]` (0 at episode ends), same shape as `r_t`.
        lambda_: mixing parameter: scalar, `[T]` (per time step, broadcast over the batch
            dimensions) or the same shape as `r_t`.
        values: state values `V(x_t)` at times `[0, T]`, shape `[T + 1, B, ...]` (or `[T + 1]`).
        stop_target_gradients: whether to stop gradients through the advantages (as rlax, the
            whole output is wrapped in `stop_gradient`).

    Returns:
        Advantages at times `[0, T - 1]`, same shape as `r_t`.
    """
    chex.assert_equal_shape([r_t, discount_t])
    ndim = max(jnp.ndim(r_t), 1)  # So that rank-0 inputs fail the rank check.
    chex.assert_rank([r_t, discount_t, values, lambda_], [ndim, ndim, ndim, {0, 1, ndim}])
    chex.assert_type([r_t, values, discount_t], float)
    chex.assert_shape(values, (r_t.shape[0] + 1,) + r_t.shape[1:])
    if jnp.ndim(lambda_) == 1:  # Per-step lambda: `[T]`, broadcast over batch dimensions.
        chex.assert_shape(lambda_, (r_t.shape[0],))
        lambda_ = jnp.reshape(lambda_, (-1,) + (1,) * (ndim - 1))
    elif jnp.ndim(lambda_) > 1:
        chex.assert_equal_shape([lambda_, r_t])
    lambda_ = jnp.ones_like(discount_t) * lambda_

    delta_t = r_t + discount_t * values[1:] - values[:-1]

    # Iterate backwards to calculate advantages.
    def body(acc, xs):
        delta, decay = xs
        acc = delta + decay * acc
        return acc, acc

    _, advantage_t = jax.lax.scan(
        body,
        jnp.zeros_like(delta_t[0]),
        (delta_t, discount_t * lambda_),
        reverse=True,
        unroll=time_unroll(delta_t.shape[0]),
    )
    return jax.lax.select(stop_target_gradients, jax.lax.stop_gradient(advantage_t), advantage_t)
