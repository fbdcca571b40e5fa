"""Recurrent policies: the learner's unroll from a stored state equals the actor's steps, the
state resets where an episode starts, and every runtime stores the state each segment starts
from (the Python actor with local or central inference, the XLA actor loop, Anakin)."""

import queue
import threading

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxrl_dist.acting.actor import Actor, ActorShared, ActorStats
from jaxrl_dist.acting.inference_server import InferenceServer
from jaxrl_dist.acting.params_store import ParamsStore
from jaxrl_dist.acting.policy_client import LocalClient, jit_inference_step
from jaxrl_dist.acting.server_client import ServerClient, ServerHandle
from jaxrl_dist.acting.xla_actor import make_unroll
from jaxrl_dist.agents.base import ActorIdentity, RunShape
from jaxrl_dist.agents.common import make_policy_model, sampling_actor, sequence_inputs
from jaxrl_dist.agents.ppo import PPOConfig, make_ppo
from jaxrl_dist.anakin.program import Program
from jaxrl_dist.envs import env_spec, make_env
from jaxrl_dist.envs.jax_envs import make_jax_env
from jaxrl_dist.networks import NetworkConfig
from jaxrl_dist.threads import put_until_stopped
from jaxrl_dist.types import Rollout, assert_rollout_shapes

HIDDEN_VELOCITY = {"obs_indices": (0, 2)}
SPEC = env_spec("CartPole-v1", HIDDEN_VELOCITY)
T, B = 12, 5


def _model(core="lstm", shared=True):
    width = 16 if core != "none" else 128  # the core's width, read only with a core
    config = NetworkConfig(
        torso="mlp", hidden_sizes=(8,), core=core, core_size=width, shared_torso=shared
    )
    return make_policy_model(config, SPEC)


def _sequence(seed=0):
    """obs `[T, B, 2]` and episode starts `[T, B]`: about one in five steps starts an episode."""
    rng = np.random.default_rng(seed)
    obs = rng.normal(size=(T, B, 2)).astype(np.float32)
    first = rng.random((T, B)) < 0.2
    first[0] = [True, False, True, False, False]
    return jnp.asarray(obs), jnp.asarray(first)


def _act_step_by_step(model, params, obs, first):
    """The actor's way: reset where `first`, one `act` per step. -> (the core state row 0
    acted from, actions `[T, B]`, behaviour log-probs `[T, B]`)."""
    actor = sampling_actor(model)
    state = actor.init_state(ActorIdentity(0, 1), B, jax.random.PRNGKey(3))
    # Carry a non-zero state in, as mid-episode segments do.
    state["core"] = jax.tree.map(lambda x: x + 0.5, state["core"])
    actions, log_probs, core0 = [], [], None
    start_episodes, act = jax.jit(actor.start_episodes), jax.jit(actor.act)  # as an actor runs
    for t in range(T):
        state = start_episodes(state, first[t])
        if t == 0:
            core0 = actor.core_state(state)
        action, extras, state = act(params, obs[t], state)
        actions.append(action)
        log_probs.append(extras["log_prob"])
    return core0, jnp.stack(actions), jnp.stack(log_probs)


def _rollout(obs, first, action, log_prob, core0):
    """The rollout an actor would store: `terminated[t]` where `obs[t + 1]` starts an episode."""
    ended = jnp.concatenate([first[1:], jnp.zeros((2, B), bool)])  # [T + 1]
    obs = jnp.concatenate([obs, obs[-1:]])
    return Rollout(
        obs,
        jnp.zeros((T + 1, B)),
        ended,
        jnp.zeros_like(ended),
        action,
        {"log_prob": log_prob},
        jnp.zeros((T, B), jnp.int32),
        jax.tree.map(lambda x: x[None], core0),
    )


LEAKY = "user_networks:leaky_memory"  # a cell of the user's own (`network.core`), a dict carry


