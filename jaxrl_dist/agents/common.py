"""Pieces every actor-critic algorithm shares: episode boundaries, the policy model (network,
action distribution, observation normalisation), masked means and schedules."""

from __future__ import annotations

import copy
import dataclasses
import functools
import math
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax

from jaxrl_dist.agents.base import ActorCore, ActorIdentity, LearnerState
from jaxrl_dist.agents.distributions import Categorical, Gaussian
from jaxrl_dist.envs import EnvSpec
from jaxrl_dist.networks import NetworkConfig, RecurrentActorCritic, make_actor_critic
from jaxrl_dist.networks.cores import restart_rows, unroll_one_step
from jaxrl_dist.networks.torsos import CONV_TORSOS
from jaxrl_dist.ops.running_stats import (
    RunningStats,
    init_running_stats,
    normalize,
    update_running_stats,
)
from jaxrl_dist.types import Rollout, split_observation


class Transitions(NamedTuple):
    """Per-transition views of a time-step-aligned `[T + 1, B]` rollout (see `types.py`).

    Attributes:
      r_t: `[T, B]` rewards; on a truncated transition `discount * V(final obs)` is folded in
        (stop-gradiented), so the bootstrap happens there and nothing of the next episode leaks.
      discount_t: `[T, B]` zero where the episode ended (terminated or truncated), else gamma.
      mask: `[T, B]` float32, zero on EnvPool's reset transitions (they carry no signal).
    """

    r_t: jax.Array
    discount_t: jax.Array
    mask: jax.Array


def transitions(
    rollout: Rollout, values: jax.Array, discount: float, reward_scale: float = 1.0
) -> Transitions:
    """Rewards (times `reward_scale`), discounts and masks of `rollout`'s `T` transitions given
    `values` `[T + 1, B]` (which are in the scaled units)."""
    terminated_t = rollout.terminated[1:]
    truncated_t = jnp.logical_and(rollout.truncated[1:], ~terminated_t)
    ended_tm1 = jnp.logical_or(rollout.terminated[:-1], rollout.truncated[:-1])
    discount_t = discount * (1.0 - jnp.logical_or(terminated_t, truncated_t))
    r_t = reward_scale * rollout.reward[1:]
    r_t = r_t + discount * truncated_t * jax.lax.stop_gradient(values[1:])
    return Transitions(r_t, discount_t, (~ended_tm1).astype(jnp.float32))


def masked_mean(x: jax.Array, mask: jax.Array) -> jax.Array:
    """Mean of `x` over the entries where `mask` is 1 (global under sharding)."""
    return jnp.sum(x * mask) / jnp.maximum(mask.sum(), 1.0)


def value_means(values: jax.Array, mask: jax.Array) -> dict[str, jax.Array]:
    """`value_mean` of `values` `[T, B]` over the masked transitions; with an intrinsic value
    head (`[T, B, 2]`) also `intrinsic_value_mean`."""
    if values.ndim == mask.ndim:
        return {"value_mean": masked_mean(values, mask)}
    return {
        "value_mean": masked_mean(values[..., 0], mask),
        "intrinsic_value_mean": masked_mean(values[..., 1], mask),
    }


def lr_fraction(anneal: bool, steps: int) -> optax.Schedule:
    """The multiplier of the base learning rate at an optimizer step: a linear decay from 1 to 0
    over `steps` steps, or 1. The base rate itself is a run-time hyperparameter."""
    if anneal:
        return optax.linear_schedule(1.0, 0.0, max(1, steps))
    return optax.constant_schedule(1.0)


def injected_optimizer(
    build: Callable[[float], optax.GradientTransformation],
    learning_rate: float,
    max_grad_norm: float,
) -> optax.GradientTransformation:
    """Gradients clipped to a global norm of `max_grad_norm` (0: not clipped), then
    `build(learning_rate)`, with the rate held in the optimizer state
    (`optax.inject_hyperparams`), so `gradient_step` sets it each step without a recompile."""

    def clipped(learning_rate):
        clip = [optax.clip_by_global_norm(max_grad_norm)] if max_grad_norm > 0 else []
        return optax.chain(*clip, build(learning_rate))

    return optax.inject_hyperparams(clipped)(learning_rate=learning_rate)


