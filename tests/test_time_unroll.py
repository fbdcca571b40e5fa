"""The scans over time unrolled as on a GPU (`ops.loops.time_unroll`) compute what the rolled
scans do, on this CPU with the GPU rule forced: GAE, V-trace and the recurrent core's outputs
exactly, the core's parameter gradients to float32's last bits. (What the unroll buys is
measured in `benchmarks/time_unroll.py`.)"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxrl_dist.networks import RecurrentCore
from jaxrl_dist.networks.cores import initial_core_state
from jaxrl_dist.ops import (
    loops,
    truncated_generalized_advantage_estimation,
    vtrace_td_error_and_advantage,
)

T, B = 37, 3  # not a multiple of the unroll: the remainder steps run too


@pytest.fixture
def gpu_rule(monkeypatch):
    """Returns f(unrolled) that sets the rule: the CPU unrolled as a GPU is, or rolled."""

    def use(unrolled: bool) -> None:
        backends = ("gpu", jax.default_backend()) if unrolled else ("gpu",)
        monkeypatch.setattr(loops, "UNROLLED_BACKENDS", backends)
        assert loops.time_unroll(T) == (min(T, loops.GPU_TIME_UNROLL) if unrolled else 1)

    return use


def _both(gpu_rule, fn, *args):
    """`fn(*args)` rolled and unrolled; the two programs must differ (the rule reached the
    scan), their results must not."""
    outs, programs = [], []
    for unrolled in (False, True):
        gpu_rule(unrolled)
        jitted = jax.jit(lambda *a: fn(*a))  # a new function: jit's cache is keyed on it
        programs.append(jitted.lower(*args).as_text())
        outs.append(jitted(*args))
    assert programs[0] != programs[1]
    return outs


def test_gae_and_vtrace_unrolled_equal_rolled(gpu_rule):
    k = jax.random.split(jax.random.key(0), 4)
    r_t = jax.random.normal(k[0], (T, B))
    discount_t = 0.99 * (jax.random.uniform(k[1], (T, B)) > 0.1)
    values = jax.random.normal(k[2], (T + 1, B))
    rho_tm1 = jnp.exp(0.3 * jax.random.normal(k[3], (T, B)))

    def gae(r, d, v):
        return truncated_generalized_advantage_estimation(r, d, 0.95, v)

    def vtrace(r, d, v, rho):
        return vtrace_td_error_and_advantage(v[:-1], v[1:], r, d, rho, lambda_=0.9)

    rolled, unrolled = _both(gpu_rule, gae, r_t, discount_t, values)
    np.testing.assert_array_equal(rolled, unrolled)
    rolled, unrolled = _both(gpu_rule, vtrace, r_t, discount_t, values, rho_tm1)
    jax.tree.map(np.testing.assert_array_equal, rolled, unrolled)


@pytest.mark.parametrize("kind", ["lstm", "gru"])
def test_recurrent_core_unrolled_equals_rolled_forward_and_backward(gpu_rule, kind):
    core = RecurrentCore(kind, 8)
    features = jax.random.normal(jax.random.key(1), (T, B, 5))
    first = jnp.zeros((T, B), bool).at[10, 1].set(True)  # a reset inside the sequence
    state = initial_core_state(kind, B, 8)
    params = core.init(jax.random.key(2), state, features, first)

    def loss_and_grad(p):
        def loss(p):
            _, out = core.apply(p, state, features, first)
            return jnp.sum(out**2)

        return jax.value_and_grad(loss)(p)

    (loss, grads), (loss_unrolled, grads_unrolled) = _both(gpu_rule, loss_and_grad, params)
    assert loss == loss_unrolled
    # The parameter gradients sum 37 steps' terms, which the unrolled body may add in another
    # order: equal to float32's last bits.
    jax.tree.map(
        lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-7), grads, grads_unrolled
    )
