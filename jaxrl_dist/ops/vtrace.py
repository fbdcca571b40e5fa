"""V-trace TD errors and policy-gradient advantages on batched trajectories.

Implements the off-policy corrected targets of Espeholt et al. 2018, "IMPALA: Scalable
Distributed Deep-RL with Importance Weighted Actor-Learner Architectures"
(https://arxiv.org/abs/1802.01561), with the semantics of
`rlax.vtrace_td_error_and_advantage` (rlax 0.1.9, without `sample_mask`), extended to
trailing batch dimensions: time is axis 0 and every input is `[T]` or `[T, B, ...]`.

The backward recursion `acc_t = delta_t + discount_t * c_t * acc_{t+1}` is a linear
recurrence, computed either with a reverse `lax.scan` over the whole `[T, B, ...]` block
(`method="scan"`, default) or with `lax.associative_scan` over affine maps `(a, b)`
(`method="associative"`). On CPU (2 shared cores, jax 0.10.2, jit, float32, median of 31
repeats; `benchmarks/vtrace_scan.py` -> `benchmarks/results/cpu/vtrace_scan.json`) the
associative variant takes 2.3-4.4x the scan time forward and 1.7-2.5x forward+backward at
T=128,B=256 / T=20,B=1024 / T=128,B=1024; at T=20,B=32 the dispatch-bound forward is on par
(0.93x) and forward+backward is 3.3x slower. Hence "scan" is the default.
"""

from typing import NamedTuple

import chex
import jax
import jax.numpy as jnp

from jaxrl_dist.ops.loops import time_unroll

Array = chex.Array
Numeric = chex.Numeric


class VTraceOutput(NamedTuple):
    """Outputs of `vtrace_td_error_and_advantage`, each shaped like `v_tm1` (`[T, ...]`).

    Attributes:
        errors: V-trace errors `v_s - V(x_s)`, the value-loss TD errors.
        pg_advantage: clipped-rho policy-gradient advantages `rho_s (q_s - V(x_s))`.
        q_estimate: Q estimates `q_s = r_s + gamma_s v_{s+1}` used by `pg_advantage`.
    """

    errors: Array
    pg_advantage: Array
    q_estimate: Array


def _scan_recursion(td_errors: Array, decay: Array) -> Array:
    """`acc_t = td_errors_t + decay_t * acc_{t+1}`, `acc_T = 0`, by reverse `lax.scan`."""

    def body(acc, xs):
        td_error, a = xs
        acc = td_error + a * acc
        return acc, acc

    zeros, unroll = jnp.zeros_like(td_errors[0]), time_unroll(td_errors.shape[0])
    _, acc = jax.lax.scan(body, zeros, (td_errors, decay), reverse=True, unroll=unroll)
    return acc


def _associative_recursion(td_errors: Array, decay: Array) -> Array:
    """Same recursion as `_scan_recursion` via `lax.associative_scan` on affine maps.

    Element t is the map `x -> a_t x + b_t`. In a reverse scan, `later` holds the maps
    composed from the end of the trajectory and `earlier` is applied on top of them.
    """

    def compose(later, earlier):
        a_l, b_l = later
        a_e, b_e = earlier
        return a_e * a_l, a_e * b_l + b_e

    _, acc = jax.lax.associative_scan(compose, (decay, td_errors), reverse=True, axis=0)
    return acc


_RECURSIONS = {"scan": _scan_recursion, "associative": _associative_recursion}