def sgd_loop_unroll(network_config: NetworkConfig, steps: int) -> int:
    """`lax.scan`'s `unroll` for a loop of `steps` gradient steps: all of them on a CPU when
    the torso convolves, else 1. XLA:CPU runs a convolution whose weights a while loop carries
    about 11x slower (the Nature CNN, forward and backward: 2.7 s against 0.24 s per 256
    samples, jax 0.10.2; `benchmarks/results/cpu/diagnosis_atari_learner/`); unrolled, the
    loop is no while loop. Call it while tracing: it reads the backend."""
    convolves = network_config.torso in CONV_TORSOS
    return steps if convolves and jax.default_backend() == "cpu" else 1


def initial_hparams(config: Any, names: Sequence[str]) -> dict[str, jax.Array]:
    """`LearnerState.hparams` at the start of a run: the config's values as float32 scalars."""
    return {name: jnp.asarray(getattr(config, name), jnp.float32) for name in names}


def with_hparams(config: Any, hparams: dict[str, jax.Array]) -> Any:
    """A copy of the frozen algorithm config whose run-time fields are the traced values of
    `hparams`: the loss reads `config.entropy_cost` as always, and a new value needs no
    recompile. (`dataclasses.replace` would run `__post_init__`'s checks on tracers; the values
    were checked when they were set.)"""
    config = copy.copy(config)
    for name, value in hparams.items():
        object.__setattr__(config, name, value)
    return config


@dataclasses.dataclass(frozen=True)
class PolicyModel:
    """Network + action distribution + optional observation normalisation, shared by algorithms.

    Params are `{"net": network params, "obs_norm": RunningStats}`; only `"net"` is trained by
    gradient; `"obs_norm"` is updated from the observations of each learner batch, travels to
    the actors with the params and is checkpointed with them.
    """

    network: Any
    dist: Categorical | Gaussian
    env_spec: EnvSpec
    normalize_obs: bool

    @property
    def recurrent(self) -> bool:
        """Whether the network has a recurrent core (a state carried from step to step)."""
        return isinstance(self.network, RecurrentActorCritic)

    def init(self, key: jax.Array) -> dict:
        dtype = self.env_spec.obs_dtype
        obs = jnp.zeros((1, *self.env_spec.obs_shape), jnp.float32 if dtype == "float64" else dtype)
        stats = init_running_stats(self.env_spec.obs_shape)
        obs = self._prepare(stats, obs)
        if self.recurrent:
            args = (obs[None], jnp.zeros((1, 1), bool), self.initial_core_state(1))
            return {"net": self.network.init(key, *args), "obs_norm": stats}
        return {"net": self.network.init(key, obs), "obs_norm": stats}

    def initial_core_state(self, rows: int) -> Any:
        """The core state an episode starts from, `[rows, ...]` leaves; `{}` without a core."""
        return self.network.initial_state(rows) if self.recurrent else {}

    def _prepare(self, stats: RunningStats, obs: jax.Array) -> jax.Array:
        if self.normalize_obs:
            return normalize(stats, obs.astype(jnp.float32))
        if jnp.issubdtype(obs.dtype, jnp.floating):
            return obs.astype(jnp.float32)  # e.g. MuJoCo's float64 observations
        return obs  # image frames stay uint8: the torso scales them

    def apply(self, params: dict, obs: Any) -> tuple[Any, jax.Array]:
        """`obs [..., *obs_shape]` -> (dist params `[...]`, value `[...]`) of a memoryless
        network. With an action mask (`types.AGENT_VIEW`) the logits of illegal actions are the
        lowest float: they are never sampled or taken, and log-probs and entropies are over the
        legal actions alone."""
        view, mask = split_observation(obs)
        policy, value = self.network.apply(params["net"], self._prepare(params["obs_norm"], view))
        return mask_logits(policy, mask), value

    def unroll(
        self, params: dict, obs: Any, first: jax.Array, core_state: Any
    ) -> tuple[Any, jax.Array, Any]:
        """`obs [T, B, *obs_shape]`, episode starts `first [T, B]` and the core state before
        `obs[0]` (`[B, ...]`) -> (dist params `[T, B]`, values `[T, B]`, the core state after
        `obs[T - 1]`). Without a core, `apply` (the state `{}` passes through)."""
        if not self.recurrent:
            return (*self.apply(params, obs), core_state)
        view, mask = split_observation(obs)
        view = self._prepare(params["obs_norm"], view)
        policy, value, core_state = self.network.apply(params["net"], view, first, core_state)
        return mask_logits(policy, mask), value, core_state

    def step(self, params: dict, obs: Any, core_state: Any) -> tuple[Any, jax.Array, Any]:
        """One acting step: `obs [B, ...]` and the core state fed with it -> (dist params
        `[B]`, values `[B]`, the next core state): `unroll` with `T = 1`, so acting and
        learning compute the same function."""
        if not self.recurrent:
            return (*self.apply(params, obs), core_state)
        return unroll_one_step(functools.partial(self.unroll, params), obs, core_state)

    def update_obs_stats(self, params: dict, obs: Any) -> dict:
        """New params with the running statistics updated by `obs` `[T + 1, B, *obs_shape]`."""
        if not self.normalize_obs:
            return params
        view, _ = split_observation(obs)
        stats = update_running_stats(params["obs_norm"], view[:-1].astype(jnp.float32))
        return {**params, "obs_norm": stats}

    def env_action(self, action: jax.Array) -> jax.Array:
        low = jnp.asarray(self.env_spec.action_low, jnp.float32)
        high = jnp.asarray(self.env_spec.action_high, jnp.float32)
        return self.dist.env_action(action, low, high)


