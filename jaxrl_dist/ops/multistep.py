"""Strided n-step bootstrapped returns: a drop-in for `rlax.n_step_bootstrapped_returns`.

Same arguments and semantics as rlax 0.1.9 on a `[T]` sequence, extended (as `ops.gae`) to
trailing batch dimensions: time is axis 0, `[T, B, ...]`.
"""

import chex
import jax
import jax.numpy as jnp

Array = chex.Array
Numeric = chex.Numeric


def n_step_bootstrapped_returns(
    r_t: Array,
    discount_t: Array,
    v_t: Array,
    n: int,
    lambda_t: Numeric = 1.0,
    stop_target_gradients: bool = False,
) -> Array:
    """n-step bootstrapped return targets at every step of a sequence, iterating `n` times

        G_t = r_{t+1} + discount_{t+1} * ((1 - lambda_{t+1}) v_{t+1} + lambda_{t+1} G_{t+1}),

    which with `lambda_t = 1` is `r_{t+1} + discount_{t+1} (r_{t+2} + ... + discount_{t+n}
    v_{t+n})`. Near the end of the sequence the window is shortened (bootstrapping from the last
    value, `v_t[-1]`); a zero discount stops the sum there (a termination).

    Args:
        r_t: rewards at times `[1, T]`, shape `[T, B, ...]` (or `[T]`).
        discount_t: discounts at times `[1, T]`, same shape.
        v_t: values to bootstrap from at times `[1, T]`, same shape.
        n: steps to accumulate before bootstrapping (>= 1).
        lambda_t: scalar, `[T]` (broadcast over batch dimensions) or the shape of `r_t`.
        stop_target_gradients: stop gradients through the returns.

    Returns:
        Returns at times `[0, T - 1]`, the shape of `r_t`.
    """
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    ndim = max(jnp.ndim(r_t), 1)  # so that rank-0 inputs fail the rank check
    chex.assert_rank([r_t, discount_t, v_t, lambda_t], [ndim, ndim, ndim, {0, 1, ndim}])
    chex.assert_type([r_t, discount_t, v_t, lambda_t], float)
    chex.assert_equal_shape([r_t, discount_t, v_t])
    seq_len = r_t.shape[0]
    if jnp.ndim(lambda_t) == 1 and ndim > 1:
        chex.assert_shape(lambda_t, (seq_len,))
        lambda_t = jnp.reshape(lambda_t, (-1,) + (1,) * (ndim - 1))
    lambda_t = jnp.ones_like(discount_t) * lambda_t

    def pad(x: Array, value: Array | float) -> Array:
        """`x` with `n - 1` steps of `value` appended along time."""
        tail = jnp.broadcast_to(value, (n - 1,) + x.shape[1:]).astype(x.dtype)
        return jnp.concatenate([x, tail])

    last_v = v_t[-1]
    targets = pad(v_t, last_v)[n - 1 : n - 1 + seq_len]  # v_{t+n}, the last value past the end
    r_t, discount_t, lambda_t, v_t = (
        pad(r_t, 0.0),
        pad(discount_t, 1.0),
        pad(lambda_t, 1.0),
        pad(v_t, last_v),
    )
    for i in reversed(range(n)):  # n is static and small: unrolled
        window = slice(i, i + seq_len)
        lam = lambda_t[window]
        targets = r_t[window] + discount_t[window] * ((1.0 - lam) * v_t[window] + lam * targets)
    return jax.lax.stop_gradient(targets) if stop_target_gradients else targets
