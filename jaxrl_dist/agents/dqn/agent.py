"""Rainbow's agent: an epsilon-ladder (and noisy) Q actor half and the n-step, prioritized,
double/distributional Q-learning learner half."""

from __future__ import annotations

import dataclasses
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

from jaxrl_dist.agents.base import ActorCore, ActorIdentity, Agent, LearnerCore, RunShape
from jaxrl_dist.agents.common import (
    gradient_step,
    initial_hparams,
    injected_optimizer,
    lr_fraction,
    mask_logits,
)
from jaxrl_dist.agents.dqn.config import RUNTIME_HPARAMS, RainbowConfig
from jaxrl_dist.agents.dqn.loss import expected_q, importance_weights, transition_losses
from jaxrl_dist.agents.dqn.targets import n_step_target
from jaxrl_dist.envs import EnvSpec
from jaxrl_dist.networks import NetworkConfig, QNetwork, make_q_network
from jaxrl_dist.types import PyTree, Rollout, assert_rollout_shapes, split_observation


class DQNState(NamedTuple):
    """The learner state of the DQN family; checkpointed whole.

    Attributes:
      params: `{"net": online network params, "epsilon": [] float32}`: what the actors get.
        The exploration rate travels with the network, so a schedule or a run-time change
        reaches every actor (and a central server) with the next params.
      target_params: the target network's params (same tree as `params["net"]`).
      opt_state: Adam's state over `params["net"]`.
      rng: PRNG key for the noisy layers' noise.
      update_step: `[]` int32 updates applied.
      hparams: `{name: [] float32}` the run-time hyperparameters (`RUNTIME_HPARAMS`).
    """

    params: dict[str, Any]
    target_params: PyTree
    opt_state: PyTree
    rng: jax.Array
    update_step: jax.Array
    hparams: dict[str, jax.Array]


@dataclasses.dataclass(frozen=True)
class QModel:
    """A Q network and its C51 support; `apply` draws noisy layers' noise from `key` (None: the
    noise-free means, for greedy acting)."""

    network: QNetwork
    env_spec: EnvSpec
    v_min: float
    v_max: float

    @property
    def atoms(self) -> jax.Array | None:
        k = self.network.num_atoms
        return None if k == 1 else jnp.linspace(self.v_min, self.v_max, k, dtype=jnp.float32)

    def init(self, key: jax.Array) -> PyTree:
        obs = jnp.zeros((1, *self.env_spec.obs_shape), _input_dtype(self.env_spec))
        params_key, noise_key = jax.random.split(key)
        return self.network.init({"params": params_key, "noise": noise_key}, obs)

    def apply(self, net: PyTree, obs: Any, key: jax.Array | None) -> jax.Array:
        """The network's output on the view of `obs` (an action mask is not applied here)."""
        view, _ = split_observation(obs)
        if key is None or not self.network.noisy:
            return self.network.apply(net, view, True)
        return self.network.apply(net, view, rngs={"noise": key})

    def q_values(self, net: PyTree, obs: Any, key: jax.Array | None) -> jax.Array:
        """Expected Q-values `[B, A]`; illegal actions (an action mask in `obs`) at the lowest
        float, so an argmax never picks them."""
        return legal_only(expected_q(self.apply(net, obs, key), self.atoms), obs)


def legal_only(q: jax.Array, obs: Any) -> jax.Array:
    """`q [B, A]` with the actions `obs`'s mask makes illegal at the lowest float."""
    return mask_logits(q, split_observation(obs)[1])


def _input_dtype(spec: EnvSpec) -> Any:
    return jnp.float32 if np.dtype(spec.obs_dtype) == np.float64 else spec.obs_dtype


def epsilon_ladder(identity: ActorIdentity, num_envs: int, alpha: float) -> np.ndarray:
    """`[num_envs]` exponents `1 + alpha * i / (N - 1)` of this actor's envs, `i` the env's index
    over all `N` envs of every actor (Ape-X, Horgan et al. 2018: env i acts with
    `epsilon ** exponent_i`)."""
    index = identity.index * num_envs + np.arange(num_envs)
    total = identity.count * num_envs
    return (1.0 + alpha * index / max(total - 1, 1)).astype(np.float32)


def make_actor(model: QModel, config: RainbowConfig) -> ActorCore:
    """Epsilon-greedy over the expected Q-values, each env with its ladder exponent; with noisy
    layers, one noise draw per call (shared by the batch, as in Fortunato et al. 2018)."""

    def init_state(identity, num_envs, key):
        return ladder_state(identity, num_envs, key, config.epsilon_alpha)

    def act(params, obs, state):
        keys = jax.vmap(lambda k: jax.random.split(k, 4))(state["key"])  # [B, 4, ...]
        q = model.q_values(params["net"], obs, keys[0, 3])
        action = epsilon_greedy(q, obs, params, state, keys)
        return action, {}, {**state, "key": keys[:, 0]}

    def greedy_act(params, obs, state):
        q = model.q_values(params["net"], obs, None)
        return jnp.argmax(q, axis=-1).astype(jnp.int32), state

    return ActorCore(init_state, act, greedy_act)