def vtrace_td_error_and_advantage(
    v_tm1: Array,
    v_t: Array,
    r_t: Array,
    discount_t: Array,
    rho_tm1: Array,
    lambda_: Numeric = 1.0,
    clip_rho_threshold: float = 1.0,
    clip_pg_rho_threshold: float = 1.0,
    stop_target_gradients: bool = True,
    *,
    method: str = "scan",
) -> VTraceOutput:
    """Calculates V-trace errors and policy-gradient advantages (Espeholt et al. 2018).

    With `rho_s = min(clip_rho_threshold, pi/mu)` and trace `c_s = lambda_s * min(1, pi/mu)`,
    the V-trace target is `v_s = V(x_s) + sum_{t>=s} (prod_{s<=i<t} gamma_i c_i) delta_t`,
    `delta_t = rho_t (r_t + gamma_t V(x_{t+1}) - V(x_t))` (IMPALA eq. 1), computed backwards
    as `v_s - V(x_s) = delta_s + gamma_s c_s (v_{s+1} - V(x_{s+1}))`.

    Args:
        v_tm1: values `V(x_s)`, shape `[T, B, ...]` (or `[T]`).
        v_t: bootstrap values `V(x_{s+1})`, same shape as `v_tm1`.
        r_t: rewards, same shape as `v_tm1`.
        discount_t: discounts `gamma_s` (0 at episode ends), same shape as `v_tm1`.
        rho_tm1: importance ratios `pi(a_s|x_s) / mu(a_s|x_s)`, same shape as `v_tm1`.
        lambda_: trace mixing parameter: scalar, `[T]` (per time step) or the full shape.
        clip_rho_threshold: clip threshold `rho_bar` for importance ratios in the TD errors.
        clip_pg_rho_threshold: clip threshold for importance ratios in the PG advantage.
        stop_target_gradients: whether to stop gradients through the targets `v_s`.
        method: "scan" (reverse `lax.scan`) or "associative" (`lax.associative_scan`).

    Returns:
        `VTraceOutput(errors, pg_advantage, q_estimate)`, each shaped like `v_tm1`.
    """
    if method not in _RECURSIONS:
        raise ValueError(f"method must be one of {sorted(_RECURSIONS)}, got {method!r}.")
    inputs = [v_tm1, v_t, r_t, discount_t, rho_tm1]
    chex.assert_equal_shape(inputs)
    ndim = max(jnp.ndim(v_tm1), 1)  # So that rank-0 inputs fail the rank check.
    chex.assert_rank(inputs + [lambda_], [ndim] * 5 + [{0, 1, ndim}])
    chex.assert_type(inputs + [lambda_], [float] * 6)
    if jnp.ndim(lambda_) == 1:  # Per-step lambda: `[T]`, broadcast over batch dimensions.
        chex.assert_shape(lambda_, (v_tm1.shape[0],))
        lambda_ = jnp.reshape(lambda_, (-1,) + (1,) * (ndim - 1))
    elif jnp.ndim(lambda_) > 1:
        chex.assert_equal_shape([lambda_, v_tm1])
    lambda_ = jnp.ones_like(discount_t) * lambda_

    # Clip importance sampling ratios; the trace coefficient is lambda_ * min(1, rho).
    c_tm1 = jnp.minimum(1.0, rho_tm1) * lambda_
    clipped_rhos_tm1 = jnp.minimum(clip_rho_threshold, rho_tm1)
    td_errors = clipped_rhos_tm1 * (r_t + discount_t * v_t - v_tm1)
    errors = _RECURSIONS[method](td_errors, discount_t * c_tm1)
    # Maybe stop gradients through the bootstrap targets v_s = errors + v_tm1 (as rlax).
    errors = jax.lax.select(
        stop_target_gradients, jax.lax.stop_gradient(errors + v_tm1) - v_tm1, errors
    )

    # q_s = r_s + gamma_s v_{s+1} (IMPALA sec. 4.2), v_{s+1} lambda-mixed as in rlax, V(x_T) last.
    targets_tm1 = errors + v_tm1
    q_bootstrap = jnp.concatenate(
        [lambda_[:-1] * targets_tm1[1:] + (1 - lambda_[:-1]) * v_tm1[1:], v_t[-1:]], axis=0
    )
    q_estimate = r_t + discount_t * q_bootstrap
    clipped_pg_rho_tm1 = jnp.minimum(clip_pg_rho_threshold, rho_tm1)
    pg_advantage = clipped_pg_rho_tm1 * (q_estimate - v_tm1)
    return VTraceOutput(errors=errors, pg_advantage=pg_advantage, q_estimate=q_estimate)
