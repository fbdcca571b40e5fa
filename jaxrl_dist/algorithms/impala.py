"""IMPALA: actor-critic with V-trace off-policy correction (Espeholt et al. 2018).

Everything here is pure: `impala_loss` over `[T + 1, B]` rollouts, and `make_impala` returning
the `Algorithm` functions (init, act, greedy_act, update) that the runtime jits.

Episode boundaries (see `jaxrl_dist.types`): a terminated transition bootstraps from zero; a
truncated one bootstraps from the value of its final observation (EnvPool returns the final
observation at the step that ends the episode) and cuts the trace there; the reset transition that
follows an episode end is masked out of every loss term.
"""

from __future__ import annotations

import dataclasses

import chex
import jax
import jax.numpy as jnp
import optax

from jaxrl_dist.algorithms.base import Algorithm, LearnerState
from jaxrl_dist.envs import EnvSpec
from jaxrl_dist.networks import NetworkConfig, make_actor_critic
from jaxrl_dist.ops import vtrace_td_error_and_advantage
from jaxrl_dist.types import Rollout, assert_rollout_shapes

OPTIMIZERS = ("rmsprop", "adam")


@dataclasses.dataclass(frozen=True)
class ImpalaConfig:
    """IMPALA hyperparameters; defaults are the paper's Atari settings (Table D.1, Espeholt et
    al. 2018): RMSProp lr 6e-4 annealed linearly to 0, decay 0.99, epsilon 0.01, gradient norm
    clipped at 40, discount 0.99, entropy cost 0.01, baseline cost 0.5, rho-bar = c-bar = 1."""

    learning_rate: float = 6e-4
    anneal_lr: bool = True  # linear decay to 0 over the run's updates
    optimizer: str = "rmsprop"
    rmsprop_decay: float = 0.99
    rmsprop_eps: float = 0.01
    adam_eps: float = 1e-8
    max_grad_norm: float = 40.0  # 0 disables clipping
    discount: float = 0.99
    lambda_: float = 1.0  # V-trace trace coefficient scale
    clip_rho_threshold: float = 1.0  # rho-bar
    clip_pg_rho_threshold: float = 1.0
    baseline_cost: float = 0.5
    entropy_cost: float = 0.01

    def __post_init__(self):
        def bad(field, why):
            raise ValueError(
                f"config.algo.{field}={getattr(self, field)!r} {why}; "
                f"fix it with --config.algo.{field}=..."
            )

        if self.learning_rate <= 0:
            bad("learning_rate", "must be > 0")
        if self.optimizer not in OPTIMIZERS:
            bad("optimizer", f"must be one of {OPTIMIZERS}")
        if not 0.0 <= self.discount <= 1.0:
            bad("discount", "must be in [0, 1]")
        if not 0.0 <= self.lambda_ <= 1.0:
            bad("lambda_", "must be in [0, 1]")
        if not 0.0 <= self.rmsprop_decay < 1.0:
            bad("rmsprop_decay", "must be in [0, 1)")
        for field in ("clip_rho_threshold", "clip_pg_rho_threshold"):
            if getattr(self, field) <= 0:
                bad(field, "must be > 0")
        for field in ("max_grad_norm", "baseline_cost", "entropy_cost", "rmsprop_eps", "adam_eps"):
            if getattr(self, field) < 0:
                bad(field, "must be >= 0")


