"""An actor thread on a real async EnvPool (CartPole): rollout layout and episode boundaries."""

import queue
import threading

import jax
import numpy as np

from jaxrl_dist.acting.actor import Actor, ActorShared, ActorStats
from jaxrl_dist.acting.params_store import ParamsStore
from jaxrl_dist.acting.policy_client import LocalClient, jit_inference_step
from jaxrl_dist.agents.base import ActorIdentity, RunShape
from jaxrl_dist.agents.impala import ImpalaConfig, make_impala
from jaxrl_dist.envs import env_spec, make_env
from jaxrl_dist.networks import NetworkConfig
from jaxrl_dist.threads import put_until_stopped
from jaxrl_dist.types import assert_rollout_shapes


def _collect(num_rollouts, unroll=16, num_envs=8, batch=4):
    spec = env_spec("CartPole-v1", {})
    agent = make_impala(ImpalaConfig(), NetworkConfig(torso="mlp"), spec, RunShape(1, 1))
    device = jax.devices()[0]
    store = ParamsStore([device])

    def params(seed):  # the actor params of a fresh learner state
        return agent.learner.actor_params(agent.learner.init(jax.random.PRNGKey(seed)))

    store.publish(params(0), version=7)
    out, stop, stats = queue.Queue(maxsize=1), threading.Event(), ActorStats()
    core = agent.actor
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
    shared = ActorShared(
        lambda item: put_until_stopped(out, item, stop), stop, stats, unroll, batch
    )
    actor = Actor(0, lambda: make_env("CartPole-v1", {}, num_envs, batch, seed=3), client, shared)
    actor.start()
    items = [out.get(timeout=60) for _ in range(num_rollouts // 2)]
    store.publish(params(2), version=8)  # the learner moved on
    items += [out.get(timeout=60) for _ in range(num_rollouts - num_rollouts // 2)]
    assert {item.actor_index for item in items} == {0}  # queue items carry the actor's index
    assert all(item.env_actions is None for item in items)  # kept by lockstep actors only
    rollouts = [item.rollout for item in items]
    stop.set()
    actor.join(timeout=10)
    assert not actor.is_alive() and actor.error is None
    return rollouts, stats.drain()


def test_actor_rollouts_follow_envpool_autoreset():
    rollouts, stats = _collect(num_rollouts=12)
    saw_end = False
    for r in rollouts:
        assert_rollout_shapes(r)
        assert r.obs.shape == (17, 4, 4) and r.agent_extras["log_prob"].shape == (16, 4)
        assert np.isin(r.policy_version, (7, 8)).all()
        assert (np.diff(r.policy_version, axis=0) >= 0).all()  # versions never go back in time
        ended = r.terminated | r.truncated  # [T+1, B]
        # CartPole pays 1 per step; the step after an episode end is EnvPool's reset step: reward 0.
        np.testing.assert_array_equal(r.reward[1:], np.where(ended[:-1], 0.0, 1.0))
        saw_end |= bool(ended.any())
    assert saw_end, "a random CartPole policy ends episodes within 200 steps"
    assert (rollouts[-1].policy_version == 8).all()  # newer params were picked up
    assert stats["env_steps"] >= 12 * 16 * 4
    assert stats["episode_returns"] and min(stats["episode_returns"]) >= 8
