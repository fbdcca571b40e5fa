"""The SAC and TD3 losses (`jaxrl_dist.ops.continuous_control`) against references written from
the papers in numpy on a fixed batch, and a whole DDPG update (TD3 with its three additions
off) against one written from Lillicrap et al. 2016's Algorithm 1 with optax."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from jaxrl_dist import ops
from jaxrl_dist.agents.base import ActorIdentity, RunShape
from jaxrl_dist.agents.off_policy import ContinuousModel
from jaxrl_dist.agents.sac import SACConfig, make_sac
from jaxrl_dist.agents.td3 import TD3Config, make_td3
from jaxrl_dist.envs import EnvSpec
from jaxrl_dist.networks import NetworkConfig
from jaxrl_dist.types import Rollout

B, E, D = 7, 2, 3
RNG = np.random.default_rng(0)
Q_TM1 = RNG.normal(size=(E, B)).astype(np.float32)
Q_T = RNG.normal(size=(E, B)).astype(np.float32)
R_T = RNG.normal(size=B).astype(np.float32)
DISCOUNT_T = np.where(RNG.random(B) < 0.3, 0.0, 0.99).astype(np.float32)
LOG_PI = RNG.normal(size=B).astype(np.float32)
ALPHA = 0.3

SPEC = EnvSpec(
    obs_shape=(4,),
    obs_dtype=np.dtype("float64"),
    num_actions=0,
    action_dim=D,
    action_low=(-2.0,) * D,
    action_high=(2.0,) * D,
)
NET = NetworkConfig(hidden_sizes=(16, 16), activation="relu")
SHAPE = RunShape(total_env_steps=1_000, env_steps_per_update=1.0)


def test_sac_critic_loss_is_the_papers_soft_bellman_residual():
    """Eq. 5 with the clipped double-Q: each critic's half squared error to `r + gamma (min Q'
    - alpha log pi')`, summed over the critics."""
    y = R_T + DISCOUNT_T * (np.minimum(Q_T[0], Q_T[1]) - ALPHA * LOG_PI)
    want = 0.5 * (Q_TM1[0] - y) ** 2 + 0.5 * (Q_TM1[1] - y) ** 2
    got = ops.sac_critic_loss(Q_TM1, R_T, DISCOUNT_T, Q_T, LOG_PI, ALPHA)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_sac_actor_and_temperature_losses_are_the_papers():
    """Eq. 7: `alpha log pi - min Q`; eq. 18: `-alpha (log pi + target entropy)`, whose
    gradient in log alpha raises alpha while the entropy is below the target."""
    np.testing.assert_allclose(
        ops.sac_actor_loss(Q_TM1, LOG_PI, ALPHA), ALPHA * LOG_PI - Q_TM1.min(0), rtol=1e-6
    )
    log_alpha, target_entropy = np.float32(np.log(ALPHA)), -float(D)
    want = -ALPHA * (LOG_PI + target_entropy)
    got = ops.sac_temperature_loss(jnp.asarray(log_alpha), LOG_PI, target_entropy)
    np.testing.assert_allclose(got, want, rtol=1e-5)
    low_entropy = np.full(B, 5.0, np.float32)  # log pi = 5: entropy -5 < -3
    grad = jax.grad(lambda a: ops.sac_temperature_loss(a, low_entropy, target_entropy).mean())
    assert float(grad(jnp.asarray(log_alpha))) < 0  # gradient descent raises alpha


def test_sac_losses_do_not_train_the_temperature_or_the_target():
    """The critic loss has no gradient in alpha or the target critics; the actor loss none in
    alpha (the temperature is learned by its own loss alone)."""
    critic = lambda q_t, a: ops.sac_critic_loss(Q_TM1, R_T, DISCOUNT_T, q_t, LOG_PI, a).sum()  # noqa: E731
    g_q_t, g_alpha = jax.grad(critic, argnums=(0, 1))(jnp.asarray(Q_T), jnp.float32(ALPHA))
    assert not np.any(np.asarray(g_q_t)) and float(g_alpha) == 0.0
    actor = lambda a: ops.sac_actor_loss(Q_TM1, LOG_PI, a).sum()  # noqa: E731
    assert float(jax.grad(actor)(jnp.float32(ALPHA))) == 0.0