def mask_logits(logits: jax.Array, action_mask: jax.Array | None) -> jax.Array:
    """`logits [..., A]` with illegal actions (`action_mask [..., A]` False) at the lowest
    finite float (not -inf: `0 * log 0` terms of entropies and gradients stay 0, not NaN).
    A mask of width 0 (a simultaneous-move env's continuous actions, `envs/agents.py`) leaves
    the policy, a Gaussian's params, as it is."""
    if action_mask is None or action_mask.shape[-1] == 0:
        return logits
    return jnp.where(action_mask, logits, jnp.finfo(logits.dtype).min)


def make_policy_model(
    network_config: NetworkConfig, env_spec: EnvSpec, value_heads: int = 1
) -> PolicyModel:
    """The actor-critic for `env_spec`'s action space (Categorical or diagonal Gaussian); with
    `value_heads=2` its values are `[..., 2]` (the env reward's, an intrinsic reward's).

    Raises ValueError (one line) for settings that do not fit the environment.
    """
    if network_config.normalize_obs and len(env_spec.obs_shape) != 1:
        raise ValueError(
            "network.normalize_obs=True is for vector observations; image frames are already "
            "scaled to [0, 1] by the torso: set config.network.normalize_obs=false"
        )
    bounds = (*env_spec.action_low, *env_spec.action_high)
    if network_config.tanh_squash and not all(math.isfinite(b) for b in bounds):
        raise ValueError(
            "network.tanh_squash=True needs finite action bounds, this env has "
            f"{env_spec.action_low}..{env_spec.action_high}; set config.network.tanh_squash=false"
        )
    dtype = env_spec.obs_dtype  # a user's torso is traced on it
    if env_spec.continuous:
        network = make_actor_critic(
            network_config, env_spec.obs_shape, env_spec.action_dim, True, value_heads, dtype
        )
        dist = Gaussian(tanh_squash=network_config.tanh_squash)
    else:
        network = make_actor_critic(
            network_config, env_spec.obs_shape, env_spec.num_actions, False, value_heads, dtype
        )
        dist = Categorical()
    return PolicyModel(network, dist, env_spec, network_config.normalize_obs)


def per_env_keys(identity: ActorIdentity, num_envs: int, key: jax.Array) -> dict[str, jax.Array]:
    """The per-env actor state of a stochastic policy: `{"key": [num_envs, 2]}`, one stream per
    env (the actor's identity is already folded into `key` by the runtime)."""
    return {"key": jax.random.split(key, num_envs)}


