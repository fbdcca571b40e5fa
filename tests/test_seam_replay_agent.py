"""The seam test: a new agent and a new data flow plug in without editing the package.

This file defines a small replay-based agent (Q-learning with a target network and an Ape-X
epsilon ladder over actors), registers it, and runs it end to end through the real `Trainer` on
CartPole over the uniform replay: evaluation, every hook, checkpoints, and a resume whose learner
state (online and target params, optimizer state) equals the saved one. Nothing outside this
file knows the agent exists.
"""

from __future__ import annotations

import dataclasses
import json
import os

import chex
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from q_agent_parts import QNetwork, QState

from jaxrl_dist import agents
from jaxrl_dist.agents.base import ActorCore, ActorIdentity, Agent, AgentEntry, LearnerCore
from jaxrl_dist.agents.common import masked_mean, transitions
from jaxrl_dist.checkpoints.store import Checkpointer, restore_params
from jaxrl_dist.config import build_config
from jaxrl_dist.run.hooks import Hooks
from jaxrl_dist.run.trainer import Trainer


@dataclasses.dataclass(frozen=True)
class QConfig:
    learning_rate: float = 1e-3
    discount: float = 0.99
    target_period: int = 20  # updates between target-network copies
    epsilon_base: float = 0.4  # Ape-X ladder: actor i of N explores with base ** (1 + 7 i / (N-1))

    def __post_init__(self):
        if self.learning_rate <= 0:
            raise ValueError(f"config.algo.learning_rate={self.learning_rate!r} must be > 0")


def epsilon(identity: ActorIdentity, base: float) -> float:
    """Ape-X's per-actor exploration (Horgan et al. 2018), alpha = 7."""
    fraction = identity.index / max(1, identity.count - 1)
    return base ** (1 + 7 * fraction)


def make_q_agent(config: QConfig, network_config, env_spec, run_shape) -> Agent:
    net = QNetwork(env_spec.num_actions)
    optimizer = optax.adam(config.learning_rate)

    def init_state(identity, num_envs, key):
        eps = jnp.full((num_envs,), epsilon(identity, config.epsilon_base), jnp.float32)
        return {"key": jax.random.split(key, num_envs), "epsilon": eps}

    def act(params, obs, state):
        q = net.apply(params, obs)
        keys = jax.vmap(lambda k: jax.random.split(k, 3))(state["key"])  # [B, 3, 2]
        explore = jax.vmap(jax.random.uniform)(keys[:, 1]) < state["epsilon"]
        random = jax.vmap(lambda k: jax.random.randint(k, (), 0, q.shape[-1]))(keys[:, 2])
        action = jnp.where(explore, random, jnp.argmax(q, -1)).astype(jnp.int32)
        return action, {}, {**state, "key": keys[:, 0]}

    def greedy_act(params, obs, state):
        return jnp.argmax(net.apply(params, obs), -1).astype(jnp.int32), state

    def init(key):
        obs = jnp.zeros((1, *env_spec.obs_shape), jnp.float32)
        params = net.init(key, obs)
        return QState(params, params, optimizer.init(params), jnp.zeros((), jnp.int32))

    def loss(params, target_params, batch):
        """One-step Q-learning on every transition of the `[T + 1, B]` segments."""
        q = net.apply(params, batch.obs)  # [T + 1, B, A]
        v_target = jnp.max(net.apply(target_params, batch.obs), -1)  # bootstrap values
        r_t, discount_t, mask = transitions(batch, v_target, config.discount)
        q_tm1 = jnp.take_along_axis(q[:-1], batch.action[..., None], -1)[..., 0]
        td = q_tm1 - jax.lax.stop_gradient(r_t + discount_t * v_target[1:])
        return 0.5 * masked_mean(jnp.square(td), mask), masked_mean(q_tm1, mask)

    def update(state: QState, batch):
        (value, q_mean), grads = jax.value_and_grad(loss, has_aux=True)(
            state.params, state.target_params, batch
        )
        updates, opt_state = optimizer.update(grads, state.opt_state, state.params)
        params = optax.apply_updates(state.params, updates)
        step = state.update_step + 1
        target = optax.periodic_update(params, state.target_params, step, config.target_period)
        return QState(params, target, opt_state, step), {"loss": value, "q_mean": q_mean}

    return Agent(ActorCore(init_state, act, greedy_act), LearnerCore(init, update))


