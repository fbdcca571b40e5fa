"""PPO: the clipped surrogate, value clipping, masks, estimators, and a CartPole learning run."""

import os

import jax
import jax.numpy as jnp
import numpy as np
from train_runs import train_run
from xla_level import OPTIMISED

from jaxrl_dist.agents.base import RunShape
from jaxrl_dist.agents.distributions import Categorical
from jaxrl_dist.agents.ppo import PPOConfig, advantages_and_targets, ppo_loss
from jaxrl_dist.config.cli import parse_args
from jaxrl_dist.types import Rollout

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _batch(adv, ratio, mask=None, target=0.0, old_value=0.0, mu=0.5):
    """One-step minibatch [1, n]; pi_old(a) = 0.5 over 2 actions, behaviour mu(a) = `mu`."""
    n = len(adv)
    return {
        "action": jnp.zeros((1, n), jnp.int32),
        "behaviour_log_prob": jnp.full((1, n), np.log(mu)),
        "old_log_prob": jnp.full((1, n), np.log(0.5)),
        "advantage": jnp.asarray(adv, jnp.float32)[None],
        "target": jnp.full((1, n), target, jnp.float32),
        "old_value": jnp.full((1, n), old_value, jnp.float32),
        "mask": jnp.ones((1, n)) if mask is None else jnp.asarray(mask, jnp.float32)[None],
    }, ratio


def _logits_for_ratio(ratio):
    """Logits over 2 actions giving pi(0) = 0.5 * ratio."""
    p = 0.5 * np.asarray(ratio, np.float32)
    return jnp.log(jnp.stack([p, 1 - p], axis=-1))[None]


def test_clipped_surrogate_matches_hand_computation():
    config = PPOConfig(clip_eps=0.2, normalize_advantages=False, entropy_cost=0.0, value_cost=0.0)
    ratio = np.array([0.5, 1.1, 1.5, 1.5, 0.7])
    adv = np.array([1.0, 1.0, 1.0, -1.0, -1.0])
    batch, _ = _batch(adv, ratio)
    _, m = ppo_loss(_logits_for_ratio(ratio), jnp.zeros((1, 5)), batch, config)
    expected = np.minimum(ratio * adv, np.clip(ratio, 0.8, 1.2) * adv)
    np.testing.assert_allclose(m["pg_loss"], -expected.mean(), rtol=1e-5)
    np.testing.assert_allclose(m["clip_fraction"], 4 / 5)  # 0.5, 1.5, 1.5, 0.7 are outside


def test_stale_rollouts_clip_around_pi_old_and_weight_by_pi_old_over_mu():
    """Decoupled PPO: mu(a)=0.75 acted, pi_old(a)=0.5 at update start. The clip is around pi_old
    (ratio 1.1 unclipped, 1.5 clipped to 1.2) and every term is weighted by pi_old/mu = 2/3."""
    config = PPOConfig(clip_eps=0.2, normalize_advantages=False, entropy_cost=0.0, value_cost=0.0)
    ratio = np.array([1.1, 1.5])
    adv = np.array([1.0, 1.0])
    stale, _ = _batch(adv, ratio, mu=0.75)
    _, m = ppo_loss(_logits_for_ratio(ratio), jnp.zeros((1, 2)), stale, config)
    np.testing.assert_allclose(m["pg_loss"], -(2 / 3) * np.mean([1.1, 1.2]), rtol=1e-5)
    np.testing.assert_allclose(m["behaviour_weight"], 2 / 3, rtol=1e-5)
    fresh_mu_low, _ = _batch(adv, ratio, mu=0.25)  # pi_old / mu = 2, capped at 1
    _, m = ppo_loss(_logits_for_ratio(ratio), jnp.zeros((1, 2)), fresh_mu_low, config)
    np.testing.assert_allclose(m["pg_loss"], -np.mean([1.1, 1.2]), rtol=1e-5)


