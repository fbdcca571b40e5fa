"""R2D2 (Kapturowski et al. 2019): a recurrent Q network learned from replayed sequences.

The actor half is Rainbow's epsilon ladder over a recurrent Q network whose per-env state
holds the core's (`"core"`, reset where an episode starts, stored at each segment's start). The
learner half takes `[T + 1, B]` sequences from `data.sequences.SequenceReplay` and:

1. burns the core in over the first `burn_in` steps, the online and the target network each
   from the stored state, without gradient;
2. unrolls both over the rest, and at every step `t >= burn_in` forms the n-step double-Q
   target inside the sequence (cut where an episode ends or the sequence does,
   `dqn.targets.n_step_target` on the window starting at `t`), with R2D2's value rescaling;
3. weighs each sequence's mean loss by its importance weight, and returns its priority
   `eta * max_t |td| + (1 - eta) * mean_t |td|` over the learned steps.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

import jax
import jax.numpy as jnp
import optax

from jaxrl_dist import ops
from jaxrl_dist.agents.base import ActorCore, Agent, LearnerCore, RunShape
from jaxrl_dist.agents.common import (
    core_of,
    core_restarter,
    sequence_inputs,
    with_core,
)
from jaxrl_dist.agents.dqn.agent import (
    DQNState,
    _input_dtype,
    epsilon_greedy,
    importance_exponent,
    ladder_state,
    legal_only,
    q_learner_parts,
    q_warm_start,
)
from jaxrl_dist.agents.dqn.loss import importance_weights
from jaxrl_dist.agents.dqn.targets import n_step_target
from jaxrl_dist.agents.r2d2.config import RUNTIME_HPARAMS, R2D2Config
from jaxrl_dist.envs import EnvSpec
from jaxrl_dist.networks import (
    NetworkConfig,
    check_user_heads,
    core_input,
    network_inputs,
    refuse_q_unread,
    refuse_shipped_head_options,
    resolve_torso,
)
from jaxrl_dist.networks.cores import unroll_one_step
from jaxrl_dist.networks.q_heads import RecurrentQNetwork
from jaxrl_dist.types import Rollout, assert_rollout_shapes, split_observation, windows


@dataclasses.dataclass(frozen=True)
class RecurrentQModel:
    """A recurrent Q network: `unroll` over sequences, `step` for acting (`unroll` with
    `T = 1`); Q-values of illegal actions (an action mask) at the lowest float."""

    network: RecurrentQNetwork
    env_spec: EnvSpec

    def init(self, key: jax.Array) -> Any:
        obs = jnp.zeros((1, 1, *self.env_spec.obs_shape), _input_dtype(self.env_spec))
        first = jnp.zeros((1, 1), bool)
        return self.network.init(key, obs, first, self.network.initial_state(1))

    def initial_core_state(self, rows: int) -> Any:
        return self.network.initial_state(rows)

    def unroll(self, net: Any, obs: Any, first: jax.Array, core: Any) -> tuple[jax.Array, Any]:
        """`obs [T, B, ...]`, `first [T, B]`, the state before `obs[0]` -> (Q `[T, B, A]`, the
        state after `obs[T - 1]`)."""
        view, _ = split_observation(obs)
        q, core = self.network.apply(net, view, first, core)
        return legal_only(q, obs), core

    def step(self, net: Any, obs: Any, core: Any) -> tuple[jax.Array, Any]:
        """`obs [B, ...]` and the state fed with it -> (Q `[B, A]`, the next state)."""
        return unroll_one_step(functools.partial(self.unroll, net), obs, core)


def make_actor(model: RecurrentQModel, config: R2D2Config) -> ActorCore:
    """Epsilon-greedy over the recurrent Q-values, each env with its ladder exponent."""

    def init_state(identity, num_envs, key):
        state = ladder_state(identity, num_envs, key, config.epsilon_alpha)
        return {**state, "core": model.initial_core_state(num_envs)}

    def act(params, obs, state):
        keys = jax.vmap(lambda k: jax.random.split(k, 3))(state["key"])  # [B, 3, ...]
        q, core = model.step(params["net"], obs, state["core"])
        action = epsilon_greedy(q, obs, params, state, keys)
        return action, {}, {**state, "key": keys[:, 0], "core": core}

    def greedy_act(params, obs, state):
        q, core = model.step(params["net"], obs, state["core"])
        return jnp.argmax(q, axis=-1).astype(jnp.int32), {**state, "core": core}

    return ActorCore(
        init_state,
        act,
        greedy_act,
        start_episodes=core_restarter(model.initial_core_state),
        core_state=core_of,
        with_core_state=with_core,
    )


def sequence_targets(sequence: Rollout, start: int, n: int, discount: float):
    """The n-step targets of transitions `start .. T - 1` of each sequence: (`r_t [L, B]`,
    `discount_t [L, B]`, `steps [L, B]`), `L = T - start`; the bootstrap observation of
    transition `t` is `obs[t + steps]` (cut where an episode or the sequence ends)."""
    unroll, batch = sequence.action.shape[:2]
    columns = jnp.arange(batch)

    def at(t):
        window = windows(sequence, columns, jnp.full((batch,), t), n, xp=jnp)
        target = n_step_target(window, n, discount)
        return target.r_t, target.discount_t, target.steps

    return jax.vmap(at)(jnp.arange(start, unroll))


def sequence_td_errors(
    model: RecurrentQModel, net: Any, target_net: Any, sequence: Rollout, config: R2D2Config
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """(TD errors `[L, B]` of transitions `burn_in .. T - 1`, their mask `[L, B]` (0 where a
    transition starts at an episode end), the online Q of the actions taken `[L, B]`); the
    burn-in prefix only sets the cores' states, without gradient."""
    k, unroll = config.burn_in, sequence.action.shape[0]
    first, core0 = sequence_inputs(sequence)
    obs = sequence.obs

    def after_burn_in(params):
        if k == 0:
            return core0
        prefix = jax.tree.map(lambda x: x[:k], obs)
        return jax.lax.stop_gradient(model.unroll(params, prefix, first[:k], core0)[1])

    rest = jax.tree.map(lambda x: x[k:], obs)
    q, _ = model.unroll(net, rest, first[k:], after_burn_in(net))  # [T + 1 - k, B, A]
    q_target, _ = model.unroll(target_net, rest, first[k:], after_burn_in(target_net))
    r_t, discount_t, steps = sequence_targets(sequence, k, config.n_step, config.discount)
    boot = jnp.arange(unroll - k)[:, None] + steps  # [L, B] rows of q (offset by k)
    pick = lambda x: jnp.take_along_axis(x, boot[..., None], axis=0)  # noqa: E731  [L, B, A]
    selector = pick(jax.lax.stop_gradient(q) if config.double else q_target)
    a_t = jnp.argmax(selector, axis=-1)
    v_t = jnp.take_along_axis(pick(jax.lax.stop_gradient(q_target)), a_t[..., None], -1)[..., 0]
    if config.value_rescaling:
        eps = config.rescaling_eps
        target = ops.signed_hyperbolic(r_t + discount_t * ops.signed_parabolic(v_t, eps), eps)
    else:
        target = r_t + discount_t * v_t
    taken = sequence.action[k:].astype(jnp.int32)
    q_taken = jnp.take_along_axis(q[:-1], taken[..., None], axis=-1)[..., 0]
    ended = sequence.terminated[k:unroll] | sequence.truncated[k:unroll]  # starts at an end
    return jax.lax.stop_gradient(target) - q_taken, (~ended).astype(jnp.float32), q_taken


