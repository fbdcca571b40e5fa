"""`jaxrl_dist.ops` Q-learning ops against rlax 0.1.9: values and gradients, several shapes."""

import functools
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import rlax

from jaxrl_dist import ops

TOL = dict(rtol=1e-5, atol=1e-5)


def _transitions(batch, actions, seed):
    """A batch of `(q_tm1, a_tm1, r_t, discount_t, q_t, q_t_selector)`, terminals included."""
    rng = np.random.default_rng(seed)
    q_tm1, q_t, q_sel = (rng.normal(size=(batch, actions)).astype(np.float32) for _ in range(3))
    a_tm1 = rng.integers(0, actions, size=batch).astype(np.int32)
    r_t = rng.normal(size=batch).astype(np.float32)
    discount_t = np.where(rng.uniform(size=batch) < 0.25, 0.0, 0.99).astype(np.float32)
    return q_tm1, a_tm1, r_t, discount_t, q_t, q_sel


def _both(name, args, *, stop=True):
    """Values and the gradient of the summed squares w.r.t. the float arguments (all of them,
    so a target without a stop-gradient shows), for our op and rlax's, vmapped over a batch."""
    floats = [i for i, x in enumerate(args) if np.issubdtype(np.asarray(x).dtype, np.floating)]

    def run(fn):
        fn = jax.vmap(functools.partial(fn, stop_target_gradients=stop))

        def loss(*fargs):
            full = list(args)
            for i, x in zip(floats, fargs, strict=True):
                full[i] = x
            return jnp.sum(fn(*full) ** 2)

        # One jitted program each: eager dispatch compiles every primitive of the vmapped
        # gradient separately, several times slower on a cold cache.
        values = jax.jit(fn)(*args)
        grad = jax.jit(jax.grad(loss, argnums=tuple(range(len(floats)))))
        return values, grad(*(args[i] for i in floats))

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PendingDeprecationWarning)  # rlax's cross-entropy
        return run(getattr(ops, name)), run(getattr(rlax, name))


def _assert_same(ours, theirs):
    np.testing.assert_allclose(ours[0], theirs[0], **TOL)
    for g_ours, g_theirs in zip(ours[1], theirs[1], strict=True):
        np.testing.assert_allclose(g_ours, g_theirs, **TOL)


@pytest.mark.parametrize("batch,actions,seed", [(1, 2, 0), (7, 4, 1), (33, 18, 2)])
@pytest.mark.parametrize("stop", [True, False])
def test_q_learning_matches_rlax(batch, actions, seed, stop):
    q_tm1, a_tm1, r_t, discount_t, q_t, _ = _transitions(batch, actions, seed)
    _assert_same(*_both("q_learning", (q_tm1, a_tm1, r_t, discount_t, q_t), stop=stop))


@pytest.mark.parametrize("batch,actions,seed", [(1, 2, 3), (7, 4, 4), (33, 18, 5)])
@pytest.mark.parametrize("stop", [True, False])
def test_double_q_learning_matches_rlax(batch, actions, seed, stop):
    args = _transitions(batch, actions, seed)
    _assert_same(*_both("double_q_learning", args, stop=stop))


def test_double_q_learning_values_the_selected_action_with_the_other_network():
    q_tm1 = jnp.array([0.0, 0.0])
    q_value, q_selector = jnp.array([10.0, -3.0]), jnp.array([0.0, 1.0])  # picks action 1
    td = ops.double_q_learning(
        q_tm1, jnp.int32(0), jnp.float32(1.0), jnp.float32(0.5), q_value, q_selector
    )
    assert float(td) == pytest.approx(1.0 + 0.5 * -3.0)
    assert float(ops.q_learning(q_tm1, jnp.int32(0), 1.0, jnp.float32(0.0), q_value)) == 1.0