def ladder_state(identity: ActorIdentity, num_envs: int, key: jax.Array, alpha: float) -> dict:
    """The per-env actor state of an epsilon-ladder actor: a key and a ladder exponent each."""
    exponent = epsilon_ladder(identity, num_envs, alpha)
    return {"key": jax.random.split(key, num_envs), "epsilon_exponent": jnp.asarray(exponent)}


def epsilon_greedy(q: jax.Array, obs: Any, params: dict, state: dict, keys: jax.Array):
    """`[B]` int32 actions: each env explores with `params["epsilon"] ** its exponent`
    (`keys[:, 1]` decides, `keys[:, 2]` draws a legal action uniformly), else `argmax q`."""
    epsilon = params["epsilon"] ** state["epsilon_exponent"]
    explore = jax.vmap(jax.random.uniform)(keys[:, 1]) < epsilon
    random = _uniform_actions(keys[:, 2], q, split_observation(obs)[1])
    return jnp.where(explore, random, jnp.argmax(q, axis=-1)).astype(jnp.int32)


def _uniform_actions(keys: jax.Array, q: jax.Array, action_mask: jax.Array | None) -> jax.Array:
    """`[B]` actions uniform over each row's legal actions (all, without a mask)."""
    if action_mask is None:
        return jax.vmap(lambda k: jax.random.randint(k, (), 0, q.shape[-1]))(keys)
    uniform = mask_logits(jnp.zeros_like(q), action_mask)  # equal logits on the legal ones
    return jax.vmap(jax.random.categorical)(keys, uniform)


def exploration_epsilon(
    config: RainbowConfig, run_shape: RunShape, hparams: dict, step: jax.Array
) -> jax.Array:
    """The actors' epsilon after `step` updates: linear from `epsilon_start` to the run-time
    `epsilon` over the env steps consumed."""
    consumed = step.astype(jnp.float32) * run_shape.env_steps_per_update
    decay = config.epsilon_decay_env_steps
    done = jnp.minimum(consumed / decay, 1.0) if decay else 1.0
    epsilon = config.epsilon_start + done * (hparams["epsilon"] - config.epsilon_start)
    return jnp.asarray(epsilon, jnp.float32)


def importance_exponent(
    config: RainbowConfig, run_shape: RunShape, hparams: dict, step: jax.Array
) -> jax.Array:
    """Beta: the run-time value, annealed linearly to 1 over the run's updates."""
    beta = hparams["importance_exponent"]
    if config.anneal_importance:
        beta = beta + (1.0 - beta) * jnp.minimum(step / run_shape.num_updates, 1.0)
    return beta


def return_length(hparams: dict, window: int) -> jax.Array:
    """The run-time `n_step`, at most the replay's `window` (0 = the whole window)."""
    n = jnp.round(hparams["n_step"]).astype(jnp.int32)
    return jnp.where(n < 1, window, jnp.minimum(n, window))


