"""The DQN-family heads: shapes, the dueling combination, noisy layers' noise and init."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxrl_dist.networks.q_heads import NoisyDense, QHead

FEATURES = jnp.asarray(np.random.default_rng(0).normal(size=(5, 16)), jnp.float32)


def _init_apply(head, key=0, noise=1, deterministic=False):
    rngs = {"params": jax.random.PRNGKey(key), "noise": jax.random.PRNGKey(noise)}
    params = head.init(rngs, FEATURES, deterministic)
    out = head.apply(params, FEATURES, deterministic, rngs={"noise": jax.random.PRNGKey(noise)})
    return params, out


@pytest.mark.parametrize("atoms", [1, 11])
@pytest.mark.parametrize("dueling", [False, True])
@pytest.mark.parametrize("noisy", [False, True])
def test_shapes_and_dtype(atoms, dueling, noisy):
    _, out = _init_apply(QHead(4, atoms, dueling, noisy))
    assert out.shape == ((5, 4) if atoms == 1 else (5, 4, atoms)) and out.dtype == jnp.float32


@pytest.mark.parametrize("atoms", [1, 7])
def test_dueling_is_value_plus_centred_advantage(atoms):
    """Q - mean_a Q equals the advantage stream centred over actions; mean_a Q is the value."""
    head = QHead(3, atoms, dueling=True)
    params, q = _init_apply(head)
    p = params["params"]
    adv = (FEATURES @ p["advantage"]["kernel"] + p["advantage"]["bias"]).reshape(5, 3, atoms)
    value = (FEATURES @ p["value"]["kernel"] + p["value"]["bias"]).reshape(5, 1, atoms)
    q = q.reshape(5, 3, atoms)
    np.testing.assert_allclose(q, value + adv - adv.mean(1, keepdims=True), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(q.mean(1), value[:, 0], rtol=1e-5, atol=1e-5)


def test_noisy_layer_noise_follows_its_key_and_switches_off():
    layer = NoisyDense(6, sigma0=0.5)
    params, a = _init_apply(layer, noise=1)
    b = layer.apply(params, FEATURES, rngs={"noise": jax.random.PRNGKey(1)})
    c = layer.apply(params, FEATURES, rngs={"noise": jax.random.PRNGKey(2)})
    mean = layer.apply(params, FEATURES, True)
    np.testing.assert_array_equal(a, b)
    assert not np.allclose(a, c)
    p = params["params"]
    np.testing.assert_allclose(mean, FEATURES @ p["mu_kernel"] + p["mu_bias"], rtol=1e-6)
    # Factorised noise: probe the layer with the identity and with zeros under one key.
    key = {"noise": jax.random.PRNGKey(3)}
    b = layer.apply(params, jnp.zeros((1, 16)), rngs=key)[0]
    w = layer.apply(params, jnp.eye(16), rngs=key) - b
    eps_w = (w - p["mu_kernel"]) / p["sigma_kernel"]  # outer(f(eps_in), f(eps_out))
    eps_out = (b - p["mu_bias"]) / p["sigma_bias"]  # f(eps_out)
    singular = np.linalg.svd(np.asarray(eps_w), compute_uv=False)
    assert singular[1] < 1e-4 * singular[0]  # rank one
    eps_in = eps_w[:, 0] / eps_out[0]
    np.testing.assert_allclose(eps_w, np.outer(eps_in, eps_out), rtol=1e-3, atol=1e-4)


def test_noisy_layer_init_follows_fortunato():
    params, _ = _init_apply(NoisyDense(32, sigma0=0.4))
    p = params["params"]
    bound = 1 / np.sqrt(16)
    assert np.all(np.abs(p["mu_kernel"]) <= bound) and np.all(np.abs(p["mu_bias"]) <= bound)
    np.testing.assert_allclose(p["sigma_kernel"], 0.4 / np.sqrt(16), rtol=1e-6)
    np.testing.assert_allclose(p["sigma_bias"], 0.4 / np.sqrt(16), rtol=1e-6)
    assert np.std(p["mu_kernel"]) > 0.5 * bound / np.sqrt(3)  # spread over the interval