@pytest.mark.parametrize(
    "kp,kq,lo,hi,seed",
    [(51, 51, -10.0, 10.0, 0), (11, 21, -1.0, 3.0, 1), (21, 11, 0.0, 1.0, 2), (5, 5, -2.0, 2.0, 3)],
)
def test_categorical_l2_project_matches_rlax(kp, kq, lo, hi, seed):
    rng = np.random.default_rng(seed)
    z_q = jnp.linspace(lo, hi, kq, dtype=jnp.float32)
    for scale in (0.5, 1.0, 3.0):  # inside, at and beyond the target support
        z_p = jnp.asarray(np.sort(rng.normal(size=kp) * scale * (hi - lo)), jnp.float32)
        probs = jax.nn.softmax(jnp.asarray(rng.normal(size=kp), jnp.float32))
        ours = ops.categorical_l2_project(z_p, probs, z_q)
        np.testing.assert_allclose(ours, rlax.categorical_l2_project(z_p, probs, z_q), **TOL)
        assert float(jnp.sum(ours)) == pytest.approx(1.0, abs=1e-5)  # mass is kept


def test_categorical_l2_project_by_hand():
    z_q = jnp.array([0.0, 1.0, 2.0])
    # 0.25 between atoms 0 and 1, and 5.0 clipped to the top atom.
    out = ops.categorical_l2_project(jnp.array([0.25, 5.0]), jnp.array([0.5, 0.5]), z_q)
    np.testing.assert_allclose(out, [0.375, 0.125, 0.5], atol=1e-6)


@pytest.mark.parametrize("batch,actions,atoms,seed", [(1, 2, 5, 0), (6, 3, 11, 1), (16, 6, 51, 2)])
@pytest.mark.parametrize("stop", [True, False])
def test_categorical_double_q_learning_matches_rlax(batch, actions, atoms, seed, stop):
    rng = np.random.default_rng(seed)
    q_tm1, a_tm1, r_t, discount_t, _, q_sel = _transitions(batch, actions, seed)
    del q_tm1
    z = np.broadcast_to(np.linspace(-5.0, 5.0, atoms, dtype=np.float32), (batch, atoms))
    logits_tm1, logits_t = (
        rng.normal(size=(batch, actions, atoms)).astype(np.float32) for _ in range(2)
    )
    args = (z, logits_tm1, a_tm1, r_t * 3, discount_t, z, logits_t, q_sel)
    ours, theirs = _both("categorical_double_q_learning", args, stop=stop)
    if stop:
        _assert_same(ours, theirs)
        return
    # Through the target, rlax 0.1.9's gradient is NaN on rows whose projected target has an
    # atom of zero mass (its cross-entropy differentiates a log of the labels); the gradient of
    # -sum(target * log_softmax(logits)) there is finite, and ours equals rlax's elsewhere.
    np.testing.assert_allclose(ours[0], theirs[0], **TOL)
    compared = 0
    for g_ours, g_theirs in zip(ours[1], theirs[1], strict=True):
        g_ours, g_theirs = np.asarray(g_ours), np.asarray(g_theirs)
        assert np.all(np.isfinite(g_ours))
        finite = np.isfinite(g_theirs)
        np.testing.assert_allclose(g_ours[finite], g_theirs[finite], **TOL)
        compared += finite.sum()
    assert compared >= 0.5 * sum(np.size(g) for g in ours[1])