def sequence_priorities(td: jax.Array, mask: jax.Array, eta: float) -> jax.Array:
    """`[B]` R2D2's `eta * max_t |td| + (1 - eta) * mean_t |td|` over the masked steps."""
    magnitude = jnp.abs(td) * mask
    mean = magnitude.sum(0) / jnp.maximum(mask.sum(0), 1.0)
    return eta * magnitude.max(0) + (1.0 - eta) * mean


def recurrent_q_model(
    config: R2D2Config, network_config: NetworkConfig, env_spec: EnvSpec
) -> RecurrentQModel:
    """The recurrent Q network of `network_config` (torso, core) for `env_spec`."""
    nc = network_config
    refuse_q_unread(nc)
    refuse_shipped_head_options(nc, dueling=config.dueling)
    obs_shape = tuple(env_spec.obs_shape)
    torso_name = resolve_torso(nc, obs_shape, env_spec.obs_dtype)
    network = RecurrentQNetwork(
        obs_shape=obs_shape,
        num_actions=env_spec.num_actions,
        torso_name=torso_name,
        hidden_sizes=nc.hidden_sizes,
        activation=nc.activation,
        dtype=nc.compute_dtype,
        dueling=config.dueling,
        core=nc.core,
        core_size=nc.core_size,
        core_input=core_input(nc, torso_name, obs_shape, env_spec.obs_dtype),
        layer_norm=nc.layer_norm,
        head=nc.head,
    )
    if nc.user_head:
        inputs = network_inputs(network, nc, obs_shape, env_spec.obs_dtype)
        check_user_heads(network, nc.head, *inputs)
    return RecurrentQModel(network, env_spec)


def make_r2d2(
    config: R2D2Config, network_config: NetworkConfig, env_spec: EnvSpec, run_shape: RunShape
) -> Agent:
    """Builds R2D2 for discrete actions (see the module and `R2D2Config`)."""
    if env_spec.continuous:
        raise ValueError("r2d2 needs discrete actions; use config.algorithm='ppo' or 'impala'")
    model = recurrent_q_model(config, network_config, env_spec)
    init, learn = q_learner_parts(config, model, run_shape, RUNTIME_HPARAMS)

    def loss_fn(net, state: DQNState, sequence: Rollout, beta):
        td, mask, q_taken = sequence_td_errors(model, net, state.target_params, sequence, config)
        step_loss = optax.huber_loss(td) if config.loss == "huber" else 0.5 * jnp.square(td)
        per_sequence = (step_loss * mask).sum(0) / jnp.maximum(mask.sum(0), 1.0)
        extras = sequence.agent_extras
        weights = importance_weights(
            extras["replay_probability"][0], extras["replay_count"][0], beta
        )
        priorities = sequence_priorities(jax.lax.stop_gradient(td), mask, config.priority_eta)
        metrics = {
            "importance_weight_mean": jnp.mean(weights),
            "q_mean": jnp.sum(q_taken * mask) / jnp.maximum(mask.sum(), 1.0),
            "priority_mean": jnp.mean(priorities),
        }
        return jnp.mean(jax.lax.stop_gradient(weights) * per_sequence), (priorities, metrics)

    def update(state: DQNState, sequence: Rollout):
        assert_rollout_shapes(sequence)
        hp = state.hparams
        beta = importance_exponent(config, run_shape, hp, state.update_step)
        (loss, (priorities, metrics)), grads = jax.value_and_grad(loss_fn, has_aux=True)(
            state.params["net"], state, sequence, beta
        )
        new, stats = learn(state, grads)
        metrics.update(loss=loss, importance_exponent=beta, **stats)
        return new, metrics, priorities.astype(jnp.float32)

    learner = LearnerCore(init, update, with_params=q_warm_start, priorities=True)
    return Agent(make_actor(model, config), learner, RUNTIME_HPARAMS)
