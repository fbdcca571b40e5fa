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
from jaxrl_dist.algorithms.common import (
    categorical_entropy,
    categorical_log_prob,
    linear_or_constant,
    masked_mean,
    transitions,
)
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
    # Truncation bootstraps from V(final obs), termination from 0; reset transitions are masked.
    r_t, discount_t, mask = transitions(rollout, values, config.discount)
    v_tm1, v_t = values[:-1], values[1:]
    log_pi_a = categorical_log_prob(logits[:-1], rollout.action)
    log_mu_a = categorical_log_prob(rollout.agent_extras["logits"], rollout.action)
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
    pg_loss = -masked_mean(log_pi_a * jax.lax.stop_gradient(vtrace.pg_advantage), mask)
    baseline_loss = 0.5 * masked_mean(jnp.square(vtrace.errors), mask)
    entropy = masked_mean(categorical_entropy(logits[:-1]), mask)
    loss = pg_loss + config.baseline_cost * baseline_loss - config.entropy_cost * entropy
    metrics = {
        "loss": loss,
        "pg_loss": pg_loss,
        "baseline_loss": baseline_loss,
        "entropy": entropy,
        "rho_mean": masked_mean(rho_tm1, mask),
        "value_mean": masked_mean(v_tm1, mask),
        "valid_fraction": mask.mean(),
    }
    return loss, metrics


def make_optimizer(config: ImpalaConfig, lr: optax.Schedule) -> optax.GradientTransformation:
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
    schedule = linear_or_constant(config.learning_rate, config.anneal_lr, num_updates)
    optimizer = make_optimizer(config, schedule)

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