def test_td3_critic_loss_is_clipped_double_q_and_one_critic_is_ddpg():
    y = R_T + DISCOUNT_T * np.minimum(Q_T[0], Q_T[1])
    want = 0.5 * ((Q_TM1[0] - y) ** 2 + (Q_TM1[1] - y) ** 2)
    got = ops.td3_critic_loss(Q_TM1, R_T, DISCOUNT_T, Q_T)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    y1 = R_T + DISCOUNT_T * Q_T[0]
    got1 = ops.td3_critic_loss(Q_TM1[:1], R_T, DISCOUNT_T, Q_T[:1])
    np.testing.assert_allclose(got1, 0.5 * (Q_TM1[0] - y1) ** 2, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(ops.deterministic_actor_loss(Q_TM1[0]), -Q_TM1[0])


def test_target_smoothing_clips_the_noise_then_the_action():
    """Eq. 14: `clip(a + clip(eps, -c, c), -1, 1)`, eps ~ N(0, sigma^2) drawn from the key."""
    a_t = RNG.uniform(-1, 1, size=(B, D)).astype(np.float32)
    key = jax.random.PRNGKey(3)
    eps = 0.7 * np.asarray(jax.random.normal(key, (B, D), jnp.float32))
    want = np.clip(a_t + np.clip(eps, -0.5, 0.5), -1.0, 1.0)
    got = ops.smoothed_target_action(a_t, key, 0.7, 0.5)
    np.testing.assert_allclose(got, want, rtol=1e-6)
    assert np.any(np.abs(eps) > 0.5) and np.any(np.abs(got) == 1.0)  # both clips were used
    np.testing.assert_array_equal(ops.smoothed_target_action(a_t, key, 0.0, 0.5), a_t)


def _window(batch=32, terminal_every=3):
    """A random one-step window `[2, B]`: obs, an action in [-1, 1], a reward; every
    `terminal_every`-th transition ends its episode."""
    rng = np.random.default_rng(1)
    terminated = np.zeros((2, batch), bool)
    terminated[1, ::terminal_every] = True
    return Rollout(
        obs=rng.normal(size=(2, batch, 4)),
        reward=rng.normal(size=(2, batch)).astype(np.float32),
        terminated=terminated,
        truncated=np.zeros((2, batch), bool),
        action=rng.uniform(-1, 1, size=(1, batch, D)).astype(np.float32),
        agent_extras={},
        policy_version=np.zeros((1, batch), np.int32),
    )


def test_a_ddpg_update_is_algorithm_1_of_the_paper():
    """TD3 with one critic, no delay and no smoothing, one update on a fixed batch, equals
    DDPG written from Lillicrap et al. 2016 (Algorithm 1) with optax: the critic regressed on
    `r + gamma Q'(s', mu'(s'))`, the policy ascending `Q(s, mu(s))` of the updated critic,
    then both targets moved by tau."""
    lr, tau, gamma = 1e-3, 0.05, 0.99
    config = TD3Config(
        actor_learning_rate=lr,
        critic_learning_rate=lr,
        target_tau=tau,
        num_critics=1,
        policy_delay=1,
        target_noise=0.0,
        discount=gamma,
    )
    agent = make_td3(config, NET, SPEC, SHAPE)
    state = agent.learner.init(jax.random.PRNGKey(0))
    # Targets apart from the online nets, so the test tells them apart.
    state = state._replace(
        targets=jax.tree.map(lambda x: x + 0.1, state.targets),
    )
    window = _window()
    new, metrics, priorities = jax.jit(agent.learner.update)(state, window)

    model = ContinuousModel.build(NET, SPEC, gaussian=False, num_critics=1)  # the same modules
    policy_net, critic_net = model.policy.apply, model.critics.apply
    s, a = jnp.asarray(window.obs[0], jnp.float32), jnp.asarray(window.action[0])
    s2 = jnp.asarray(window.obs[1], jnp.float32)
    r, done = jnp.asarray(window.reward[1]), jnp.asarray(window.terminated[1])
    mu_target, q_target = state.targets["policy"], state.targets["critic"]
    y = r + gamma * (1.0 - done) * critic_net(q_target, s2, policy_net(mu_target, s2))[0]

    def critic_loss(q):
        return jnp.mean(0.5 * (critic_net(q, s, a)[0] - jax.lax.stop_gradient(y)) ** 2)

    adam = optax.adam(lr, eps=1e-8)
    q_grads = jax.grad(critic_loss)(state.critic_params)
    q_updates, _ = adam.update(q_grads, adam.init(state.critic_params))
    q_new = optax.apply_updates(state.critic_params, q_updates)

    def actor_loss(mu):
        return -jnp.mean(critic_net(q_new, s, policy_net(mu, s))[0])

    mu = state.params["policy"]
    mu_updates, _ = adam.update(jax.grad(actor_loss)(mu), adam.init(mu))
    mu_new = optax.apply_updates(mu, mu_updates)
    soft = lambda online, target: jax.tree.map(lambda o, t: tau * o + (1 - tau) * t, online, target)  # noqa: E731

    close = lambda x, y: np.testing.assert_allclose(x, y, rtol=2e-5, atol=2e-6)  # noqa: E731
    jax.tree.map(close, new.critic_params, q_new)
    jax.tree.map(close, new.params["policy"], mu_new)
    jax.tree.map(close, new.targets["critic"], soft(q_new, q_target))
    jax.tree.map(close, new.targets["policy"], soft(mu_new, mu_target))
    np.testing.assert_allclose(metrics["critic_loss"], critic_loss(state.critic_params), rtol=1e-5)
    np.testing.assert_array_equal(priorities, np.ones(32, np.float32))  # uniform replay


@pytest.mark.parametrize("policy_delay", [2, 3])
def test_td3_moves_the_policy_and_the_targets_every_policy_delay_updates(policy_delay):
    agent = make_td3(TD3Config(policy_delay=policy_delay), NET, SPEC, SHAPE)
    state = agent.learner.init(jax.random.PRNGKey(0))
    update = jax.jit(agent.learner.update)
    moved = []
    for _ in range(2 * policy_delay):
        new, _, _ = update(state, _window())
        changed = lambda a, b: not np.array_equal(a, b)  # noqa: E731
        moved.append(
            (
                any(
                    jax.tree.leaves(
                        jax.tree.map(changed, new.params["policy"], state.params["policy"])
                    )
                ),
                any(jax.tree.leaves(jax.tree.map(changed, new.targets, state.targets))),
            )
        )
        state = new
    due = [(i + 1) % policy_delay == 0 for i in range(2 * policy_delay)]
    assert moved == [(d, d) for d in due]


def test_sac_learns_its_temperature_toward_the_target_entropy():
    """A fixed batch of one-step episodes: the critic loss falls, and with a target entropy
    far above the policy's the temperature rises; with autotune off it stays put."""
    window = _window(terminal_every=1)
    for autotune, target_entropy in ((True, 10.0), (False, None)):
        config = SACConfig(
            autotune=autotune, target_entropy=target_entropy, alpha=0.5, critic_learning_rate=3e-3
        )
        agent = make_sac(config, NET, SPEC, SHAPE)
        state = agent.learner.init(jax.random.PRNGKey(0))
        update = jax.jit(agent.learner.update)
        state, first, _ = update(state, window)
        for _ in range(100):
            state, last, _ = update(state, window)
        assert float(last["critic_loss"]) < 0.5 * float(first["critic_loss"])
        if autotune:
            assert float(last["alpha"]) > 0.5 > 0
        else:
            assert float(last["alpha"]) == pytest.approx(0.5)


@pytest.mark.parametrize("make", ["sac", "td3"])
def test_minibatches_are_that_many_updates_in_one_call(make):
    """`minibatches=4` on a batch of 4 x 8: the same state as four updates of one minibatch
    each (rows j * 4 + k in minibatch k), the priorities back in the batch's row order."""
    algo = {"sac": (SACConfig, make_sac), "td3": (TD3Config, make_td3)}[make]
    one = algo[1](algo[0](prioritized=True), NET, SPEC, SHAPE)
    four = algo[1](algo[0](prioritized=True, minibatches=4), NET, SPEC, SHAPE)
    state = one.learner.init(jax.random.PRNGKey(0))
    window = _window(batch=32)
    window = window._replace(
        agent_extras={
            "replay_probability": np.full((1, 32), 0.01),
            "replay_count": np.full((1, 32), 100.0),
        }
    )
    scanned, _, priorities = jax.jit(four.learner.update)(state, window)
    step, expected = jax.jit(one.learner.update), np.zeros(32, np.float32)
    for k in range(4):
        part = jax.tree.map(lambda x, k=k: np.asarray(x)[:, k::4], window)
        state, _, p = step(state, part)
        expected[k::4] = p
    close = lambda x, y: np.testing.assert_allclose(x, y, rtol=1e-5, atol=1e-6)  # noqa: E731
    jax.tree.map(close, scanned, state)
    close(priorities, expected)
    assert int(scanned.update_step) == 4


def test_the_warm_up_acts_uniformly_in_the_box_until_the_first_update():
    """Before the first update every env acts uniformly in [-1, 1]^D; after it TD3 without
    noise acts `mu(s)`, the same for the same observations; the env gets the box's bounds."""
    agent = make_td3(TD3Config(exploration_noise=0.0), NET, SPEC, SHAPE)
    state = agent.learner.init(jax.random.PRNGKey(0))
    actor_state = agent.actor.init_state(ActorIdentity(0, 1), 512, jax.random.PRNGKey(1))
    obs = np.zeros((512, 4), np.float32)
    act = jax.jit(agent.actor.act)
    warm, _, _ = act(state.params, obs, actor_state)
    assert np.all(np.abs(warm) <= 1) and np.std(warm) > 0.5  # uniform on [-1, 1]: std 0.58
    state, _, _ = jax.jit(agent.learner.update)(state, _window())
    sampled, _, _ = act(state.params, obs, actor_state)
    assert float(state.params["uniform"]) == 0.0
    np.testing.assert_allclose(sampled, np.broadcast_to(sampled[0], sampled.shape))
    np.testing.assert_allclose(agent.actor.env_action(np.array([[-1.0, 0.0, 1.0]])), [[-2, 0, 2]])


def test_a_sac_update_is_the_papers_with_the_same_draws():
    """One SAC update on a fixed batch (terminal and non-terminal transitions, targets apart
    from the online critics) equals SAC written from Haarnoja et al. 2018 with optax and the
    same random draws: the soft target from the target critics at an action the current
    policy samples, the critics' step, the reparameterised policy step against the updated
    critics, the temperature step toward -|A|, the critics' targets moved by tau."""
    lr, tau, gamma = 1e-3, 0.05, 0.99
    config = SACConfig(
        actor_learning_rate=lr, critic_learning_rate=lr, alpha_learning_rate=lr, target_tau=tau
    )
    agent = make_sac(config, NET, SPEC, SHAPE)
    state = agent.learner.init(jax.random.PRNGKey(0))
    state = state._replace(targets=jax.tree.map(lambda x: x + 0.1, state.targets))
    window = _window()
    new, _, _ = jax.jit(agent.learner.update)(state, window)

    model = ContinuousModel.build(NET, SPEC, gaussian=True, num_critics=2)
    s, a = jnp.asarray(window.obs[0], jnp.float32), jnp.asarray(window.action[0])
    s2 = jnp.asarray(window.obs[1], jnp.float32)
    r, done = jnp.asarray(window.reward[1]), jnp.asarray(window.terminated[1], jnp.float32)
    _, critic_key, actor_key = jax.random.split(state.rng, 3)

    def sample(policy, obs, key):  # tanh(u), log pi of tanh(u) (the naive change of variables)
        dist = model.policy.apply(policy, obs)
        std = jnp.exp(dist["log_std"])
        u = dist["mean"] + std * jax.random.normal(key, dist["mean"].shape)
        log_n = -0.5 * ((u - dist["mean"]) / std) ** 2 - jnp.log(std) - 0.5 * jnp.log(2 * jnp.pi)
        return jnp.tanh(u), jnp.sum(log_n - jnp.log(1 - jnp.tanh(u) ** 2), -1)

    alpha = 1.0  # exp(log_alpha = 0)
    a2, log_pi2 = sample(state.params["policy"], s2, critic_key)
    q_next = model.critics.apply(state.targets["critic"], s2, a2).min(0)
    y = jax.lax.stop_gradient(r + gamma * (1 - done) * (q_next - alpha * log_pi2))
    adam = optax.adam(lr, eps=1e-8)

    def critic_loss(q):
        return jnp.mean(jnp.sum(0.5 * (model.critics.apply(q, s, a) - y) ** 2, 0))

    q = state.critic_params
    q_step, _ = adam.update(jax.grad(critic_loss)(q), adam.init(q))
    q_new = optax.apply_updates(q, q_step)

    def actor_loss(pi):
        action, log_pi = sample(pi, s, actor_key)
        return jnp.mean(alpha * log_pi - model.critics.apply(q_new, s, action).min(0)), log_pi

    pi = state.params["policy"]
    grads, log_pi = jax.grad(actor_loss, has_aux=True)(pi)
    pi_step, _ = adam.update(grads, adam.init(pi))
    pi_new = optax.apply_updates(pi, pi_step)
    temperature = lambda la: jnp.mean(-jnp.exp(la) * jax.lax.stop_gradient(log_pi - D))  # noqa: E731
    la = jnp.zeros((), jnp.float32)
    la_step, _ = adam.update(jax.grad(temperature)(la), adam.init(la))
    soft = lambda o, t: jax.tree.map(lambda x, z: tau * x + (1 - tau) * z, o, t)  # noqa: E731

    close = lambda x, y: np.testing.assert_allclose(x, y, rtol=2e-4, atol=2e-5)  # noqa: E731
    jax.tree.map(close, new.critic_params, q_new)
    jax.tree.map(close, new.params["policy"], pi_new)
    close(new.log_alpha, optax.apply_updates(la, la_step))
    jax.tree.map(close, new.targets["critic"], soft(q_new, state.targets["critic"]))
    assert np.any(np.asarray(window.terminated[1])) and not np.all(window.terminated[1])


def test_a_warm_start_takes_the_policy_and_keeps_this_runs_warm_up_and_noise():
    agent = make_td3(TD3Config(exploration_noise=0.3), NET, SPEC, SHAPE)
    state = agent.learner.init(jax.random.PRNGKey(0))
    other = make_td3(TD3Config(exploration_noise=0.05), NET, SPEC, SHAPE)
    trained = other.learner.init(jax.random.PRNGKey(1))
    trained, _, _ = jax.jit(other.learner.update)(trained, _window())  # its warm-up is over
    warm = agent.learner.with_params(state, trained.params)
    jax.tree.map(np.testing.assert_array_equal, warm.params["policy"], trained.params["policy"])
    jax.tree.map(np.testing.assert_array_equal, warm.targets["policy"], trained.params["policy"])
    assert float(warm.params["uniform"]) == 1.0
    assert float(warm.params["noise"]) == pytest.approx(0.3)