def sample_per_env(sample: Callable, policy: Any, keys: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Samples row `i` of `policy` with env `i`'s key; returns (actions, the keys' next state)."""
    split = jax.vmap(jax.random.split)(keys)  # [B, 2, 2]
    return jax.vmap(sample)(policy, split[:, 1]), split[:, 0]


def sampling_actor(model: PolicyModel) -> ActorCore:
    """The actor half of an actor-critic: `act` samples (and stores the behaviour log-prob for
    importance ratios), `greedy_act` takes the mode. With a recurrent core the per-env state
    also holds the core's state (`"core"`), reset where an episode starts and stored in the
    rollout at each segment's start."""

    def init_state(identity, num_envs, key):
        state = per_env_keys(identity, num_envs, key)
        if model.recurrent:
            state["core"] = model.initial_core_state(num_envs)
        return state

    def with_core(state, core):
        return {**state, "core": core} if model.recurrent else state

    def act(params, obs, state):
        policy, _, core = model.step(params, obs, state.get("core", {}))
        action, key = sample_per_env(model.dist.sample, policy, state["key"])
        extras = {"log_prob": model.dist.log_prob(policy, action)}
        return action, extras, with_core({**state, "key": key}, core)

    def greedy_act(params, obs, state):
        policy, _, core = model.step(params, obs, state.get("core", {}))
        return model.dist.mode(policy), with_core(state, core)

    return ActorCore(
        init_state=init_state,
        act=act,
        greedy_act=greedy_act,
        env_action=model.env_action,
        start_episodes=core_restarter(model.initial_core_state),
        core_state=core_of,
        with_core_state=with_core,
    )


def core_restarter(initial_core_state: Callable[[int], Any]) -> Callable[[dict, jax.Array], dict]:
    """`ActorCore.start_episodes` of an actor state dict that keeps a core's state under
    `"core"` (none: unchanged): the rows of `first [B]` back at `initial_core_state(B)`, where
    the model's episodes start (zeros for the shipped cores, a user's cell's own carry)."""

    def start_episodes(state: dict, first: jax.Array) -> dict:
        if "core" not in state:
            return state
        start = initial_core_state(first.shape[0])
        return {**state, "core": restart_rows(state["core"], first, start)}

    return start_episodes


def core_of(state: dict) -> Any:
    """`ActorCore.core_state` of such a dict: the core's state, `{}` if it has none."""
    return state.get("core", {})


def with_core(state: dict, core: Any) -> dict:
    """`ActorCore.with_core_state` of such a dict: `state` holding `core` (none: unchanged)."""
    return {**state, "core": core} if "core" in state else state


def sequence_inputs(rollout: Rollout) -> tuple[jax.Array, Any]:
    """What a learner unrolls a core from: the episode starts `first [T + 1, B]` (entry `t >
    0` is set where `obs[t - 1]` ended an episode; the stored state at `obs[0]` already had its
    reset) and the core state before `obs[0]` (`[B, ...]`, `{}` without a core)."""
    ended = jnp.logical_or(rollout.terminated, rollout.truncated)
    first = jnp.concatenate([jnp.zeros_like(ended[:1]), ended[:-1]], axis=0)
    return first, jax.tree.map(lambda x: x[0], rollout.core_state)


def init_learner_state(
    model: PolicyModel,
    optimizer: optax.GradientTransformation,
    key: jax.Array,
    hparams: dict[str, jax.Array] | None = None,
) -> LearnerState:
    """Fresh params, optimizer state over the trained `"net"` part, an RNG key, update 0, the
    run-time hyperparameters (`initial_hparams`; none by default)."""
    params = model.init(key)
    return LearnerState(
        params,
        optimizer.init(params["net"]),
        jax.random.fold_in(key, 1),
        jnp.zeros((), jnp.int32),
        hparams or {},
    )


def gradient_step(
    optimizer: optax.GradientTransformation,
    params: dict,
    opt_state: Any,
    net_grads: Any,
    learning_rate: jax.Array | None = None,
) -> tuple[dict, Any]:
    """Applies `net_grads` to `params["net"]`; the rest of the params is left as it is. With
    `learning_rate` (an `injected_optimizer`), at that rate: it is set in the optimizer state."""
    if learning_rate is not None:
        opt_state = opt_state._replace(
            hyperparams={**opt_state.hyperparams, "learning_rate": learning_rate}
        )
    updates, opt_state = optimizer.update(net_grads, opt_state, params["net"])
    return {**params, "net": optax.apply_updates(params["net"], updates)}, opt_state