def make_rainbow(
    config: RainbowConfig, network_config: NetworkConfig, env_spec: EnvSpec, run_shape: RunShape
) -> Agent:
    """Builds the DQN-family agent for discrete actions (see `RainbowConfig`)."""
    if env_spec.continuous:
        raise ValueError(
            "rainbow needs discrete actions and this env's are continuous; use config.algorithm="
            "'ppo' or 'impala'"
        )
    network = make_q_network(
        network_config,
        env_spec.obs_shape,
        env_spec.num_actions,
        num_atoms=config.num_atoms,
        dueling=config.dueling,
        noisy=config.noisy,
        sigma0=config.sigma0,
        obs_dtype=env_spec.obs_dtype,
    )
    model = QModel(network, env_spec, config.v_min, config.v_max)
    init, learn = q_learner_parts(config, model, run_shape, RUNTIME_HPARAMS)

    def loss_fn(net, state: DQNState, window: Rollout, n, beta, keys):
        target = n_step_target(window, n, config.discount)
        out_t = model.apply(state.target_params, target.obs_t, keys[0])
        obs_tm1, batch = jax.tree.map(lambda x: x[0], window.obs), window.action.shape[1]
        if config.double:  # the online net picks the bootstrap action: one pass over both
            both_obs = jax.tree.map(lambda *x: jnp.concatenate(x), obs_tm1, target.obs_t)
            both = model.apply(net, both_obs, keys[1])
            online_t = jax.lax.stop_gradient(both[batch:])
            out_tm1, selector = both[:batch], expected_q(online_t, model.atoms)
        else:
            out_tm1 = model.apply(net, obs_tm1, keys[1])
            selector = expected_q(out_t, model.atoms)
        selector = legal_only(selector, target.obs_t)  # bootstrap from a legal action
        losses, priorities = transition_losses(
            out_tm1, window.action[0], target, out_t, selector, model.atoms, config
        )
        extras = window.agent_extras
        weights = importance_weights(
            extras["replay_probability"][0], extras["replay_count"][0], beta
        )
        q_taken = jnp.take_along_axis(
            expected_q(out_tm1, model.atoms), window.action[0][:, None].astype(jnp.int32), -1
        )
        metrics = {
            "importance_weight_mean": jnp.mean(weights),
            "q_mean": jnp.mean(q_taken),
            "priority_mean": jnp.mean(priorities),
            "return_steps_mean": jnp.mean(target.steps.astype(jnp.float32)),
        }
        loss = jnp.mean(jax.lax.stop_gradient(weights) * losses)
        return loss, (priorities, metrics)

    def update(state: DQNState, window: Rollout):
        assert_rollout_shapes(window)
        hp = state.hparams
        n = return_length(hp, window.action.shape[0])
        beta = importance_exponent(config, run_shape, hp, state.update_step)
        rng, *keys = jax.random.split(state.rng, 3)
        (loss, (priorities, metrics)), grads = jax.value_and_grad(loss_fn, has_aux=True)(
            state.params["net"], state, window, n, beta, keys
        )
        new, stats = learn(state, grads)
        metrics.update(loss=loss, importance_exponent=beta, **stats)
        return new._replace(rng=rng), metrics, priorities.astype(jnp.float32)

    learner = LearnerCore(init, update, with_params=q_warm_start, priorities=True)
    return Agent(make_actor(model, config), learner, RUNTIME_HPARAMS)


def q_warm_start(state: DQNState, params: dict[str, Any]) -> DQNState:
    """A warm start: the online and the target network both start from `params` (the
    target a copy: a state holding one buffer twice cannot be donated to the update)."""
    return state._replace(params=params, target_params=jax.tree.map(jnp.copy, params["net"]))


def q_learner_parts(
    config: RainbowConfig, model: Any, run_shape: RunShape, runtime_hparams: tuple[str, ...]
) -> tuple[Any, Any]:
    """What the DQN family's learners share: `init(key) -> DQNState` (`model.init`'s params
    online and as target, Adam) and `learn(state, grads) -> (state, stats)`, one Adam step at
    the run-time rate (annealed with `anneal_lr`), the target update, and the actors' next
    epsilon; `stats` are its learning rate, epsilon and gradient norm."""
    optimizer = injected_optimizer(
        lambda learning_rate: optax.adam(learning_rate, eps=config.adam_eps),
        config.learning_rate,
        config.max_grad_norm,
    )
    hparams = initial_hparams(config, runtime_hparams)
    fraction = lr_fraction(config.anneal_lr, run_shape.num_updates)

    def init(key: jax.Array) -> DQNState:
        net = model.init(key)
        zero = jnp.zeros((), jnp.int32)
        params = {"net": net, "epsilon": exploration_epsilon(config, run_shape, hparams, zero)}
        return DQNState(
            params=params,
            target_params=net,
            opt_state=optimizer.init(net),
            rng=jax.random.fold_in(key, 1),
            update_step=zero,
            hparams=hparams,
        )

    def learn(state: DQNState, grads: Any) -> tuple[DQNState, dict[str, jax.Array]]:
        hp = state.hparams
        lr = hp["learning_rate"] * fraction(state.update_step)
        params, opt_state = gradient_step(optimizer, state.params, state.opt_state, grads, lr)
        step = state.update_step + 1
        target_params = _target_update(config, params["net"], state.target_params, step, hp)
        epsilon = exploration_epsilon(config, run_shape, hp, step)  # for the next acting
        new = state._replace(
            params={**params, "epsilon": epsilon},
            target_params=target_params,
            opt_state=opt_state,
            update_step=step,
        )
        return new, {"learning_rate": lr, "epsilon": epsilon, "grad_norm": optax.tree.norm(grads)}

    return init, learn


def _target_update(
    config: RainbowConfig, online: PyTree, target: PyTree, step: jax.Array, hparams: dict
) -> PyTree:
    """A hard copy every `target_period` updates, or Polyak averaging after each."""
    if config.target_update == "polyak":
        return optax.incremental_update(online, target, config.target_tau)
    period = jnp.maximum(jnp.round(hparams["target_period"]).astype(jnp.int32), 1)
    return optax.periodic_update(online, target, step, period)
