"""Rainbow's two halves on synthetic windows: what each update does with its state (targets,
schedules, run-time values), how the actor explores, and every Rainbow part switched off."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxrl_dist.agents.base import ActorIdentity, RunShape
from jaxrl_dist.agents.dqn import RainbowConfig, make_rainbow
from jaxrl_dist.envs import EnvSpec
from jaxrl_dist.networks import NetworkConfig
from jaxrl_dist.types import Rollout

SPEC = EnvSpec(obs_shape=(3,), obs_dtype=np.dtype("float32"), num_actions=4)
NET = NetworkConfig(hidden_sizes=(16,), activation="relu")
SHAPE = RunShape(total_env_steps=10_000, env_steps_per_update=10.0)  # 1,000 updates


def _agent(**overrides):
    config = RainbowConfig(**{"learning_rate": 1e-3, "num_atoms": 11, **overrides})
    return make_rainbow(config, NET, SPEC, SHAPE)


def _window(seed=0, n=3, batch=32, probability=None, terminal=False):
    """A random window; `terminal`: every episode ends after one step (a fixed target)."""
    rng = np.random.default_rng(seed)
    p = np.full(batch, 1 / 100) if probability is None else probability
    terminated = np.zeros((n + 1, batch), bool)
    terminated[1] = terminal
    return Rollout(
        obs=rng.normal(size=(n + 1, batch, 3)).astype(np.float32),
        reward=rng.normal(size=(n + 1, batch)).astype(np.float32),
        terminated=terminated,
        truncated=np.zeros((n + 1, batch), bool),
        action=rng.integers(0, 4, size=(n, batch)).astype(np.int32),
        agent_extras={
            "replay_probability": np.broadcast_to(p, (n, batch)).astype(np.float64),
            "replay_count": np.full((n, batch), 100.0),
        },
        policy_version=np.zeros((n, batch), np.int32),
    )


def _updates(agent, state, count, window=None):
    update = jax.jit(agent.learner.update)
    metrics = priorities = None
    for i in range(count):
        state, metrics, priorities = update(state, _window(i) if window is None else window)
    return state, metrics, priorities


def _same(a, b):
    return all(jax.tree.leaves(jax.tree.map(lambda x, y: bool(jnp.array_equal(x, y)), a, b)))


@pytest.mark.parametrize(
    "overrides",
    [
        {},
        {"double": False},
        {"dueling": False},
        {"num_atoms": 1},
        {"num_atoms": 1, "loss": "l2"},
        {"noisy": False, "epsilon": 0.1},
        {"target_update": "polyak"},
    ],
    ids=["rainbow", "no-double", "no-dueling", "no-c51", "no-c51-l2", "no-noisy", "polyak"],
)
def test_every_part_switched_off_still_learns_a_fixed_batch(overrides):
    """Each variant fits one repeated batch of one-step episodes (a target that does not move):
    its loss falls, priorities are finite."""
    agent = _agent(**overrides)
    state = agent.learner.init(jax.random.PRNGKey(0))
    window = _window(0, terminal=True)
    _, first, _ = _updates(agent, state, 1, window)
    state, last, priorities = _updates(agent, state, 150, window)
    assert float(last["loss"]) < 0.7 * float(first["loss"]), (first["loss"], last["loss"])
    assert priorities.shape == (32,) and np.all(np.isfinite(priorities)) and np.all(priorities >= 0)


def test_a_hard_target_copies_the_online_params_every_period():
    agent = _agent(target_period=3)
    state = agent.learner.init(jax.random.PRNGKey(1))
    assert _same(state.target_params, state.params["net"])
    state, _, _ = _updates(agent, state, 2)
    assert not _same(state.target_params, state.params["net"])
    state, _, _ = _updates(agent, state, 1)
    assert _same(state.target_params, state.params["net"])


def test_polyak_moves_the_target_by_tau():
    agent = _agent(target_update="polyak", target_tau=0.25)
    state = agent.learner.init(jax.random.PRNGKey(2))
    new, _, _ = _updates(agent, state, 1)
    expected = jax.tree.map(
        lambda t, o: 0.75 * t + 0.25 * o, state.target_params, new.params["net"]
    )
    jax.tree.map(
        lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-7),
        new.target_params,
        expected,
    )


def test_epsilon_and_beta_follow_their_schedules_and_run_time_values():
    agent = _agent(
        epsilon=0.1, epsilon_start=1.0, epsilon_decay_env_steps=100, importance_exponent=0.4
    )
    state = agent.learner.init(jax.random.PRNGKey(3))
    assert float(state.params["epsilon"]) == 1.0
    state, metrics, _ = _updates(agent, state, 5)  # 50 of 100 decay steps consumed
    np.testing.assert_allclose(state.params["epsilon"], 1.0 - 0.5 * 0.9, rtol=1e-6)
    np.testing.assert_allclose(metrics["importance_exponent"], 0.4 + 0.6 * 4 / 1000, rtol=1e-5)
    hparams = {**state.hparams, "epsilon": jnp.float32(0.3)}
    state, _, _ = _updates(agent, agent.learner.with_hparams(state, hparams), 10)
    np.testing.assert_allclose(state.params["epsilon"], 0.3, rtol=1e-6)


@pytest.mark.parametrize("anneal", [True, False])
def test_anneal_lr_decays_the_step_size_linearly_to_zero_over_the_run(anneal):
    config = RainbowConfig(learning_rate=1e-3, num_atoms=11, anneal_lr=anneal)
    agent = make_rainbow(config, NET, SPEC, RunShape(total_env_steps=40, env_steps_per_update=10))
    state = agent.learner.init(jax.random.PRNGKey(4))
    rates = []
    for i in range(5):  # the run has 4 updates: rates 1, 0.75, 0.5, 0.25, then 0
        before = state.params["net"]
        state, metrics, _ = _updates(agent, state, 1, _window(i))
        rates.append(float(metrics["learning_rate"]))
        assert _same(before, state.params["net"]) == (anneal and i == 4)
    want = [1e-3 * (1 - i / 4) for i in range(5)] if anneal else [1e-3] * 5
    np.testing.assert_allclose(rates, want, rtol=1e-6, atol=1e-12)


def test_n_step_is_the_window_by_default_and_lowered_at_run_time():
    agent = _agent()
    state = agent.learner.init(jax.random.PRNGKey(4))
    _, metrics, _ = _updates(agent, state, 1)
    assert float(metrics["return_steps_mean"]) == 3.0
    state = agent.learner.with_hparams(state, {**state.hparams, "n_step": jnp.float32(2)})
    _, metrics, _ = _updates(agent, state, 1)
    assert float(metrics["return_steps_mean"]) == 2.0


def test_importance_weights_scale_down_likely_transitions():
    agent = _agent(importance_exponent=1.0, anneal_importance=False)
    state = agent.learner.init(jax.random.PRNGKey(5))
    uniform = _updates(agent, state, 1)[1]["importance_weight_mean"]
    skewed = np.full(32, 0.5 / 31)
    skewed[0] = 0.5
    mean = _updates(agent, state, 1, _window(probability=skewed))[1]["importance_weight_mean"]
    assert float(uniform) == 1.0
    np.testing.assert_allclose(mean, (31 + (0.5 / 31) / 0.5) / 32, rtol=1e-5)


def _act(agent, epsilon, envs=256, seed=0):
    state = agent.learner.init(jax.random.PRNGKey(6))
    params = {**state.params, "epsilon": jnp.float32(epsilon)}
    actor_state = agent.actor.init_state(ActorIdentity(0, 1), envs, jax.random.PRNGKey(seed))
    obs = jnp.asarray(np.random.default_rng(seed).normal(size=(envs, 3)), jnp.float32)
    action, extras, _ = jax.jit(agent.actor.act)(params, obs, actor_state)
    greedy = agent.actor.greedy_act(params, obs, actor_state)[0]
    return np.asarray(action), np.asarray(greedy), extras


def test_epsilon_one_acts_uniformly_and_zero_greedily():
    agent = _agent(noisy=False)
    action, greedy, extras = _act(agent, 1.0, envs=4_000)
    assert extras == {}
    assert np.all(np.abs(np.bincount(action, minlength=4) / 4_000 - 0.25) < 0.03)
    action, greedy, _ = _act(agent, 0.0)
    np.testing.assert_array_equal(action, greedy)


def test_the_ladder_explores_less_along_the_envs():
    """epsilon 0.4, alpha 7: the first env explores at 0.4, the last at 0.4 ** 8 (~0.0007)."""
    agent = _agent(noisy=False, epsilon_alpha=7.0)
    differs = np.mean(
        [(lambda a, g, _: a != g)(*_act(agent, 0.4, seed=s, envs=64)) for s in range(60)], axis=0
    )
    assert differs[:8].mean() > 0.2 and differs[-8:].mean() < 0.02  # 3/4 of 0.4 vs ~0


def test_noisy_nets_explore_without_epsilon_and_act_greedily_without_noise():
    agent = _agent(noisy=True, sigma0=2.0)
    a0, greedy0, _ = _act(agent, 0.0, seed=0)
    a1, greedy1, _ = _act(agent, 0.0, seed=1)
    assert np.mean(a0 != greedy0) > 0.05  # the noise changes some choices
    state = agent.learner.init(jax.random.PRNGKey(6))
    obs = jnp.ones((8, 3))
    actor_state = agent.actor.init_state(ActorIdentity(0, 1), 8, jax.random.PRNGKey(0))
    greedy = [agent.actor.greedy_act(state.params, obs, actor_state)[0] for _ in range(2)]
    np.testing.assert_array_equal(*greedy)


def test_continuous_actions_are_refused_in_one_line():
    spec = SPEC._replace(num_actions=0, action_dim=2)
    with pytest.raises(ValueError, match="rainbow needs discrete actions"):
        make_rainbow(RainbowConfig(), NET, spec, SHAPE)


def test_a_warm_start_sets_the_target_network_too():
    agent = _agent()
    fresh = agent.learner.init(jax.random.PRNGKey(7))
    other = agent.learner.init(jax.random.PRNGKey(8)).params
    warm = agent.learner.with_params(fresh, other)
    assert _same(warm.params, other) and _same(warm.target_params, other["net"])
