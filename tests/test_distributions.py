"""Tests for `jaxrl_dist.agents.distributions` against NumPy / closed-form references."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.scipy.stats import norm

from jaxrl_dist.agents.distributions import Categorical, Gaussian

LEAD_SHAPES = [(5,), (4, 3)]  # [B] and [T, B].
TOL = dict(rtol=1e-5, atol=1e-5)


def _gaussian_params(lead, dim=3, seed=0):
    rng = np.random.default_rng(seed)
    mean = rng.normal(size=(*lead, dim)).astype(np.float32)
    log_std = rng.uniform(-1.0, 0.7, size=(*lead, dim)).astype(np.float32)
    return {"mean": jnp.asarray(mean), "log_std": jnp.asarray(log_std)}


def _np_log_softmax(logits):
    logits = np.asarray(logits, np.float64)
    shifted = logits - logits.max(-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(-1, keepdims=True))


@pytest.mark.parametrize("lead", LEAD_SHAPES)
def test_categorical_log_prob_entropy_mode(lead):
    rng = np.random.default_rng(1)
    logits = (3 * rng.normal(size=(*lead, 6))).astype(np.float32)
    action = rng.integers(0, 6, size=lead)
    dist = Categorical()
    log_pi = _np_log_softmax(logits)
    log_prob = jax.jit(dist.log_prob)(logits, action)
    assert log_prob.shape == lead and log_prob.dtype == jnp.float32
    np.testing.assert_allclose(
        log_prob, np.take_along_axis(log_pi, action[..., None], -1)[..., 0], **TOL
    )
    entropy = jax.jit(dist.entropy)(logits)
    assert entropy.shape == lead
    np.testing.assert_allclose(entropy, -(np.exp(log_pi) * log_pi).sum(-1), **TOL)
    mode = dist.mode(logits)
    assert mode.dtype == jnp.int32
    np.testing.assert_array_equal(mode, logits.argmax(-1))
    assert dist.env_action(action) is action


def test_categorical_sample_frequencies():
    logits = jnp.log(jnp.array([[0.1, 0.2, 0.7], [0.5, 0.25, 0.25]]))
    n = 40_000
    samples = jax.jit(Categorical().sample)(jnp.broadcast_to(logits, (n, 2, 3)), jax.random.key(0))
    assert samples.shape == (n, 2) and samples.dtype == jnp.int32
    freqs = np.stack([(np.asarray(samples) == a).mean(0) for a in range(3)], -1)
    np.testing.assert_allclose(freqs, np.exp(logits), atol=0.01)


@pytest.mark.parametrize("lead", LEAD_SHAPES)
def test_gaussian_log_prob_entropy_mode(lead):
    params = _gaussian_params(lead)
    u = np.random.default_rng(2).normal(size=params["mean"].shape).astype(np.float32)
    dist = Gaussian()
    log_prob = jax.jit(dist.log_prob)(params, u)
    assert log_prob.shape == lead and log_prob.dtype == jnp.float32
    expected = norm.logpdf(u, params["mean"], jnp.exp(params["log_std"])).sum(-1)
    np.testing.assert_allclose(log_prob, expected, **TOL)
    entropy = jax.jit(dist.entropy)(params)
    std = np.exp(np.asarray(params["log_std"], np.float64))
    np.testing.assert_allclose(entropy, (0.5 * np.log(2 * np.pi * np.e * std**2)).sum(-1), **TOL)
    np.testing.assert_array_equal(dist.mode(params), params["mean"])
    # The pre-squash entropy is the proxy used with the squash too.
    np.testing.assert_allclose(Gaussian(tanh_squash=True).entropy(params), entropy)


@pytest.mark.parametrize("lead", LEAD_SHAPES)
def test_squashed_log_prob_matches_naive_change_of_variables(lead):
    params = _gaussian_params(lead, seed=3)
    u = np.random.default_rng(4).uniform(-3, 3, size=params["mean"].shape).astype(np.float32)
    u64 = u.astype(np.float64)
    mean, log_std = (np.asarray(params[k], np.float64) for k in ("mean", "log_std"))
    log_n = -0.5 * ((u64 - mean) / np.exp(log_std)) ** 2 - log_std - 0.5 * np.log(2 * np.pi)
    naive = (log_n - np.log(1.0 - np.tanh(u64) ** 2)).sum(-1)
    log_prob = jax.jit(Gaussian(tanh_squash=True).log_prob)(params, u)
    assert log_prob.shape == lead
    np.testing.assert_allclose(log_prob, naive, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("u", [-2.0, -0.7, 0.0, 0.3, 1.5])
def test_squashed_density_matches_numerical_cdf_derivative(u):
    """exp(log_prob) is the density of a = tanh(u): dP(tanh(U) <= a)/da by central differences."""
    mean, std = 0.4, 0.8
    params = {"mean": jnp.array([mean]), "log_std": jnp.log(jnp.array([std]))}
    density = float(jnp.exp(Gaussian(tanh_squash=True).log_prob(params, jnp.array([u]))))
    cdf = lambda a: 0.5 * (1 + math.erf((math.atanh(a) - mean) / (std * math.sqrt(2))))
    a, h = math.tanh(u), 1e-6
    assert density == pytest.approx((cdf(a + h) - cdf(a - h)) / (2 * h), rel=1e-4)


def test_squashed_log_prob_finite_for_large_u():
    u = jnp.array([[-20.0, -8.0, 0.0, 8.0, 20.0]])
    params = {"mean": jnp.zeros_like(u), "log_std": jnp.zeros_like(u)}
    dist = Gaussian(tanh_squash=True)
    log_prob = dist.log_prob(params, u)
    u64 = np.asarray(u, np.float64)
    # log(1 - tanh(u)^2) = -2 log cosh(u), exact in float64 where 1 - tanh(u)^2 underflows.
    expected = (-0.5 * u64**2 - 0.5 * np.log(2 * np.pi) + 2 * np.log(np.cosh(u64))).sum(-1)
    np.testing.assert_allclose(log_prob, expected, rtol=1e-6)
    grads = jax.grad(lambda p: dist.log_prob(p, u).sum())(params)
    assert all(np.isfinite(g).all() for g in jax.tree.leaves(grads))


@pytest.mark.parametrize("tanh_squash", [False, True])
def test_gaussian_sample_statistics(tanh_squash):
    params = {"mean": jnp.array([-1.0, 0.0, 2.5]), "log_std": jnp.log(jnp.array([0.3, 1.0, 2.0]))}
    n = 100_000
    batch = jax.tree.map(lambda p: jnp.broadcast_to(p, (n, 3)), params)
    u = jax.jit(Gaussian(tanh_squash).sample)(batch, jax.random.key(1))
    assert u.shape == (n, 3) and u.dtype == jnp.float32  # u, pre-squash either way.
    std = np.exp(np.asarray(params["log_std"]))
    np.testing.assert_allclose(u.mean(0), params["mean"], atol=4 * std.max() / math.sqrt(n))
    np.testing.assert_allclose(u.std(0), std, rtol=0.01)


@pytest.mark.parametrize("lead", LEAD_SHAPES)
def test_gaussian_sample_shape(lead):
    u = Gaussian().sample(_gaussian_params(lead), jax.random.key(0))
    assert u.shape == (*lead, 3) and u.dtype == jnp.float32


def test_env_action_squash_maps_to_bounds():
    low, high = jnp.array([-1.0, 0.0, -4.0]), jnp.array([1.0, 2.0, 6.0])
    u = jnp.array([[0.0, 0.0, 0.0], [30.0, -30.0, math.atanh(0.5)]])
    action = jax.jit(Gaussian(tanh_squash=True).env_action)(
        jnp.broadcast_to(u, (4, 2, 3)), low, high
    )
    assert action.shape == (4, 2, 3)
    np.testing.assert_allclose(action[0, 0], [0.0, 1.0, 1.0], **TOL)  # Midpoints.
    np.testing.assert_allclose(action[0, 1], [1.0, 0.0, 3.5], **TOL)  # high, low, 3/4 of range.


def test_env_action_clips_without_squash():
    low = jnp.array([-1.0, -jnp.inf, 0.0])
    high = jnp.array([1.0, jnp.inf, jnp.inf])
    u = jnp.array([[-3.0, -1e6, -0.5], [0.5, 1e6, 7.0]])
    action = jax.jit(Gaussian().env_action)(u, low, high)
    np.testing.assert_array_equal(action, [[-1.0, -1e6, 0.0], [0.5, 1e6, 7.0]])