def _rlax_categorical_fixture():
    """rlax 0.1.9's `CategoricalDoubleQLearningTest` inputs (`value_learning_test.py`)."""
    atoms = np.array([0.5, 1.0, 1.5], dtype=np.float32)
    q_logits_tm1 = np.array(
        [
            [[1, 1, 1], [0, 9, 9], [0, 9, 0], [0, 0, 0]],
            [[9, 9, 0], [9, 0, 9], [0, 0, 0], [9, -9, 0]],
            [[1, 1, 1], [0, 9, 9], [0, 0, 0], [0, 9, 0]],
            [[9, 9, 0], [9, 0, 9], [0, 0, 0], [9, -9, 0]],
            [[9, 9, 0], [9, 0, 9], [0, 0, 0], [9, -9, 0]],
        ],
        dtype=np.float32,
    )
    q_logits_t = np.array(
        [
            [[1, 1, 1], [9, 0, 9], [1, 0, 0], [0, 0, 9]],
            [[9, 9, 0], [9, 0, 0], [1, 1, 1], [9, -9, 0]],
            [[1, 1, 1], [9, 0, 9], [0, 0, 9], [1, 0, 0]],
            [[9, 9, 0], [9, 0, 0], [1, 1, 1], [9, -9, 0]],
            [[9, 9, 0], [9, 0, 0], [0, 9, 9], [9, -9, 0]],
        ],
        dtype=np.float32,
    )
    a_tm1 = np.array([2, 1, 3, 0, 1], dtype=np.int32)
    r_t = np.array([0.5, 0.0, 0.5, 0.8, -0.1], dtype=np.float32)
    discount_t = np.array([0.8, 1.0, 0.8, 0.0, 1.0], dtype=np.float32)
    return atoms, q_logits_tm1, a_tm1, r_t, discount_t, q_logits_t


@pytest.mark.parametrize("jit", [True, False])
def test_categorical_double_q_learning_passes_rlax_single_double_q_learning_eq_batch(jit):
    # rlax's `test_single_double_q_learning_eq_batch` with our op swapped in: selecting with the
    # expected values of `q_logits_t` must give rlax's `categorical_q_learning` (default rtol
    # 1e-7). A plain -sum(target * log_softmax) is an ulp off rlax's (distrax's) rounding of the
    # cross-entropy: 8.998915 against 8.998916 on rows 0 and 2.
    atoms, q_logits_tm1, a_tm1, r_t, discount_t, q_logits_t = _rlax_categorical_fixture()
    variant = jax.jit if jit else (lambda f: f)

    @variant
    @jax.vmap
    def batch_double(q_logits_tm1, a_tm1, r_t, discount_t, q_logits_t, q_t_selector):
        return ops.categorical_double_q_learning(
            atoms, q_logits_tm1, a_tm1, r_t, discount_t, atoms, q_logits_t, q_t_selector
        )

    @variant
    @jax.vmap
    def batch_rlax(q_logits_tm1, a_tm1, r_t, discount_t, q_logits_t):
        return rlax.categorical_q_learning(
            atoms, q_logits_tm1, a_tm1, r_t, discount_t, atoms, q_logits_t
        )

    q_t_selector = jnp.sum(jax.nn.softmax(q_logits_t) * atoms[None, None, :], axis=-1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PendingDeprecationWarning)  # rlax's cross-entropy
        expected = batch_rlax(q_logits_tm1, a_tm1, r_t, discount_t, q_logits_t)
    actual = batch_double(q_logits_tm1, a_tm1, r_t, discount_t, q_logits_t, q_t_selector)
    np.testing.assert_allclose(expected, actual)  # rlax's check, as it is written
    np.testing.assert_array_equal(actual, expected)  # and in fact to the bit
    if jit:  # one transition at a time, jitted, is the vmapped batch to the bit too
        single = jax.jit(ops.categorical_double_q_learning)
        for i in range(len(a_tm1)):
            one = single(
                atoms,
                q_logits_tm1[i],
                a_tm1[i],
                r_t[i],
                discount_t[i],
                atoms,
                q_logits_t[i],
                q_t_selector[i],
            )
            np.testing.assert_array_equal(one, actual[i])


@pytest.mark.parametrize("jit", [True, False])
@pytest.mark.parametrize("atoms,seed", [(3, 0), (11, 1), (51, 2)])
def test_categorical_double_q_learning_value_is_rlax_to_the_bit(atoms, seed, jit):
    rng = np.random.default_rng(seed)
    batch, actions = 64, 5
    z = np.linspace(-5.0, 5.0, atoms, dtype=np.float32)
    logits_tm1, logits_t = (
        (3 * rng.normal(size=(batch, actions, atoms))).astype(np.float32) for _ in range(2)
    )
    _, a_tm1, r_t, discount_t, _, q_sel = _transitions(batch, actions, seed)
    args = (z, logits_tm1, a_tm1, r_t * 3, discount_t, z, logits_t, q_sel)
    axes = (None, 0, 0, 0, 0, None, 0, 0)
    variant = jax.jit if jit else (lambda f: f)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PendingDeprecationWarning)  # rlax's cross-entropy
        theirs = variant(jax.vmap(rlax.categorical_double_q_learning, axes))(*args)
    ours = variant(jax.vmap(ops.categorical_double_q_learning, axes))(*args)
    np.testing.assert_array_equal(ours, theirs)


