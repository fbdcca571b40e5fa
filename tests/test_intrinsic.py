"""Intrinsic rewards (`config.intrinsic`, RND), the parts: the reward and its normalisation, the
intrinsic value head in PPO's and IMPALA's losses, pre-training's weights and zeroed env
reward, the learner wrapper and the head it keeps. Whole runs: `test_intrinsic_runs.py`."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxrl_dist.agents.base import LearnerCore
from jaxrl_dist.agents.impala import ImpalaConfig
from jaxrl_dist.agents.impala.loss import impala_loss
from jaxrl_dist.agents.intrinsic import RND, IntrinsicConfig, with_intrinsic
from jaxrl_dist.agents.ppo import PPOConfig
from jaxrl_dist.agents.ppo.loss import (
    advantages_and_targets,
    combined_advantages_and_targets,
    intrinsic_advantages_and_targets,
    ppo_loss,
)
from jaxrl_dist.ops import truncated_generalized_advantage_estimation, vtrace_td_error_and_advantage
from jaxrl_dist.ops.running_stats import init_running_stats, update_running_stats
from jaxrl_dist.types import Rollout

SMALL = IntrinsicConfig("rnd", hidden_sizes=(32,), embedding_size=16, learning_rate=1e-2)


def _rollout(obs: np.ndarray, reward=None, ended=None) -> Rollout:
    """A `[T + 1, B]` rollout of `obs` (episode ends at `ended [T + 1, B]`)."""
    steps, batch = obs.shape[:2]
    ended = np.zeros((steps, batch), bool) if ended is None else ended
    return Rollout(
        obs=jnp.asarray(obs, jnp.float32),
        reward=jnp.zeros((steps, batch)) if reward is None else jnp.asarray(reward),
        terminated=jnp.asarray(ended),
        truncated=jnp.zeros((steps, batch), bool),
        action=jnp.zeros((steps - 1, batch), jnp.int32),
        agent_extras={"log_prob": jnp.full((steps - 1, batch), -0.7)},
        policy_version=jnp.zeros((steps - 1, batch), jnp.int32),
    )


def test_rnd_rewards_new_observations_over_familiar_ones():
    """After the predictor learned one observation, another one earns the larger reward."""
    rnd = RND(dataclasses.replace(SMALL, update_proportion=1.0), (4,), "mlp", 2)
    familiar, new = np.array([1.0, 0.0, 0.5, -1.0]), np.array([-2.0, 3.0, 0.0, 1.0])
    state = rnd.init(jax.random.PRNGKey(0))
    step = jax.jit(rnd.step)
    for _ in range(150):
        state, _, metrics = step(state, _rollout(np.broadcast_to(familiar, (5, 2, 4))))
    probe = np.broadcast_to(familiar, (5, 2, 4)).copy()
    probe[1:, 1] = new  # column 1 arrives at the new observation
    _, r_int, _ = step(state, _rollout(probe))
    assert float(r_int[:, 1].min()) > 10 * float(r_int[:, 0].max())
    assert float(metrics["predictor_loss"]) < 1e-3


def test_rewards_are_divided_by_the_std_of_returns_carried_from_batch_to_batch():
    """The paper's normalisation: each column's discounted sum of raw rewards runs on across
    batches (and episode ends); the rewards are divided by the running std of those sums."""
    rnd = RND(dataclasses.replace(SMALL, discount=0.9), (3,), "mlp", 2)
    state = rnd.init(jax.random.PRNGKey(1))
    rng = np.random.default_rng(0)
    running, stats = np.zeros(2), init_running_stats(())
    for _ in range(3):
        state, r_int, _ = rnd.step(state, _rollout(rng.normal(size=(5, 2, 3))))
        r_raw = np.asarray(r_int) * np.sqrt(float(state.return_stats.var) + 1e-8)
        sums = []
        for r_t in r_raw:
            running = 0.9 * running + r_t
            sums.append(running.copy())
        stats = update_running_stats(stats, np.stack(sums))
        np.testing.assert_allclose(state.return_filter, running, rtol=1e-5)
        np.testing.assert_allclose(state.return_stats.var, stats.var, rtol=1e-4)
    assert (np.asarray(r_int) > 0).all()


def test_rnd_embeds_image_frames_through_the_image_torso():
    """uint8 `[C, H, W]` frames go to the run's image torso as they are (it scales them)."""
    from jaxrl_dist.agents.intrinsic import make_rnd
    from jaxrl_dist.envs import EnvSpec
    from jaxrl_dist.networks import NetworkConfig

    spec = EnvSpec(obs_shape=(2, 12, 12), obs_dtype=np.dtype("uint8"), num_actions=3)
    rnd = make_rnd(SMALL, NetworkConfig(), spec, 2)
    assert rnd.torso_name == "impala_resnet" and not rnd.whitens
    frames = np.random.default_rng(0).integers(0, 256, (4, 2, 2, 12, 12), dtype=np.uint8)
    rollout = _rollout(np.zeros((4, 2, 1)))._replace(obs=jnp.asarray(frames))
    state, r_int, _ = jax.jit(rnd.step)(rnd.init(jax.random.PRNGKey(0)), rollout)
    assert r_int.shape == (3, 2) and bool(jnp.all(jnp.isfinite(r_int)))
    assert state.obs_stats.mean.shape == ()  # no whitening statistics kept for frames