@pytest.mark.parametrize(
    "core,shared", [("lstm", True), ("gru", True), ("lstm", False), (LEAKY, False)]
)
def test_the_learner_unroll_from_the_stored_state_equals_the_actor_steps(core, shared):
    model = _model(core, shared)
    params, unroll = jax.jit(model.init)(jax.random.PRNGKey(0)), jax.jit(model.unroll)
    obs, first = _sequence()
    core0, action, log_prob = _act_step_by_step(model, params, obs, first)
    rollout = _rollout(obs, first, action, log_prob, core0)
    assert_rollout_shapes(rollout)
    learner_first, start = sequence_inputs(rollout)
    np.testing.assert_array_equal(learner_first[1:T], first[1:])  # row 0 had its reset
    policy, _, _ = unroll(params, rollout.obs, learner_first, start)
    replayed = model.dist.log_prob(policy[:T], action)
    np.testing.assert_allclose(replayed, log_prob, atol=1e-5)
    # and it depends on the stored state: from zeros the first steps differ
    zeros = model.initial_core_state(B)
    policy0, _, _ = unroll(params, rollout.obs, learner_first, zeros)
    assert np.abs(np.asarray(policy0[0] - policy[0]))[1].max() > 1e-4  # env 1 did not reset


@pytest.mark.parametrize("core", ["lstm", LEAKY])
def test_a_reset_inside_a_segment_forgets_everything_before_it(core):
    """Where an episode starts, the state goes back to where an episode starts (zeros for the
    LSTM, the user's cell's own `initialize_carry`, which is not zeros)."""
    model = _model(core)
    params, unroll = jax.jit(model.init)(jax.random.PRNGKey(1)), jax.jit(model.unroll)
    obs, _ = _sequence(1)
    first = jnp.zeros((T, B), bool).at[5, 0].set(True)
    carried = jax.tree.map(lambda x: x + 1.0, model.initial_core_state(B))
    policy, values, _ = unroll(params, obs, first, carried)
    fresh, fresh_values, _ = unroll(params, obs[5:], first[5:], model.initial_core_state(B))
    np.testing.assert_allclose(policy[5:, 0], fresh[:, 0], atol=1e-6)
    np.testing.assert_allclose(values[5:, 0], fresh_values[:, 0], atol=1e-6)
    # without the reset, the past shows: env 1 carries its state through step 5
    assert np.abs(np.asarray(policy[5:, 1] - fresh[:, 1])).max() > 1e-4


def test_without_a_core_unroll_is_apply_and_the_state_is_empty():
    model = _model("none")
    params = model.init(jax.random.PRNGKey(0))
    obs, first = _sequence()
    policy, values, state = model.unroll(params, obs, first, {})
    want_policy, want_values = model.apply(params, obs)
    np.testing.assert_array_equal(policy, want_policy)
    np.testing.assert_array_equal(values, want_values)
    actor = sampling_actor(model)
    actor_state = actor.init_state(ActorIdentity(0, 1), B, jax.random.PRNGKey(0))
    assert state == {} and set(actor_state) == {"key"} and actor.core_state(actor_state) == {}


def _check_segments(model, params, rollouts):
    """Every rollout replays exactly: the learner's unroll from `core_state` gives the
    behaviour log-probs the actor stored, across episode starts inside segments."""
    starts_inside = starts_at_0 = 0
    for rollout in rollouts:
        rollout = jax.tree.map(jnp.asarray, rollout)
        assert_rollout_shapes(rollout)
        first, start = sequence_inputs(rollout)
        policy, _, _ = model.unroll(params, rollout.obs, first, start)
        replayed = model.dist.log_prob(jax.tree.map(lambda x: x[:-1], policy), rollout.action)
        np.testing.assert_allclose(replayed, rollout.agent_extras["log_prob"], atol=2e-5)
        starts_inside += int(first[1:-1].sum())
        # CartPole pays 1 a step and 0 on a reset: a segment whose obs[0] starts an episode
        # stored the state after its reset, zeros
        at_start = np.asarray(rollout.reward[0]) == 0
        for leaf in jax.tree.leaves(rollout.core_state):
            assert np.all(np.asarray(leaf)[0, at_start] == 0)
        starts_at_0 += int(at_start.sum())
    assert starts_inside > 0, "CartPole's short random episodes end inside segments"
    assert starts_at_0 > 0, "some segments start with an episode"
    assert any(np.abs(np.asarray(jax.tree.leaves(r.core_state)[0])).max() > 0 for r in rollouts)