@pytest.mark.parametrize("seq_len", [1, 4, 9])
@pytest.mark.parametrize("n", [1, 3, 12])
@pytest.mark.parametrize("lambda_kind", ["1.0", "0.7", "per_step"])
def test_n_step_bootstrapped_returns_matches_rlax(seq_len, n, lambda_kind):
    rng = np.random.default_rng(seq_len * 100 + n)
    r_t, v_t = (jnp.asarray(rng.normal(size=seq_len), jnp.float32) for _ in range(2))
    discount_t = jnp.asarray(np.where(rng.uniform(size=seq_len) < 0.2, 0.0, 0.9), jnp.float32)
    lam = {"1.0": 1.0, "0.7": 0.7}.get(lambda_kind)
    if lam is None:
        lam = jnp.asarray(rng.uniform(size=seq_len), jnp.float32)
    for stop in (True, False):
        kwargs = dict(n=n, lambda_t=lam, stop_target_gradients=stop)
        ours = ops.n_step_bootstrapped_returns(r_t, discount_t, v_t, **kwargs)
        theirs = rlax.n_step_bootstrapped_returns(r_t, discount_t, v_t, **kwargs)
        np.testing.assert_allclose(ours, theirs, **TOL)

        def grad(fn, kwargs=kwargs):
            return jax.grad(lambda r, v: jnp.sum(fn(r, discount_t, v, **kwargs) ** 2), (0, 1))(
                r_t, v_t
            )

        for g_ours, g_theirs in zip(
            grad(ops.n_step_bootstrapped_returns),
            grad(rlax.n_step_bootstrapped_returns),
            strict=True,
        ):
            np.testing.assert_allclose(g_ours, g_theirs, **TOL)


def test_n_step_returns_over_batch_columns_match_each_column():
    rng = np.random.default_rng(7)
    shape = (8, 3, 2)
    r_t, v_t = (jnp.asarray(rng.normal(size=shape), jnp.float32) for _ in range(2))
    discount_t = jnp.asarray(np.where(rng.uniform(size=shape) < 0.2, 0.0, 0.95), jnp.float32)
    lam = jnp.asarray(rng.uniform(size=shape[0]), jnp.float32)  # per step, shared by columns
    out = ops.n_step_bootstrapped_returns(r_t, discount_t, v_t, n=3, lambda_t=lam)
    assert out.shape == shape
    for b in range(3):
        for c in range(2):
            column = rlax.n_step_bootstrapped_returns(
                r_t[:, b, c], discount_t[:, b, c], v_t[:, b, c], n=3, lambda_t=lam
            )
            np.testing.assert_allclose(out[:, b, c], column, **TOL)


def test_n_step_returns_by_hand():
    """n=2, gamma 0.5: G_0 = r1 + .5 (r2 + .5 v2); the termination after step 2 cuts G_1 to r2;
    G_2 = r3 + .5 v3 (the window shortened at the end)."""
    r_t = jnp.array([1.0, 2.0, 3.0])
    discount_t = jnp.array([0.5, 0.0, 0.5])
    v_t = jnp.array([10.0, 20.0, 30.0])
    out = ops.n_step_bootstrapped_returns(r_t, discount_t, v_t, n=2)
    np.testing.assert_allclose(out, [1.0 + 0.5 * 2.0, 2.0, 3.0 + 0.5 * 30.0], atol=1e-6)
    with pytest.raises(ValueError, match="n must be >= 1"):
        ops.n_step_bootstrapped_returns(r_t, discount_t, v_t, n=0)