def test_rnd_refuses_a_batch_of_another_size():
    rnd = RND(SMALL, (3,), "mlp", 4)
    with pytest.raises(ValueError, match="batches of 4 envs, got 2"):
        rnd.step(rnd.init(jax.random.PRNGKey(0)), _rollout(np.zeros((3, 2, 3))))


def test_intrinsic_advantages_run_across_episode_ends():
    """Non-episodic: the intrinsic GAE discounts every transition, where the env reward's stops."""
    values = jnp.asarray(np.random.default_rng(1).normal(size=(5, 2)), jnp.float32)
    r_int = jnp.ones((4, 2))
    ended = np.zeros((5, 2), bool)
    ended[2, 0] = True
    rollout = _rollout(np.zeros((5, 2, 1)), ended=ended)
    config = PPOConfig(gae_lambda=0.9)
    adv, target = intrinsic_advantages_and_targets(
        values, jnp.full((4, 2), -0.7), rollout, r_int, 0.95, config
    )
    want = truncated_generalized_advantage_estimation(r_int, jnp.full((4, 2), 0.95), 0.9, values)
    np.testing.assert_allclose(adv, want, rtol=1e-6)
    np.testing.assert_allclose(target, want + values[:-1], rtol=1e-6)


def test_ppo_value_loss_sums_both_heads_the_intrinsic_one_over_every_transition():
    rng = np.random.default_rng(2)
    values = jnp.asarray(rng.normal(size=(4, 3, 2)), jnp.float32)
    mask = np.ones((4, 3), np.float32)
    mask[2, 1] = 0.0  # a reset transition: the env reward's head skips it, the intrinsic not
    batch = {
        "action": jnp.zeros((4, 3), jnp.int32),
        "behaviour_log_prob": jnp.full((4, 3), -0.7),
        "old_log_prob": jnp.full((4, 3), -0.7),
        "advantage": jnp.asarray(rng.normal(size=(4, 3)), jnp.float32),
        "target": jnp.asarray(rng.normal(size=(4, 3, 2)), jnp.float32),
        "old_value": values,
        "mask": jnp.asarray(mask),
    }
    logits = jnp.zeros((4, 3, 2))
    config = PPOConfig(clip_value=False)
    _, both = ppo_loss(logits, values, batch, config)

    def head(i, head_mask):
        one = {**batch, "target": batch["target"][..., i], "old_value": values[..., i]}
        return ppo_loss(logits, values[..., i], {**one, "mask": head_mask}, config)[1]

    want = head(0, batch["mask"])["value_loss"] + head(1, jnp.ones((4, 3)))["value_loss"]
    np.testing.assert_allclose(both["value_loss"], want, rtol=1e-6)