def _python_actor_rollouts(model, params, central: bool, num_rollouts=6):
    core, device = sampling_actor(model), jax.devices()[0]
    store = ParamsStore([device])
    store.publish(params, version=1)
    out, stop, num_envs = queue.Queue(maxsize=2), threading.Event(), 8
    if central:
        server = InferenceServer(
            index=0,
            core=core,
            store=store,
            device=device,
            slots=1,
            envs_per_slot=num_envs,
            max_batch=8,
            timeout_ms=5.0,
            broadcast_period=1,
            stop=stop,
        )
        server.start()
        client = ServerClient(
            ServerHandle(server), 0, ActorIdentity(0, 1), jax.random.PRNGKey(1), stop
        )
    else:
        client = LocalClient(
            step=jit_inference_step(core),
            core=core,
            store=store,
            device=device,
            identity=ActorIdentity(0, 1),
            num_envs=num_envs,
            key=jax.random.PRNGKey(1),
            stop=stop,
        )
    shared = ActorShared(lambda item: put_until_stopped(out, item, stop), stop, ActorStats(), 16, 4)
    make = lambda: make_env("CartPole-v1", HIDDEN_VELOCITY, num_envs, 4, seed=3)  # noqa: E731
    actor = Actor(0, make, client, shared)
    actor.start()
    try:
        return [out.get(timeout=60).rollout for _ in range(num_rollouts)]
    finally:
        stop.set()
        actor.join(timeout=10)
        assert actor.error is None


@pytest.mark.parametrize("central", [False, True], ids=["local", "inference_server"])
def test_python_actor_segments_replay_exactly_on_the_learner(central):
    model = _model("lstm", shared=False)
    params = model.init(jax.random.PRNGKey(2))
    _check_segments(model, params, _python_actor_rollouts(model, params, central))


def test_xla_actor_segments_replay_exactly_on_the_learner():
    spec = env_spec("CartPole-v1", {})  # the XLA loop sees the whole observation
    config = NetworkConfig(torso="mlp", hidden_sizes=(8,), core="gru", core_size=16)
    model = make_policy_model(config, spec)
    core, params = sampling_actor(model), model.init(jax.random.PRNGKey(4))
    # two env groups stepped in turn (env_groups_per_actor=2): each keeps its envs' memory
    envs = [make_env("CartPole-v1", {}, 4, 4, seed=5 + 4 * g) for g in range(2)]
    xla = [env.xla() for env in envs]
    start, unroll = make_unroll(
        core,
        [(recv, send) for _, recv, send, _ in xla],
        unroll_length=16,
        width=8,
        action_dtype=envs[0].spec._action_spec[-1][0],
    )
    for env in envs:
        env.async_reset()
    state = core.init_state(ActorIdentity(0, 1), 8, jax.random.PRNGKey(6))
    handles, carry = jax.jit(start)(tuple(h for h, *_ in xla), state)
    rollouts, unroll = [], jax.jit(unroll)
    for _ in range(3):
        handles, carry, out = unroll(params, handles, carry)
        rollouts += [r._replace(policy_version=jnp.zeros((16, 8), jnp.int32)) for r in out.rollouts]
    for env in envs:
        env.close()
    _check_segments(model, params, rollouts)


def test_anakin_segments_replay_exactly_on_the_learner():
    env = make_jax_env("CartPole-v1", HIDDEN_VELOCITY)
    config = NetworkConfig(torso="mlp", hidden_sizes=(8,), core="lstm", core_size=16)
    agent = make_ppo(PPOConfig(), config, env.spec, RunShape(1, 1))
    program = Program(agent, env, num_envs=8, unroll_length=16)
    carry = program.init(jnp.uint32(7))
    params = agent.learner.actor_params(carry.learner)
    unroll = jax.jit(program.unroll)
    acting, rollouts = carry.acting, []
    for version in range(4):
        acting, rollout, _, _ = unroll(params, acting, jnp.int32(version), ())
        rollouts.append(rollout)
    _check_segments(make_policy_model(config, env.spec), params, rollouts)
