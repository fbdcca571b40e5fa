"""Tests for `jaxrl_dist.ops.gae` against rlax, a NumPy reference and hand-built cases."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import rlax
from rl_inputs import lambda_values

from jaxrl_dist.ops import truncated_generalized_advantage_estimation as gae

# (shape of r_t, lambda_ kind): scalar, per-step `[T]` or full-shape lambda_.
SHAPES = [(11,), (11, 6), (11, 3, 2)]
LAMBDAS = ["1.0", "0.95", "0.0", "per_step"]
CASES = [(s, k) for s in SHAPES for k in LAMBDAS] + [((11, 6), "full"), ((11, 3, 2), "full")]
TOL = dict(rtol=1e-5, atol=1e-5)


def _inputs(shape, seed=0):
    """Random float32 `(r_t, discount_t, values)` with terminals mid-trajectory."""
    rng = np.random.default_rng(seed)
    r_t = rng.normal(size=shape).astype(np.float32)
    values = rng.normal(size=(shape[0] + 1,) + shape[1:]).astype(np.float32)
    discount_t = rng.uniform(0.5, 1.0, size=shape).astype(np.float32)
    discount_t[shape[0] // 2] = 0.0  # A terminal in the middle of every trajectory ...
    discount_t[rng.uniform(size=shape) < 0.15] = 0.0  # ... and a few random ones.
    return r_t, discount_t, values


def _rlax_batched(r_t, discount_t, lambda_, values, **kwargs):
    """`rlax.truncated_generalized_advantage_estimation` vmapped over flattened batch columns."""
    shape = jnp.shape(r_t)
    fn = functools.partial(rlax.truncated_generalized_advantage_estimation, **kwargs)
    if len(shape) == 1:
        return fn(r_t, discount_t, lambda_, values)
    r_t, discount_t = (jnp.reshape(x, (shape[0], -1)) for x in (r_t, discount_t))
    values = jnp.reshape(values, (shape[0] + 1, -1))
    lam_axis = 1 if jnp.ndim(lambda_) > 1 else None
    if lam_axis is not None:
        lambda_ = jnp.reshape(lambda_, (shape[0], -1))
    out = jax.vmap(fn, in_axes=(1, 1, lam_axis, 1), out_axes=1)(r_t, discount_t, lambda_, values)
    return jnp.reshape(out, shape)


def _numpy_gae(r_t, discount_t, lambda_, values):
    """Plain backward loop: `A_t = delta_t + discount_t * lambda_t * A_{t+1}`, float64."""
    r_t, discount_t, values = (np.asarray(x, np.float64) for x in (r_t, discount_t, values))
    lambda_ = np.asarray(lambda_, np.float64)
    if lambda_.ndim == 1:
        lambda_ = lambda_.reshape((-1,) + (1,) * (r_t.ndim - 1))
    lambda_ = np.broadcast_to(lambda_, r_t.shape)
    adv = np.zeros_like(r_t)
    acc = np.zeros_like(r_t[0])
    for t in reversed(range(r_t.shape[0])):
        delta = r_t[t] + discount_t[t] * values[t + 1] - values[t]
        acc = delta + discount_t[t] * lambda_[t] * acc
        adv[t] = acc
    return adv


@pytest.mark.parametrize("shape,lam_kind", CASES)
@pytest.mark.parametrize("stop_target_gradients", [False, True])
def test_matches_rlax_and_numpy(shape, lam_kind, stop_target_gradients):
    r_t, discount_t, values = _inputs(shape)
    lambda_ = lambda_values(lam_kind, shape)
    out = jax.jit(gae, static_argnums=4)(r_t, discount_t, lambda_, values, stop_target_gradients)
    assert out.shape == shape and out.dtype == jnp.float32
    expected = _rlax_batched(
        r_t, discount_t, lambda_, values, stop_target_gradients=stop_target_gradients
    )
    np.testing.assert_allclose(out, expected, **TOL)
    np.testing.assert_allclose(out, _numpy_gae(r_t, discount_t, lambda_, values), **TOL)


def test_per_step_lambda_broadcasts_over_batch():
    r_t, discount_t, values = _inputs((11, 3, 2), seed=3)
    lam = lambda_values("per_step", (11,), seed=4)
    full = np.broadcast_to(lam[:, None, None], (11, 3, 2))
    np.testing.assert_allclose(
        gae(r_t, discount_t, lam, values), gae(r_t, discount_t, full, values), **TOL
    )


@pytest.mark.parametrize("shape", [(11,), (11, 6)])
@pytest.mark.parametrize("stop_target_gradients", [False, True])
def test_gradients_match_rlax(shape, stop_target_gradients):
    r_t, discount_t, values = _inputs(shape, seed=5)
    lambda_ = lambda_values("per_step", shape)
    weights = np.random.default_rng(6).normal(size=shape).astype(np.float32)

    def loss(fn, r_t, values):
        adv = fn(r_t, discount_t, lambda_, values, stop_target_gradients=stop_target_gradients)
        return jnp.sum(weights * adv + adv**2)

    grads = jax.grad(functools.partial(loss, gae), argnums=(0, 1))(r_t, values)
    expected = jax.grad(functools.partial(loss, _rlax_batched), argnums=(0, 1))(r_t, values)
    for g, e in zip(grads, expected, strict=True):
        np.testing.assert_allclose(g, e, **TOL)
        if stop_target_gradients:
            np.testing.assert_array_equal(g, 0.0)
        else:
            assert np.abs(g).max() > 1e-2


# Hand-built trajectory: terminal (discount 0) at t=2; values V(x_0..x_5), V(x_5) bootstraps.
R = np.array([1.0, 2.0, 3.0, 4.0, 5.0], np.float32)
D = np.array([0.5, 0.5, 0.0, 0.5, 0.5], np.float32)
V = np.array([10.0, 20.0, 30.0, 40.0, 50.0, 60.0], np.float32)
# lambda_=1: A_t = discounted return (cut at the terminal, bootstrapped from V(x_5)) - V(x_t).
# Before the terminal: G_2 = 3, G_1 = 2 + 0.5 * 3, G_0 = 1 + 0.5 * G_1; after it:
# G_4 = 5 + 0.5 * 60, G_3 = 4 + 0.5 * G_4.
EXPECTED = {
    1.0: [-7.25, -16.5, -27.0, -18.5, -15.0],
    0.0: [1.0, -3.0, -27.0, -11.0, -15.0],  # One-step TD errors delta_t.
}


@pytest.mark.parametrize("lambda_", [1.0, 0.0])
def test_hand_built_terminal(lambda_):
    np.testing.assert_allclose(gae(R, D, lambda_, V), EXPECTED[lambda_], **TOL)
    # Same trajectory as one column of a batch with random other columns.
    r_b, d_b, v_b = _inputs((5, 4), seed=7)
    r_b[:, 2], d_b[:, 2], v_b[:, 2] = R, D, V
    np.testing.assert_allclose(gae(r_b, d_b, lambda_, v_b)[:, 2], EXPECTED[lambda_], **TOL)


@pytest.mark.parametrize("lambda_", [1.0, 0.95, 0.0])
def test_terminal_cuts_later_rewards_and_values(lambda_):
    base = gae(R, D, lambda_, V)
    # Rewards and values after the terminal (incl. V(x_3), which gamma_2 = 0 zeroes, and the
    # bootstrap V(x_5)) leave the advantages up to the terminal unchanged ...
    r2, v2 = R.copy(), V.copy()
    r2[3:] += 100.0
    v2[3:] -= 100.0
    out = gae(r2, D, lambda_, v2)
    np.testing.assert_allclose(out[:3], base[:3], **TOL)
    assert np.all(np.abs(out[3:] - base[3:]) > 1.0)  # ... but not those after it.
    # Reward/value at the terminal step itself still count before it (when lambda_ > 0).
    r3 = R.copy()
    r3[2] += 1.0
    out = gae(r3, D, lambda_, V)
    np.testing.assert_allclose(out[:3] - base[:3], [0.25 * lambda_**2, 0.5 * lambda_, 1.0], **TOL)


def test_shape_checks():
    r_t, discount_t, values = _inputs((11, 6))
    with pytest.raises(AssertionError):
        gae(r_t, discount_t, 0.9, values[:-1])  # values must be [T + 1, ...].
    with pytest.raises(AssertionError):
        gae(r_t, discount_t, np.full((6,), 0.9, np.float32), values)  # lambda_ [T] expected.
    with pytest.raises(AssertionError):
        gae(r_t, discount_t[:, :3], 0.9, values)