agents.register("test_q", AgentEntry(QConfig, make_q_agent, data="replay"))


def _config(**overrides):
    raw = {
        "algorithm": "test_q",
        "env_id": "CartPole-v1",
        "seed": 3,
        "sebulba": {"num_actor_threads": 2, "envs_per_actor": 8, "env_threads_per_actor": 1},
        "unroll_length": 4,
        "batch_size": 32,
        "total_env_steps": 8_000,
        "eval_every_updates": 40,
        "eval_episodes": 4,
        "checkpoint_every_updates": 50,
        "log_every_updates": 20,
        "learning_curve": False,
        "replay": {"capacity": 2_000, "min_size": 64, "samples_per_insert": 2.0},
        **overrides,
    }
    return build_config(raw, QConfig)


@pytest.fixture(scope="module")
def first_run(tmp_path_factory):
    """One run shared by the tests that read it."""
    work = str(tmp_path_factory.mktemp("seam") / "q")
    calls = {"on_iteration": 0, "on_eval": [], "save_best": [], "save_last": []}

    def on_iteration(num_episodes, num_env_steps):
        calls["on_iteration"] += 1

    hooks = Hooks(
        on_iteration=on_iteration,
        on_eval=lambda report: calls["on_eval"].append(report),
        save_best=lambda params, metric, steps: calls["save_best"].append((metric, steps)),
        save_last=lambda params, metric, steps: calls["save_last"].append(
            (jax.device_get(params), metric, steps)
        ),
        reward_metric=lambda returns: float(np.median(returns)),
    )
    result = Trainer(_config(), work, quiet=True, hooks=hooks).run()
    return work, result, calls


def test_a_registered_replay_agent_trains_through_the_real_trainer(first_run):
    work, result, calls = first_run
    summary = result.summary
    assert summary["stop_reason"] == "total_env_steps reached"
    assert result.env_steps >= 8_000 and result.updates > 0
    # The replay's rate limiter kept about 2 samples per inserted segment (32 per update).
    segments_inserted = result.env_steps / 4
    ratio = result.updates * 32 / segments_inserted
    assert 1.0 < ratio < 3.0, ratio
    # Evaluation and hooks: on_iteration every update, on_eval at each evaluation, save_best on
    # each new best, save_last once with the final params.
    assert calls["on_iteration"] == result.updates
    evals = [e["updates"] for e in summary["evals"]]
    assert len(calls["on_eval"]) == len(evals) >= 2
    assert [r.updates for r in calls["on_eval"]] == evals
    assert all(r.returns.shape == (4, 1) for r in calls["on_eval"])  # [episodes, agents]
    assert calls["save_best"] and calls["save_best"][0][0] == calls["on_eval"][0].metric
    assert len(calls["save_last"]) == 1
    # Checkpoints: periodic and final, with the agent's whole state; the history is a file.
    with Checkpointer(os.path.join(work, "checkpoints")) as ckpt:
        steps = ckpt.all_steps()
        assert steps[-1] == result.updates and 50 in steps
        meta = ckpt.restore_meta(steps[-1])
    assert "evals" not in meta and meta["last_eval"]["updates"] == result.updates
    with open(os.path.join(work, "evals.jsonl")) as f:
        assert [json.loads(line)["updates"] for line in f] == evals


def test_epsilon_ladder_comes_from_the_actor_identity():
    assert epsilon(ActorIdentity(0, 2), 0.4) == pytest.approx(0.4)
    assert epsilon(ActorIdentity(1, 2), 0.4) == pytest.approx(0.4**8)


def test_resume_restores_the_whole_replay_agent_state(first_run):
    work, result, calls = first_run
    first = result.summary
    last_params = calls["save_last"][0][0]
    second = Trainer(_config(total_env_steps=9_600), work, resume=True, quiet=True).run().summary
    assert second["resumed_from_update"] == result.updates
    # Online and target params and the optimizer state, bit for bit (the replay itself starts
    # empty: it is not checkpointed).
    assert second["initial_state_sha256"] == first["state_sha256"]
    assert second["initial_params_sha256"] == first["params_sha256"]
    # The saved params are the ones the run ended with (save_last's copy).
    saved = restore_params(work, result.updates)
    chex.assert_trees_all_equal(saved, last_params)
    assert second["updates"] > result.updates and second["env_steps"] >= 9_600
