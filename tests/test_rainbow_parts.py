"""Rainbow's pure parts: a window's n-step target, the per-transition losses, importance weights
and the epsilon ladder, each against a plain reference."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxrl_dist import ops
from jaxrl_dist.agents.base import ActorIdentity
from jaxrl_dist.agents.common import transitions
from jaxrl_dist.agents.dqn import (
    RainbowConfig,
    epsilon_ladder,
    importance_weights,
    n_step_target,
    transition_losses,
)
from jaxrl_dist.types import Rollout

GAMMA = 0.9


def _window(num_steps, batch, seed, end_rate=0.25):
    """A random `[N + 1, B]` window with terminations and truncations anywhere after step 0."""
    rng = np.random.default_rng(seed)
    ends = rng.uniform(size=(2, num_steps + 1, batch)) < end_rate
    ends[:, 0] = False  # a replay never samples a transition that starts at an episode end
    return Rollout(
        obs=rng.normal(size=(num_steps + 1, batch, 3)).astype(np.float32),
        reward=rng.normal(size=(num_steps + 1, batch)).astype(np.float32),
        terminated=ends[0],
        truncated=ends[1],
        action=rng.integers(0, 4, size=(num_steps, batch)).astype(np.int32),
        agent_extras={},
        policy_version=np.zeros((num_steps, batch), np.int32),
    )


def _reference(window, n):
    """The loop a reader checks by eye: walk until n steps or the first episode end."""
    out = []
    for j in range(window.action.shape[1]):
        r, m = 0.0, 0
        for k in range(1, n + 1):
            r += GAMMA ** (k - 1) * window.reward[k, j]
            m = k
            if window.terminated[k, j] or window.truncated[k, j]:
                break
        discount = 0.0 if window.terminated[m, j] else GAMMA**m
        out.append((r, discount, m))
    return np.array(out)


@pytest.mark.parametrize("num_steps,n", [(1, 1), (3, 3), (5, 2), (8, 5)])
@pytest.mark.parametrize("seed", [0, 1])
def test_n_step_target_matches_a_loop(num_steps, n, seed):
    window = _window(num_steps, 64, seed)
    target = n_step_target(window, n, GAMMA)
    ref = _reference(window, n)
    np.testing.assert_allclose(target.r_t, ref[:, 0], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(target.discount_t, ref[:, 1], rtol=1e-5)
    np.testing.assert_array_equal(target.steps, ref[:, 2])
    np.testing.assert_array_equal(target.obs_t, window.obs[ref[:, 2].astype(int), np.arange(64)])


@pytest.mark.parametrize("n", [1, 2, 4])
def test_n_step_target_equals_the_sequence_op_on_its_window(n):
    """`r_t + discount_t * v(obs_t)` is the return `ops.n_step_bootstrapped_returns` gives the
    window's first transition, with the actor-critic agents' episode-boundary handling
    (`transitions` folds a truncation's bootstrap into the reward)."""
    window = _window(4, 128, seed=3)
    values = jnp.asarray(np.random.default_rng(4).normal(size=(5, 128)), jnp.float32)
    r_t, discount_t, _ = transitions(window, values, GAMMA)
    expected = ops.n_step_bootstrapped_returns(r_t, discount_t, values[1:], n)[0]
    target = n_step_target(window, n, GAMMA)
    got = target.r_t + target.discount_t * values[target.steps, jnp.arange(128)]
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)


def test_n_step_target_takes_a_traced_n_clipped_to_the_window():
    window = _window(4, 32, seed=5, end_rate=0.0)
    by_n = jax.jit(lambda n: n_step_target(window, n, GAMMA).steps)
    assert {int(by_n(n)[0]) for n in (2, 3)} == {2, 3}
    np.testing.assert_array_equal(by_n(9), 4)  # clipped to N
    np.testing.assert_array_equal(by_n(0), 1)


def test_expected_value_losses_are_double_q_learning_with_huber_or_l2():
    rng = np.random.default_rng(0)
    q_tm1, q_t, sel = (jnp.asarray(rng.normal(size=(16, 3)), jnp.float32) for _ in range(3))
    a = jnp.asarray(rng.integers(0, 3, 16), jnp.int32)
    target = n_step_target(_window(2, 16, 6), 2, GAMMA)
    td = jax.vmap(ops.double_q_learning)(q_tm1, a, target.r_t, target.discount_t, q_t, sel)
    for loss, expected in (("huber", None), ("l2", 0.5 * np.square(td))):
        config = RainbowConfig(num_atoms=1, loss=loss)
        got, priority = transition_losses(q_tm1, a, target, q_t, sel, None, config)
        np.testing.assert_allclose(priority, np.abs(td), rtol=1e-6)
        if expected is None:
            abs_td = np.abs(td)
            expected = np.where(abs_td <= 1, 0.5 * td**2, abs_td - 0.5)
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)


def test_c51_loss_is_the_categorical_op_and_its_own_priority():
    rng = np.random.default_rng(1)
    atoms = jnp.linspace(-2.0, 2.0, 7)
    logits_tm1, logits_t = (jnp.asarray(rng.normal(size=(8, 3, 7)), jnp.float32) for _ in "ab")
    sel = jnp.asarray(rng.normal(size=(8, 3)), jnp.float32)
    a = jnp.asarray(rng.integers(0, 3, 8), jnp.int32)
    target = n_step_target(_window(3, 8, 7), 3, GAMMA)
    loss, priority = transition_losses(
        logits_tm1, a, target, logits_t, sel, atoms, RainbowConfig(num_atoms=7)
    )
    for j in range(8):
        expected = ops.categorical_double_q_learning(
            atoms,
            logits_tm1[j],
            a[j],
            target.r_t[j],
            target.discount_t[j],
            atoms,
            logits_t[j],
            sel[j],
        )
        np.testing.assert_allclose(loss[j], expected, rtol=1e-5)
    np.testing.assert_array_equal(loss, priority)


@pytest.mark.parametrize("beta", [0.0, 0.4, 1.0])
def test_importance_weights_follow_schaul_normalised_by_the_largest(beta):
    p = np.array([0.1, 0.02, 0.3, 0.005])
    count = np.full(4, 200.0)
    expected = (count * p) ** -beta
    got = importance_weights(jnp.asarray(p), jnp.asarray(count), beta)
    np.testing.assert_allclose(got, expected / expected.max(), rtol=1e-5)


def test_epsilon_ladder_spans_every_env_of_every_actor():
    """Ape-X: env i of N acts with epsilon ** (1 + alpha i / (N - 1)); two actors of 4 envs
    tile i = 0..7."""
    ladders = [epsilon_ladder(ActorIdentity(a, 2), 4, alpha=7.0) for a in range(2)]
    np.testing.assert_allclose(np.concatenate(ladders), 1 + 7.0 * np.arange(8) / 7, rtol=1e-6)
    np.testing.assert_array_equal(epsilon_ladder(ActorIdentity(0, 1), 1, alpha=7.0), [1.0])
    np.testing.assert_array_equal(epsilon_ladder(ActorIdentity(1, 2), 3, alpha=0.0), 1.0)