def impala_loss(
    logits: jax.Array, values: jax.Array, rollout: Rollout, config: ImpalaConfig
) -> tuple[jax.Array, dict[str, jax.Array]]:
    """The IMPALA loss on a batch of segments.

    Args:
      logits: `[T + 1, B, A]` policy logits of the learner's params on `rollout.obs`.
      values: `[T + 1, B]` state values on `rollout.obs`.
      rollout: `[T + 1, B]` rollout; `agent_extras["logits"]` holds behaviour logits `[T, B, A]`.
      config: the loss coefficients.

    Returns:
      (scalar loss, metrics). Every term is averaged over the valid (non-reset) transitions.
    """
    chex.assert_rank([logits, values], [3, 2])
    chex.assert_equal_shape_prefix([logits, values, rollout.reward], 2)
    behaviour_logits = rollout.agent_extras["logits"]
    action = rollout.action
    terminated_t = rollout.terminated[1:]
    truncated_t = jnp.logical_and(rollout.truncated[1:], ~terminated_t)
    ended_tm1 = jnp.logical_or(rollout.terminated[:-1], rollout.truncated[:-1])
    mask = (~ended_tm1).astype(jnp.float32)  # reset transitions carry no learning signal

    v_tm1, v_t = values[:-1], values[1:]
    discount_t = config.discount * (1.0 - jnp.logical_or(terminated_t, truncated_t))
    # Truncation: bootstrap from the final observation's value and cut the trace there, by folding
    # gamma * V(s_final) into the reward and setting the discount to zero.
    r_t = rollout.reward[1:] + config.discount * truncated_t * jax.lax.stop_gradient(v_t)

    log_pi = jax.nn.log_softmax(logits[:-1])
    log_mu = jax.nn.log_softmax(behaviour_logits)
    log_pi_a = jnp.take_along_axis(log_pi, action[..., None], axis=-1)[..., 0]
    log_mu_a = jnp.take_along_axis(log_mu, action[..., None], axis=-1)[..., 0]
    rho_tm1 = jnp.exp(jax.lax.stop_gradient(log_pi_a) - log_mu_a)

    vtrace = vtrace_td_error_and_advantage(
        v_tm1,
        v_t,
        r_t,
        discount_t,
        rho_tm1,
        lambda_=config.lambda_,
        clip_rho_threshold=config.clip_rho_threshold,
        clip_pg_rho_threshold=config.clip_pg_rho_threshold,
    )
    count = jnp.maximum(mask.sum(), 1.0)
    pg_loss = -jnp.sum(log_pi_a * jax.lax.stop_gradient(vtrace.pg_advantage) * mask) / count
    baseline_loss = 0.5 * jnp.sum(jnp.square(vtrace.errors) * mask) / count
    entropy = -jnp.sum(jnp.exp(log_pi) * log_pi, axis=-1)
    entropy = jnp.sum(entropy * mask) / count
    loss = pg_loss + config.baseline_cost * baseline_loss - config.entropy_cost * entropy
    metrics = {
        "loss": loss,
        "pg_loss": pg_loss,
        "baseline_loss": baseline_loss,
        "entropy": entropy,
        "rho_mean": jnp.sum(rho_tm1 * mask) / count,
        "value_mean": jnp.sum(v_tm1 * mask) / count,
        "valid_fraction": mask.mean(),
    }
    return loss, metrics


def make_optimizer(config: ImpalaConfig, num_updates: int) -> optax.GradientTransformation:
    lr = config.learning_rate
    if config.anneal_lr:
        lr = optax.linear_schedule(config.learning_rate, 0.0, max(1, num_updates))
    if config.optimizer == "rmsprop":
        opt = optax.rmsprop(lr, decay=config.rmsprop_decay, eps=config.rmsprop_eps)
    else:
        opt = optax.adam(lr, eps=config.adam_eps)
    clip = [optax.clip_by_global_norm(config.max_grad_norm)] if config.max_grad_norm > 0 else []
    return optax.chain(*clip, opt)


def make_impala(
    config: ImpalaConfig, network_config: NetworkConfig, env_spec: EnvSpec, num_updates: int
) -> Algorithm:
    """Builds IMPALA's pure functions for a discrete-action environment."""
    network = make_actor_critic(network_config, env_spec.obs_shape, env_spec.num_actions)
    optimizer = make_optimizer(config, num_updates)
    schedule = (
        optax.linear_schedule(config.learning_rate, 0.0, max(1, num_updates))
        if config.anneal_lr
        else (lambda _: config.learning_rate)
    )

    def init(key: jax.Array) -> LearnerState:
        dummy_obs = jnp.zeros((1, *env_spec.obs_shape), env_spec.obs_dtype)
        params = network.init(key, dummy_obs)
        return LearnerState(
            params, optimizer.init(params), jax.random.fold_in(key, 1), jnp.zeros((), jnp.int32)
        )

    def act(params, obs, key):
        logits, _ = network.apply(params, obs)
        action = jax.random.categorical(key, logits).astype(jnp.int32)
        return action, {"logits": logits}

    def greedy_act(params, obs):
        logits, _ = network.apply(params, obs)
        return jnp.argmax(logits, axis=-1).astype(jnp.int32)

    def loss_fn(params, rollout):
        logits, values = network.apply(params, rollout.obs)
        return impala_loss(logits, values, rollout, config)

    def update(state: LearnerState, rollout: Rollout):
        assert_rollout_shapes(rollout)
        grads, metrics = jax.grad(loss_fn, has_aux=True)(state.params, rollout)
        updates, opt_state = optimizer.update(grads, state.opt_state, state.params)
        params = optax.apply_updates(state.params, updates)
        metrics["grad_norm"] = optax.tree.norm(grads)
        metrics["learning_rate"] = jnp.asarray(schedule(state.update_step), jnp.float32)
        return state._replace(
            params=params, opt_state=opt_state, update_step=state.update_step + 1
        ), metrics

    return Algorithm(init=init, act=act, greedy_act=greedy_act, update=update)
