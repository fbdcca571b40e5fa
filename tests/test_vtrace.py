"""Tests for `jaxrl_dist.ops.vtrace` against rlax, a NumPy reference and hand-built cases."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import rlax
from rl_inputs import lambda_values

from jaxrl_dist.ops import VTraceOutput, vtrace_td_error_and_advantage

METHODS = ["scan", "associative"]
# (shape, lambda_ kind): scalar, per-step `[T]` or full-shape lambda_ on [T], [T, B], [T, B, K].
CASES = [
    ((11,), "1.0"),
    ((11,), "0.9"),
    ((11,), "per_step"),
    ((11, 6), "0.9"),
    ((11, 6), "per_step"),
    ((11, 6), "full"),
    ((11, 3, 2), "1.0"),
    ((11, 3, 2), "per_step"),
    ((11, 3, 2), "full"),
]
CLIPS = [(1.0, 1.0), (0.5, 2.0), (2.0, 3.7), (3.7, 0.5)]  # (clip_rho, clip_pg_rho)
TOL = dict(rtol=1e-5, atol=1e-5)


def _inputs(shape, seed=0):
    """Random float32 `(v_tm1, v_t, r_t, discount_t, rho_tm1)` with terminals mid-trajectory."""
    rng = np.random.default_rng(seed)
    v_tm1, v_t, r_t = (rng.normal(size=shape).astype(np.float32) for _ in range(3))
    discount_t = rng.uniform(0.5, 1.0, size=shape).astype(np.float32)
    discount_t[shape[0] // 2] = 0.0  # A terminal in the middle of every trajectory ...
    discount_t[rng.uniform(size=shape) < 0.15] = 0.0  # ... and a few random ones.
    rho_tm1 = np.exp(rng.normal(scale=1.0, size=shape)).astype(np.float32)  # ~[0.05, 20].
    return v_tm1, v_t, r_t, discount_t, rho_tm1


def _rlax_batched(v_tm1, v_t, r_t, discount_t, rho_tm1, lambda_, **kwargs):
    """`rlax.vtrace_td_error_and_advantage` vmapped over the flattened batch columns."""
    shape = jnp.shape(v_tm1)
    cols = [jnp.reshape(x, (shape[0], -1)) for x in (v_tm1, v_t, r_t, discount_t, rho_tm1)]
    lam_axis = 1 if jnp.ndim(lambda_) > 1 else None
    if lam_axis is not None:
        lambda_ = jnp.reshape(lambda_, (shape[0], -1))
    fn = functools.partial(rlax.vtrace_td_error_and_advantage, **kwargs)
    out = jax.vmap(fn, in_axes=(1,) * 5 + (lam_axis,), out_axes=1)(*cols, lambda_)
    return VTraceOutput(*(jnp.reshape(x, shape) for x in out))


# Jitted with thresholds traced, so each (shape, lambda_ rank, method) compiles only once.
_ours_jit = jax.jit(vtrace_td_error_and_advantage, static_argnames=("method",))
_rlax_jit = jax.jit(
    lambda *args, clip_rho, clip_pg_rho: _rlax_batched(
        *args, clip_rho_threshold=clip_rho, clip_pg_rho_threshold=clip_pg_rho
    )
)


def _numpy_reference(v_tm1, v_t, r_t, discount_t, rho_tm1, lambda_, clip_rho, clip_pg_rho):
    """IMPALA eq. (1) written as the explicit sum over t >= s, one trajectory, float64.

    v_s = V(x_s) + sum_{t>=s} (prod_{s<=i<t} gamma_i c_i) delta_t, delta_t = rho_t (r_t +
    gamma_t V(x_{t+1}) - V(x_t)), rho_t = min(clip_rho, ratio), c_i = lambda_i min(1, ratio).
    Q estimate: q_s = r_s + gamma_s (lambda_s v_{s+1} + (1 - lambda_s) V(x_{s+1})), with
    v_T = V(x_T); pg advantage = min(clip_pg_rho, ratio) (q_s - V(x_s)).
    """
    v_tm1, v_t, r_t, discount_t, rho_tm1 = (
        np.asarray(x, np.float64) for x in (v_tm1, v_t, r_t, discount_t, rho_tm1)
    )
    T = len(v_tm1)
    lam = np.broadcast_to(np.asarray(lambda_, np.float64), (T,))
    delta = np.minimum(clip_rho, rho_tm1) * (r_t + discount_t * v_t - v_tm1)
    c = lam * np.minimum(1.0, rho_tm1)
    vs = np.zeros(T)
    for s in range(T):
        total, trace = 0.0, 1.0
        for t in range(s, T):
            total += trace * delta[t]
            trace *= discount_t[t] * c[t]
        vs[s] = v_tm1[s] + total
    q = np.zeros(T)
    for s in range(T):
        boot = v_t[s] if s == T - 1 else lam[s] * vs[s + 1] + (1 - lam[s]) * v_tm1[s + 1]
        q[s] = r_t[s] + discount_t[s] * boot
    pg = np.minimum(clip_pg_rho, rho_tm1) * (q - v_tm1)
    return vs - v_tm1, pg, q


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("shape, lam_kind", CASES)
def test_matches_rlax(method, shape, lam_kind):
    inputs = _inputs(shape)
    lambda_ = lambda_values(lam_kind, shape)
    # rlax sees `[T, N]` columns (flattened outside jit so that shapes share compilations).
    flat = [np.reshape(x, (shape[0], -1)) for x in inputs]
    flat_lambda = np.reshape(lambda_, (shape[0], -1)) if lam_kind == "full" else lambda_
    for clip_rho, clip_pg_rho in CLIPS:
        out = _ours_jit(*inputs, lambda_, clip_rho, clip_pg_rho, method=method)
        expected = _rlax_jit(*flat, flat_lambda, clip_rho=clip_rho, clip_pg_rho=clip_pg_rho)
        assert isinstance(out, VTraceOutput)
        for name, x, y in zip(VTraceOutput._fields, out, expected, strict=True):
            assert x.shape == shape and x.dtype == jnp.float32, name
            msg = f"{name}, clips {clip_rho} {clip_pg_rho}"
            np.testing.assert_allclose(x, np.reshape(y, shape), **TOL, err_msg=msg)


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("lam_kind", ["1.0", "0.9", "per_step"])
def test_matches_numpy_reference(method, lam_kind):
    shape = (11, 6)
    inputs = _inputs(shape, seed=3)
    lambda_ = lambda_values(lam_kind, shape)
    for clip_rho, clip_pg_rho in CLIPS:
        out = _ours_jit(*inputs, lambda_, clip_rho, clip_pg_rho, method=method)
        for b in range(shape[1]):
            column = [x[:, b] for x in inputs]
            expected = _numpy_reference(*column, lambda_, clip_rho, clip_pg_rho)
            for x, y in zip(out, expected, strict=True):
                np.testing.assert_allclose(x[:, b], y, **TOL)


@functools.partial(jax.jit, static_argnums=0)
def _grads(fn, inputs, cotangents):
    """Gradients of `sum(errors**2)` and of `<outputs, cotangents>` w.r.t. the 5 inputs."""
    out, vjp = jax.vjp(fn, *inputs)
    zeros = jnp.zeros_like(out.errors)
    return vjp(VTraceOutput(2 * out.errors, zeros, zeros)), vjp(VTraceOutput(*cotangents))


@pytest.mark.parametrize("stop", [True, False])
def test_gradients(stop):
    inputs = tuple(jnp.asarray(x) for x in _inputs((9, 3), seed=5))
    cotangents = tuple(jnp.asarray(x) for x in _inputs((9, 3), seed=6)[:3])
    kwargs = dict(lambda_=0.8, clip_rho_threshold=1.5, stop_target_gradients=stop)
    g_rlax = _grads(functools.partial(_rlax_batched, **kwargs), inputs, cotangents)
    for method in METHODS:
        ours = functools.partial(vtrace_td_error_and_advantage, **kwargs, method=method)
        g_ours = _grads(ours, inputs, cotangents)
        for g, h in zip(jax.tree.leaves(g_ours), jax.tree.leaves(g_rlax), strict=True):
            np.testing.assert_allclose(g, h, **TOL)
        g_v_t = g_ours[0][1]  # d sum(errors**2) / d v_t.
        if stop:
            np.testing.assert_array_equal(g_v_t, 0.0)
        else:
            assert np.abs(g_v_t).max() > 1e-3


@pytest.mark.parametrize("method", METHODS)
def test_terminal_cuts_dependence_on_later_values(method):
    # States values V(x_0..x_5) = 1..6; terminal (discount 0) at t = 2.
    values = np.arange(1.0, 7.0, dtype=np.float32)
    v_tm1, v_t = values[:-1], values[1:]
    r_t = np.ones(5, np.float32)
    discount_t = np.array([0.5, 0.5, 0.0, 0.5, 0.5], np.float32)
    rho_tm1 = np.array([1.0, 0.5, 1.0, 1.0, 1.0], np.float32)
    out = _ours_jit(v_tm1, v_t, r_t, discount_t, rho_tm1, method=method)
    # delta = [1, 0.5 * 0.5, -2, -0.5, -1]; c_1 = 0.5, so errors by hand (backwards):
    # e4 = -1, e3 = -0.5 + 0.5 * -1, e2 = -2, e1 = 0.25 + 0.5 * 0.5 * -2, e0 = 1 + 0.5 * e1.
    np.testing.assert_allclose(out.errors, [0.875, -0.25, -2.0, -1.0, -1.0], **TOL)

    # Changing every value and reward after the terminal leaves errors up to it unchanged.
    later = np.zeros(5, np.float32)
    later[3:] = [10.0, -7.0]
    v_tm1_2, r_t_2 = v_tm1 + later, r_t + later
    v_t_2 = v_t + np.array([0.0, 0.0, 5.0, -3.0, 8.0], np.float32)  # v_t[2] is after x_2's end.
    out2 = _ours_jit(v_tm1_2, v_t_2, r_t_2, discount_t, rho_tm1, method=method)
    np.testing.assert_array_equal(out2.errors[:3], out.errors[:3])
    assert np.all(np.abs(out2.errors[3:] - out.errors[3:]) > 0.1)  # The perturbation is real.


def test_rejects_bad_inputs():
    inputs = list(_inputs((6, 2)))
    with pytest.raises(ValueError, match="method"):
        vtrace_td_error_and_advantage(*inputs, method="fft")
    with pytest.raises(AssertionError):  # Mismatched shapes.
        vtrace_td_error_and_advantage(*inputs[:4], inputs[4][:, :1])
    with pytest.raises(AssertionError):  # Per-step lambda of the wrong length.
        vtrace_td_error_and_advantage(*inputs, lambda_=np.ones(5, np.float32))
    with pytest.raises(AssertionError):  # Integer inputs.
        vtrace_td_error_and_advantage(*inputs[:4], np.ones((6, 2), np.int32))
    with pytest.raises(AssertionError):  # Scalars have no time axis.
        vtrace_td_error_and_advantage(*(np.float32(1.0),) * 5)