def test_ppo_weighs_both_advantages_and_pretraining_drops_the_env_rewards():
    rng = np.random.default_rng(4)
    ended = np.zeros((5, 2), bool)
    ended[2, 1] = True
    rollout = _rollout(np.zeros((5, 2, 1)), reward=rng.normal(size=(5, 2)), ended=ended)
    values = jnp.asarray(rng.normal(size=(5, 2, 2)), jnp.float32)
    r_int, log_pi = jnp.asarray(rng.uniform(size=(4, 2)), jnp.float32), jnp.full((4, 2), -0.7)
    config = PPOConfig()
    ext, ext_target, ext_mask = advantages_and_targets(values[..., 0], log_pi, rollout, config)
    intr, int_target = intrinsic_advantages_and_targets(
        values[..., 1], log_pi, rollout, r_int, 0.95, config
    )
    for weights, pretraining, want in (
        ((2.0, 1.0), False, 2 * ext + intr),
        ((0.5, 3.0), False, 0.5 * ext + 3 * intr),
        ((2.0, 1.0), True, intr),
    ):
        c = dataclasses.replace(
            SMALL, ext_coef=weights[0], int_coef=weights[1], discount=0.95, pretraining=pretraining
        )
        adv, target, mask = combined_advantages_and_targets(
            values, log_pi, rollout, r_int, config, c
        )
        np.testing.assert_allclose(adv, want, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(target, np.stack([ext_target, int_target], -1), rtol=1e-6)
        np.testing.assert_array_equal(mask, ext_mask)


def test_impala_follows_both_advantages_and_learns_both_heads():
    """At weights 1 and 0 the policy gradient is the env reward's alone, at 0 and 1 the
    intrinsic one's; the baseline loss adds the intrinsic head's V-trace errors, non-episodic
    and over every transition."""
    rng = np.random.default_rng(3)
    ended = np.zeros((5, 2), bool)
    ended[3, 1] = True
    rollout = _rollout(np.zeros((5, 2, 1)), reward=rng.normal(size=(5, 2)), ended=ended)
    values = jnp.asarray(rng.normal(size=(5, 2, 2)), jnp.float32)
    logits = jnp.asarray(rng.normal(size=(5, 2, 3)), jnp.float32)
    r_int = jnp.asarray(rng.uniform(size=(4, 2)), jnp.float32)
    config = ImpalaConfig()
    _, ext = impala_loss(logits, values[..., 0], rollout, config)
    ext_only = dataclasses.replace(SMALL, ext_coef=1.0, int_coef=0.0, discount=0.9)
    _, both = impala_loss(logits, values, rollout, config, intrinsic=(r_int, ext_only))
    np.testing.assert_allclose(both["pg_loss"], ext["pg_loss"], rtol=1e-6)
    log_pi = jax.nn.log_softmax(logits[:-1])[..., 0]
    rho = jnp.exp(log_pi - rollout.agent_extras["log_prob"])
    int_vtrace = vtrace_td_error_and_advantage(
        values[:-1, :, 1], values[1:, :, 1], r_int, jnp.full((4, 2), 0.9), rho, config.lambda_
    )
    want = ext["baseline_loss"] + 0.5 * np.mean(np.square(int_vtrace.errors))
    np.testing.assert_allclose(both["baseline_loss"], want, rtol=1e-5)
    assert both["intrinsic_value_mean"] != both["value_mean"]
    int_only = dataclasses.replace(ext_only, ext_coef=0.0, int_coef=1.0)
    _, alone = impala_loss(logits, values, rollout, config, intrinsic=(r_int, int_only))
    mask = np.ones((4, 2))
    mask[3, 1] = 0.0  # the reset transition after the episode end: no policy gradient
    pg = -np.sum(log_pi * int_vtrace.pg_advantage * mask) / mask.sum()
    np.testing.assert_allclose(alone["pg_loss"], pg, rtol=1e-5)


def test_pretraining_hides_the_env_reward_and_the_wrapper_is_the_agents_state():
    seen = []

    def update(state, rollout, r_int):
        seen.append((np.asarray(rollout.reward), np.asarray(r_int)))
        return state._replace(update_step=state.update_step + 1), {"loss": jnp.zeros(())}

    from jaxrl_dist.agents.base import LearnerState

    init = lambda key: LearnerState({"w": jnp.ones(2)}, (), key, jnp.zeros((), jnp.int32), {})  # noqa: E731
    rollout = _rollout(np.ones((3, 2, 3)), reward=np.full((3, 2), 5.0))
    for pretraining, reward in ((True, 0.0), (False, 5.0)):
        config = dataclasses.replace(SMALL, pretraining=pretraining)
        core = with_intrinsic(LearnerCore(init, update), RND(config, (3,), "mlp", 2))
        state = core.init(jax.random.PRNGKey(0))
        state, metrics = core.update(state, rollout)
        assert (seen[-1][0] == reward).all() and seen[-1][1].shape == (2, 2)
        assert int(core.update_count(state)) == 1 == int(state.update_step)
        assert "predictor_loss" in metrics and "loss" in metrics
        assert core.actor_params(state)["w"].shape == (2,)
        moved = core.with_params(state, {"w": jnp.zeros(2)})
        assert float(core.actor_params(moved)["w"].sum()) == 0.0


def test_params_put_into_an_rnd_learner_keep_its_own_intrinsic_head():
    """A warm start or a load takes everything but the intrinsic value head, whose values are
    of the learner's own RND."""
    from jaxrl_dist.agents.base import RunShape
    from jaxrl_dist.agents.ppo import make_ppo
    from jaxrl_dist.agents.ppo.config import PPOConfig as Config
    from jaxrl_dist.envs import EnvSpec
    from jaxrl_dist.networks import NetworkConfig

    spec = EnvSpec(obs_shape=(3,), obs_dtype=np.dtype("float32"), num_actions=2)
    network = NetworkConfig(hidden_sizes=(8,))
    agent = make_ppo(Config(), network, spec, RunShape(1000, 10.0), RND(SMALL, (3,), "mlp", 2))
    core = agent.learner
    mine, other = core.init(jax.random.PRNGKey(0)), core.init(jax.random.PRNGKey(1))
    loaded = core.actor_params(core.with_params(mine, core.actor_params(other)))
    heads = lambda p: p["net"]["params"]  # noqa: E731
    for name, head in heads(loaded).items():
        source = mine if name == "intrinsic_value_head" else other
        jax.tree.map(np.testing.assert_array_equal, head, heads(core.actor_params(source))[name])
    assert set(heads(loaded)) >= {"intrinsic_value_head", "value_head", "policy_head"}
