"""What the off-policy continuous-control agents (SAC, TD3, DDPG) share: the model (a policy
and an ensemble of critics, `networks/continuous.py`), their learner state, the replay
window's transition, the actions' map to the env's bounds, the warm-up of uniform actions,
the Adam steps at run-time rates and the Polyak-averaged targets.

Actions live in `[-1, 1]^D`: the actor halves act there, the replay stores them there, the
critics read them there, and `env_action` maps them linearly to the env's (finite) bounds.
Their data flow is the prioritized replay of n-step windows (`jaxrl_dist.data.prioritized`):
with `prioritized=False` (the default) every priority written back is 1, so the draws are
uniform and the importance weights 1, as in the papers.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

from jaxrl_dist.agents.base import bad_algo_field, refuse_unread
from jaxrl_dist.agents.common import gradient_step, injected_optimizer, sgd_loop_unroll
from jaxrl_dist.agents.dqn.loss import importance_weights
from jaxrl_dist.agents.dqn.targets import NStepTarget, n_step_target
from jaxrl_dist.envs import EnvSpec
from jaxrl_dist.networks import NetworkConfig, resolve_torso
from jaxrl_dist.networks.continuous import make_continuous_networks
from jaxrl_dist.types import PyTree, Rollout, assert_rollout_shapes, split_observation


class ContinuousState(NamedTuple):
    """The learner state of SAC and TD3; checkpointed whole.

    Attributes:
      params: what the actors get: `{"policy": the policy's params, "uniform": [] float32 (1:
        act uniformly, the warm-up before the first update)}`, and TD3's `"noise"` (the
        exploration noise's scale, a run-time hyperparameter travelling to every actor).
      critic_params: the critics' params (stacked `[E, ...]`).
      targets: `{"critic": the target critics' params}`, and TD3's `"policy"` (its target
        policy's).
      log_alpha: SAC's learned log-temperature `[]` (TD3: `[]` zero, unread).
      opt_state: `{"policy", "critic"}` Adam states, and SAC's `"alpha"`.
      rng: PRNG key of the learner's samples and noises.
      update_step: `[]` int32 updates applied.
      hparams: `{name: [] float32}` the run-time hyperparameters.
    """

    params: dict[str, Any]
    critic_params: PyTree
    targets: dict[str, PyTree]
    log_alpha: jax.Array
    opt_state: dict[str, Any]
    rng: jax.Array
    update_step: jax.Array
    hparams: dict[str, jax.Array]


def check_continuous(algorithm: str, env_spec: EnvSpec, network: NetworkConfig) -> None:
    """ValueError (one line) when `algorithm` cannot act in `env_spec` with `network`."""
    if not env_spec.continuous:
        raise ValueError(
            f"{algorithm} needs continuous actions (a Box) and this env's are discrete "
            f"({env_spec.num_actions} actions); use config.algorithm='rainbow', 'ppo' or 'impala'"
        )
    bounds = (*env_spec.action_low, *env_spec.action_high)
    if not all(math.isfinite(b) for b in bounds):
        raise ValueError(
            f"{algorithm} maps its actions in [-1, 1] to the env's bounds, and this env's are "
            f"{env_spec.action_low}..{env_spec.action_high}; wrap the env to give finite ones"
        )
    problem = network.unread_problem(
        ("shared_torso", "state_dependent_std", "tanh_squash"),
        f"{algorithm}'s policy and critics have torsos of their own and its actions are squashed",
    )
    if problem:
        raise ValueError(problem)


def check_shared_fields(config: Any, rates: tuple[str, ...], non_negative: tuple[str, ...]) -> None:
    """ValueError (one line) for the first field SAC's and TD3's configs share that is out of
    range: the learning rates `rates` (> 0), `non_negative` (with Adam's epsilon and the clip),
    the discount, the Polyak rate, the critics, the importance exponent and the minibatches;
    and the importance exponent set without `prioritized`."""
    for field in rates:
        if not getattr(config, field) > 0:
            bad_algo_field(config, field, "must be > 0")
    for field in ("adam_eps", "max_grad_norm", *non_negative):
        if getattr(config, field) < 0:
            bad_algo_field(config, field, "must be >= 0")
    if not 0.0 <= config.discount <= 1.0:
        bad_algo_field(config, "discount", "must be in [0, 1]")
    if not 0.0 < config.target_tau <= 1.0:
        bad_algo_field(config, "target_tau", "must be in (0, 1] (the Polyak rate)")
    if config.num_critics < 1:
        bad_algo_field(config, "num_critics", "must be >= 1 (2: clipped double-Q)")
    if not 0.0 <= config.importance_exponent <= 1.0:
        bad_algo_field(config, "importance_exponent", "must be in [0, 1]")
    if config.minibatches < 1:
        bad_algo_field(config, "minibatches", "must be >= 1 (gradient steps per learner call)")
    if not config.prioritized:
        refuse_unread(config, ("importance_exponent",), "with prioritized=True")


def check_replayed_run(algorithm: str, config: Any, train_config: Any) -> str | None:
    """What `algorithm` (learning from single replayed transitions, its learner batch split
    into `config.minibatches`) refuses of the run, one line, or None."""
    batch = train_config.replay_batch_size
    if batch % config.minibatches:
        name = "replay.batch_size" if train_config.replay.batch_size else "batch_size"
        return (
            f"config.algo.minibatches={config.minibatches} does not divide the learner's batch "
            f"of {batch} transitions (config.{name}); set config.{name} to a multiple of it"
        )
    network = train_config.network
    if network.recurrent:
        return (
            f"config.network.core={network.core!r}: {algorithm} replays single transitions, "
            "which hold no core state to start a recurrent core from; set "
            "config.network.core='none'"
        )
    if network.normalize_obs:
        return (
            f"config.network.normalize_obs=True is not supported by {algorithm} (its critics' "
            "targets would move with the statistics); set config.network.normalize_obs=false"
        )
    return None


@dataclasses.dataclass(frozen=True)
class ContinuousModel:
    """The policy and critics of an off-policy continuous-control agent, over `env_spec`."""

    policy: Any
    critics: Any
    env_spec: EnvSpec

    @classmethod
    def build(
        cls, network: NetworkConfig, env_spec: EnvSpec, *, gaussian: bool, num_critics: int
    ) -> ContinuousModel:
        torso = resolve_torso(network, env_spec.obs_shape, env_spec.obs_dtype)
        policy, critics = make_continuous_networks(
            network,
            env_spec.obs_shape,
            env_spec.obs_dtype,
            env_spec.action_dim,
            torso,
            gaussian=gaussian,
            num_critics=num_critics,
        )
        return cls(policy, critics, env_spec)

    @property
    def action_dim(self) -> int:
        return self.env_spec.action_dim

    def init(self, key: jax.Array) -> tuple[PyTree, PyTree]:
        """Fresh (policy params, critic params)."""
        obs = self.prepare(np.zeros((1, *self.env_spec.obs_shape), self.env_spec.obs_dtype))
        policy_key, critic_key = jax.random.split(key)
        action = jnp.zeros((1, self.action_dim), jnp.float32)
        return self.policy.init(policy_key, obs), self.critics.init(critic_key, obs, action)

    def prepare(self, obs: Any) -> jax.Array:
        """The view the networks read: floats as float32 (MuJoCo's are float64), frames as
        they are (the torso scales them)."""
        view, _ = split_observation(obs)
        view = jnp.asarray(view)
        return view.astype(jnp.float32) if jnp.issubdtype(view.dtype, jnp.floating) else view

    def env_action(self, action: jax.Array) -> jax.Array:
        """`action [B, D]` in `[-1, 1]` mapped linearly to the env's bounds."""
        low = jnp.asarray(self.env_spec.action_low, jnp.float32)
        high = jnp.asarray(self.env_spec.action_high, jnp.float32)
        return low + (jnp.asarray(action, jnp.float32) + 1.0) * (high - low) / 2.0


def split_keys(keys: jax.Array, parts: int) -> jax.Array:
    """`[B, parts, 2]`: `parts` keys of each env's stream; `[:, 0]` is its next state."""
    return jax.vmap(lambda k: jax.random.split(k, parts))(keys)


def uniform_or(params: dict, chosen: jax.Array, keys: jax.Array) -> jax.Array:
    """`chosen [B, D]`, or uniform actions in `[-1, 1]` (drawn with `keys [B, 2]`) while
    `params["uniform"]` is on (the warm-up before the first update)."""
    uniform = jax.vmap(lambda k: jax.random.uniform(k, chosen.shape[1:], jnp.float32, -1, 1))(keys)
    return jnp.where(params["uniform"] > 0, uniform, chosen)


class Transition(NamedTuple):
    """A replay window's first transition in the networks' view (`n_step_target` of the whole
    window): `obs_tm1 [B, ...]`, `a_tm1 [B, D]`, the target's `r_t`, `discount_t`, `obs_t`,
    and `weights [B]` (importance weights of a prioritized draw; ones when uniform)."""

    obs_tm1: jax.Array
    a_tm1: jax.Array
    target: NStepTarget
    weights: jax.Array


def window_transition(
    model: ContinuousModel, window: Rollout, discount: float, prioritized: bool, beta: Any
) -> Transition:
    """The transition of `[N + 1, B]` windows, its return over the whole window."""
    assert_rollout_shapes(window)
    target = n_step_target(window, window.action.shape[0], discount)
    target = target._replace(obs_t=model.prepare(target.obs_t))
    batch = window.action.shape[1]
    weights = jnp.ones((batch,), jnp.float32)
    if prioritized:
        extras = window.agent_extras
        weights = importance_weights(
            extras["replay_probability"][0], extras["replay_count"][0], beta
        )
    obs_tm1 = model.prepare(jax.tree.map(lambda x: x[0], window.obs))
    return Transition(obs_tm1, window.action[0].astype(jnp.float32), target, weights)


def priorities(prioritized: bool, td_error: jax.Array) -> jax.Array:
    """`[B]` float32 priorities to write back: `|td_error|` when prioritized, else ones."""
    if prioritized:
        return jnp.abs(td_error).astype(jnp.float32)
    return jnp.ones_like(td_error, jnp.float32)


def minibatch_steps(
    update_one: Callable, minibatches: int, network: NetworkConfig
) -> Callable[[PyTree, Rollout], tuple]:
    """`update(state, window [N + 1, K * b])`: `update_one` on each of `K = minibatches`
    minibatches in turn (one `lax.scan`, so one learner call makes K gradient steps), minibatch
    k the rows `j * K + k`; the metrics are their means over the minibatches and the
    priorities `[K * b]` in the window's row order. `K = 1`: `update_one` itself."""
    if minibatches == 1:
        return update_one

    def split(x: jax.Array) -> jax.Array:  # [T, K * b, ...] -> [K, T, b, ...]
        x = jnp.asarray(x)
        rows = x.reshape(x.shape[0], x.shape[1] // minibatches, minibatches, *x.shape[2:])
        return jnp.moveaxis(rows, 2, 0)

    def update(state, window: Rollout):
        def step(state, part):
            state, metrics, priorities = update_one(state, part)
            return state, (metrics, priorities)

        unroll = sgd_loop_unroll(network, minibatches)
        parts = jax.tree.map(split, window)
        state, (metrics, priorities) = jax.lax.scan(step, state, parts, unroll=unroll)
        priorities = jnp.moveaxis(priorities, 0, 1).reshape(-1)  # [b, K] -> row j * K + k
        return state, jax.tree.map(jnp.mean, metrics), priorities

    return update


def adam(config: Any, learning_rate: float) -> optax.GradientTransformation:
    """Adam with the config's epsilon and gradient clip, its rate set at each step."""
    return injected_optimizer(
        lambda lr: optax.adam(lr, eps=config.adam_eps), learning_rate, config.max_grad_norm
    )


def adam_step(
    optimizer: optax.GradientTransformation,
    params: PyTree,
    opt_state: Any,
    grads: PyTree,
    learning_rate: jax.Array,
) -> tuple[PyTree, Any]:
    """One step of `optimizer` (an `adam`) on `params` at `learning_rate`."""
    stepped, opt_state = gradient_step(optimizer, {"net": params}, opt_state, grads, learning_rate)
    return stepped["net"], opt_state


def polyak(online: PyTree, target: PyTree, tau: jax.Array) -> PyTree:
    """`target <- (1 - tau) target + tau online` (Lillicrap et al. 2016)."""
    return optax.incremental_update(online, target, tau)


def warm_start(state: ContinuousState, params: dict[str, Any]) -> ContinuousState:
    """A warm start: the policy from `params`, a target policy a copy of it; what travels
    with it (the warm-up flag, TD3's noise) stays this run's, so the replay still fills with
    uniform actions and the critics learn afresh from it."""
    targets = dict(state.targets)
    if "policy" in targets:
        targets["policy"] = jax.tree.map(jnp.copy, params["policy"])
    return state._replace(params={**state.params, "policy": params["policy"]}, targets=targets)


def zero_step() -> jax.Array:
    return jnp.zeros((), jnp.int32)


def uniform_flag(warmup: bool) -> jax.Array:
    return jnp.asarray(1.0 if warmup else 0.0, jnp.float32)
