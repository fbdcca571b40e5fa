"""The prioritized data flow through the real trainer: a small n-step Q-learning agent registered
with `data="prioritized"` learns from n-step windows, weights its loss by importance, and hands
its TD errors back as priorities, which the trainer returns to the replay. Nothing outside this
file knows the agent exists."""

from __future__ import annotations

import dataclasses
import json
import os

import jax
import jax.numpy as jnp
import optax
import pytest
from q_agent_parts import QNetwork, QState

from jaxrl_dist import agents, ops
from jaxrl_dist.agents.base import ActorCore, Agent, AgentEntry, LearnerCore
from jaxrl_dist.agents.common import transitions
from jaxrl_dist.config import ConfigError, build_config
from jaxrl_dist.run.trainer import Trainer


@dataclasses.dataclass(frozen=True)
class NStepQConfig:
    learning_rate: float = 1e-3
    discount: float = 0.99
    target_period: int = 20
    epsilon: float = 0.1
    importance_exponent: float = 0.5


def make_agent(config: NStepQConfig, network_config, env_spec, run_shape, priorities=True):
    net = QNetwork(env_spec.num_actions)
    optimizer = optax.adam(config.learning_rate)

    def init_state(identity, num_envs, key):
        return {"key": jax.random.split(key, num_envs)}

    def act(params, obs, state):
        q = net.apply(params, obs)
        keys = jax.vmap(lambda k: jax.random.split(k, 3))(state["key"])
        explore = jax.vmap(jax.random.uniform)(keys[:, 1]) < config.epsilon
        random = jax.vmap(lambda k: jax.random.randint(k, (), 0, q.shape[-1]))(keys[:, 2])
        action = jnp.where(explore, random, jnp.argmax(q, -1)).astype(jnp.int32)
        return action, {}, {"key": keys[:, 0]}

    def greedy_act(params, obs, state):
        return jnp.argmax(net.apply(params, obs), -1).astype(jnp.int32), state

    def init(key):
        params = net.init(key, jnp.zeros((1, *env_spec.obs_shape), jnp.float32))
        return QState(params, params, optimizer.init(params), jnp.zeros((), jnp.int32))

    def loss(params, target_params, window):
        """Double Q-learning toward the n-step return of each window's first transition,
        weighted by `(count * probability) ** -beta` over its batch maximum."""
        q = net.apply(params, window.obs)  # [n + 1, B, A]
        q_target = net.apply(target_params, window.obs)
        v = jnp.take_along_axis(q_target, jnp.argmax(q, -1)[..., None], -1)[..., 0]
        r_t, discount_t, _ = transitions(window, v, config.discount)  # [n, B]
        n = window.action.shape[0]
        g = ops.n_step_bootstrapped_returns(r_t, discount_t, v[1:], n, stop_target_gradients=True)
        q_tm1 = jnp.take_along_axis(q[0], window.action[0][:, None], -1)[:, 0]
        td = g[0] - q_tm1
        extras = window.agent_extras
        w = (extras["replay_count"][0] * extras["replay_probability"][0]) ** (
            -config.importance_exponent
        )
        w = w / jnp.max(w)
        return jnp.mean(w * optax.huber_loss(td)), (td, jnp.mean(w))

    def update(state: QState, window):
        (value, (td, weight_mean)), grads = jax.value_and_grad(loss, has_aux=True)(
            state.params, state.target_params, window
        )
        updates, opt_state = optimizer.update(grads, state.opt_state, state.params)
        params = optax.apply_updates(state.params, updates)
        step = state.update_step + 1
        target = optax.periodic_update(params, state.target_params, step, config.target_period)
        metrics = {"loss": value, "weight_mean": weight_mean}
        return QState(params, target, opt_state, step), metrics, jnp.abs(td)

    learner = LearnerCore(init, update, priorities=priorities)
    return Agent(ActorCore(init_state, act, greedy_act), learner)


agents.register("test_nstep_q", AgentEntry(NStepQConfig, make_agent, data="prioritized"))
agents.register(
    "test_nstep_q_no_priorities",
    AgentEntry(NStepQConfig, lambda *a: make_agent(*a, priorities=False), data="prioritized"),
)


def _config(**overrides):
    raw = {
        "algorithm": "test_nstep_q",
        "env_id": "CartPole-v1",
        "seed": 1,
        "sebulba": {"num_actor_threads": 2, "envs_per_actor": 8, "env_threads_per_actor": 1},
        "unroll_length": 8,
        "batch_size": 64,
        "total_env_steps": 12_000,
        "eval_every_updates": 100,
        "eval_episodes": 4,
        "checkpoint_every_updates": 0,
        "log_every_updates": 10,
        "learning_curve": False,
        "replay": {"capacity": 8_000, "min_size": 256, "samples_per_insert": 4.0, "n_step": 3},
        **overrides,
    }
    return build_config(raw, NStepQConfig)


def test_priorities_flow_back_from_the_learner_to_the_replay(tmp_path):
    work = str(tmp_path / "run")
    result = Trainer(_config(), work, quiet=True).run()
    summary = result.summary
    assert summary["stop_reason"] == "total_env_steps reached"
    # 64 transitions per update, each inserted transition sampled ~4 times: ~16 env steps each.
    assert 0.6 < result.updates * 64 / 4 / result.env_steps < 1.6
    with open(os.path.join(work, "metrics.jsonl")) as f:
        logs = [json.loads(line) for line in f]
    weights = [x["losses/weight_mean"] for x in logs if "losses/weight_mean" in x]
    # Equal priorities give every weight 1; below 1 only once TD errors came back as priorities.
    assert weights and min(weights) < 0.9, weights
    assert all(0 < w <= 1 for w in weights)


@pytest.mark.parametrize(
    "overrides,match",
    [
        ({"algorithm": "test_nstep_q_no_priorities"}, "returns no priorities"),
        ({"replay": {"n_step": 8}}, "n_step=8 is not shorter than config.unroll_length=8"),
        ({"deterministic": True, "batch_size": 16}, "deterministic=True"),
    ],
)
def test_a_prioritized_flow_refuses_what_does_not_fit(tmp_path, overrides, match):
    with pytest.raises(ConfigError, match=match):
        Trainer(_config(**overrides), str(tmp_path / "run"), quiet=True).run()
    assert not (tmp_path / "run").exists()
