"""Action masks in every agent: an observation `{agent_view, action_mask}` makes sampling,
epsilon-greedy and greedy acting, the learner's log-probs and entropy (IMPALA, PPO) and the
bootstrap action (Rainbow) range over legal actions only, on states where most are illegal."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxrl_dist.agents.base import ActorIdentity, RunShape
from jaxrl_dist.agents.common import mask_logits
from jaxrl_dist.agents.dqn import RainbowConfig, make_rainbow
from jaxrl_dist.agents.impala import ImpalaConfig, make_impala
from jaxrl_dist.agents.ppo import PPOConfig, make_ppo
from jaxrl_dist.envs import EnvSpec
from jaxrl_dist.networks import NetworkConfig
from jaxrl_dist.types import ACTION_MASK, AGENT_VIEW, Rollout

SPEC = EnvSpec((6,), np.dtype(np.float32), 9)
AGENTS = {
    "ppo": (make_ppo, PPOConfig(num_minibatches=2)),
    "impala": (make_impala, ImpalaConfig()),
    "rainbow": (make_rainbow, RainbowConfig(num_atoms=11)),
    "rainbow_epsilon": (make_rainbow, RainbowConfig(noisy=False, epsilon=1.0, epsilon_start=1.0)),
}


def _masked_obs(rng, shape):
    """Views and masks with one to three legal actions of nine per row."""
    mask = np.zeros((*shape, 9), bool)
    for index in np.ndindex(*shape):
        mask[index][rng.choice(9, rng.integers(1, 4), replace=False)] = True
    view = rng.normal(size=(*shape, 6)).astype(np.float32)
    return {AGENT_VIEW: view, ACTION_MASK: mask}


def _agent(name):
    make, config = AGENTS[name]
    return make(config, NetworkConfig(torso="mlp"), SPEC, RunShape(10_000, 64))


@pytest.mark.parametrize("name", sorted(AGENTS))
def test_acting_never_picks_an_illegal_action(name):
    agent = _agent(name)
    state = agent.learner.init(jax.random.PRNGKey(0))
    params = agent.learner.actor_params(state)
    obs = _masked_obs(np.random.default_rng(1), (256,))
    actor_state = agent.actor.init_state(ActorIdentity(0, 1), 256, jax.random.PRNGKey(2))
    act = jax.jit(agent.actor.act)
    seen = np.zeros((256, 9), bool)
    for _ in range(20):
        action, extras, actor_state = act(params, obs, actor_state)
        action = np.asarray(action)
        assert obs[ACTION_MASK][np.arange(256), action].all()
        assert all(np.isfinite(np.asarray(x)).all() for x in extras.values())
        seen[np.arange(256), action] = True
    if name != "rainbow":  # sampling or epsilon 1 explores the legal actions
        assert (seen == obs[ACTION_MASK]).mean() > 0.95
    greedy = np.asarray(jax.jit(agent.actor.greedy_act)(params, obs, actor_state)[0])
    assert obs[ACTION_MASK][np.arange(256), greedy].all()


@pytest.mark.parametrize("name", sorted(AGENTS))
def test_an_update_on_masked_rollouts_is_finite(name):
    agent = _agent(name)
    state = agent.learner.init(jax.random.PRNGKey(0))
    rng = np.random.default_rng(3)
    t, b = 6, 8
    obs = _masked_obs(rng, (t + 1, b))
    action = np.array(
        [[rng.choice(np.flatnonzero(m)) for m in row] for row in obs[ACTION_MASK][:-1]]
    )
    ended = rng.random((t + 1, b)) < 0.15
    rollout = Rollout(
        obs=obs,
        reward=rng.normal(size=(t + 1, b)).astype(np.float32),
        terminated=ended,
        truncated=np.zeros_like(ended),
        action=action.astype(np.int32),
        agent_extras={
            "log_prob": np.full((t, b), -1.0, np.float32),
            "replay_probability": np.full((t, b), 0.01),
            "replay_count": np.full((t, b), 100.0),
        },
        policy_version=np.zeros((t, b), np.int32),
    )
    new_state, metrics = jax.jit(agent.learner.update)(state, rollout)[:2]
    for value in jax.tree.leaves((metrics, new_state.params)):
        assert np.isfinite(np.asarray(value)).all()


def test_masked_logits_give_legal_actions_all_the_probability():
    logits = jnp.array([[1.0, 2.0, 3.0], [0.0, 0.0, 0.0]])
    mask = jnp.array([[True, False, True], [False, True, False]])
    log_pi = jax.nn.log_softmax(mask_logits(logits, mask))
    np.testing.assert_allclose(
        jnp.exp(log_pi), [[1 / (1 + np.e**2), 0, np.e**2 / (1 + np.e**2)], [0, 1, 0]], atol=1e-6
    )

    def entropy(x):
        log_pi = jax.nn.log_softmax(mask_logits(x, mask))
        return -jnp.sum(jnp.exp(log_pi) * log_pi)

    entropy_grad = jax.grad(entropy)(logits)
    assert np.isfinite(np.asarray(entropy_grad)).all()
    assert mask_logits(logits, None) is logits


def test_rainbow_bootstraps_from_the_best_legal_action():
    """1-step expected-value targets, no double Q: a transition's priority |r + gamma Q(s', a*)
    - Q(s, a)| uses the best legal a*. Masks that keep the best action leave it; a mask that
    takes it away changes it."""
    config = RainbowConfig(num_atoms=1, noisy=False, double=False, learning_rate=1e-9)
    agent = make_rainbow(config, NetworkConfig(torso="mlp"), SPEC, RunShape(10_000, 64))
    state = agent.learner.init(jax.random.PRNGKey(0))
    rng = np.random.default_rng(5)
    view = rng.normal(size=(2, 16, 6)).astype(np.float32)
    all_legal = {AGENT_VIEW: view[1], ACTION_MASK: np.ones((16, 9), bool)}
    actor_state = agent.actor.init_state(ActorIdentity(0, 1), 16, jax.random.PRNGKey(0))
    params = agent.learner.actor_params(state)
    q_next = np.asarray(agent.actor.greedy_act(params, all_legal, actor_state)[0])

    def priorities(mask_next):
        mask = np.stack([np.ones((16, 9), bool), mask_next])
        window = Rollout(
            obs={AGENT_VIEW: view, ACTION_MASK: mask},
            reward=np.ones((2, 16), np.float32),
            terminated=np.zeros((2, 16), bool),
            truncated=np.zeros((2, 16), bool),
            action=np.zeros((1, 16), np.int32),
            agent_extras={
                "replay_probability": np.full((1, 16), 0.01),
                "replay_count": np.full((1, 16), 100.0),
            },
            policy_version=np.zeros((1, 16), np.int32),
        )
        return np.asarray(jax.jit(agent.learner.update)(state, window)[2])

    everything = priorities(np.ones((16, 9), bool))
    keeps_best = np.zeros((16, 9), bool)
    keeps_best[np.arange(16), q_next] = True
    keeps_best[np.arange(16), (q_next + 1) % 9] = True
    np.testing.assert_allclose(priorities(keeps_best), everything, rtol=1e-5)
    without_best = ~keeps_best
    assert np.all(np.abs(priorities(without_best) - everything) > 1e-6)