def test_clipped_ratio_gets_no_gradient_and_masked_steps_count_nothing():
    config = PPOConfig(clip_eps=0.2, normalize_advantages=False, entropy_cost=0.0, value_cost=0.0)
    ratio = np.array([1.5, 1.0])
    batch, _ = _batch([1.0, 1.0], ratio, mask=[1.0, 0.0])
    grads = jax.grad(lambda lg: ppo_loss(lg, jnp.zeros((1, 2)), batch, config)[0])(
        _logits_for_ratio(ratio)
    )
    np.testing.assert_array_equal(grads, 0.0)  # step 0 clipped (A > 0, ratio > 1.2); step 1 masked


def test_value_clipping_takes_the_pessimistic_loss():
    config = PPOConfig(clip_eps=0.2, entropy_cost=0.0, normalize_advantages=False)
    batch, _ = _batch([0.0], [1.0], target=1.0, old_value=0.0)
    _, m = ppo_loss(_logits_for_ratio([1.0]), jnp.array([[0.9]]), batch, config)
    # unclipped error 0.1; clipped value 0.2 -> error 0.8; the larger one counts
    np.testing.assert_allclose(m["value_loss"], 0.5 * 0.8**2, rtol=1e-5)


def test_vtrace_targets_equal_gae_targets_on_policy():
    """With behaviour == learner policy (rho = 1), V-trace's value targets are GAE's."""
    rng = np.random.default_rng(0)
    t, b = 7, 3
    logits = jnp.asarray(rng.normal(size=(t + 1, b, 2)), jnp.float32)
    ended = rng.random((t + 1, b)) < 0.2
    rollout = Rollout(
        obs=jnp.zeros((t + 1, b, 1)),
        reward=jnp.asarray(rng.normal(size=(t + 1, b)), jnp.float32),
        terminated=jnp.asarray(ended & (rng.random((t + 1, b)) < 0.5)),
        truncated=jnp.asarray(ended),
        action=jnp.asarray(rng.integers(0, 2, size=(t, b)), jnp.int32),
        agent_extras={"log_prob": None},
        policy_version=jnp.zeros((t, b), jnp.int32),
    )
    log_pi = Categorical().log_prob(logits[:-1], rollout.action)
    rollout = rollout._replace(agent_extras={"log_prob": log_pi})  # behaviour == learner
    values = jnp.asarray(rng.normal(size=(t + 1, b)), jnp.float32)
    gae = advantages_and_targets(values, log_pi, rollout, PPOConfig(gae_lambda=0.9))
    vtr = advantages_and_targets(
        values, log_pi, rollout, PPOConfig(gae_lambda=0.9, advantage_estimator="vtrace")
    )
    np.testing.assert_allclose(gae[1], vtr[1], rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(gae[2], vtr[2])


def test_ppo_atari_quick_runs(tmp_path):
    config_file = os.path.join(ROOT, "configs", "ppo_atari.py")
    config, _ = parse_args(["--config", f"{config_file}:quick", "--workdir", "unused"])
    summary = train_run(f"{config_file}:quick", str(tmp_path / "run"), env=OPTIMISED)
    num_updates = RunShape(config.total_env_steps, config.steps_per_update).num_updates
    assert summary["updates"] == num_updates and summary["final_eval_return"] is not None


def test_a_conv_torso_s_sgd_steps_are_unrolled_on_a_cpu():
    """XLA:CPU runs a convolution whose weights a while loop carries ~11x slower, so PPO's SGD
    loop is unrolled there for the conv torsos, and stays a loop for an MLP (whose compile a
    long unrolled loop would only slow down)."""
    from jaxrl_dist.agents.common import sgd_loop_unroll
    from jaxrl_dist.networks import NetworkConfig

    assert jax.default_backend() == "cpu"
    assert sgd_loop_unroll(NetworkConfig(torso="nature_cnn"), 16) == 16
    assert sgd_loop_unroll(NetworkConfig(torso="impala_resnet"), 4) == 4
    assert sgd_loop_unroll(NetworkConfig(torso="mlp"), 16) == 1
