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
from typing import Any

import chex
import jax
import jax.numpy as jnp
import optax

from jaxrl_dist.agents.base import Algorithm, LearnerState, bad_algo_field
from jaxrl_dist.agents.common import (
    actor_functions,
    gradient_step,
    init_learner_state,
    initial_hparams,
    injected_optimizer,
    lr_fraction,
    make_policy_model,
    masked_mean,
    transitions,
    with_hparams,
)
from jaxrl_dist.agents.distributions import Categorical, Gaussian
from jaxrl_dist.envs import EnvSpec
from jaxrl_dist.networks import NetworkConfig
from jaxrl_dist.ops import vtrace_td_error_and_advantage
from jaxrl_dist.types import Rollout, assert_rollout_shapes

OPTIMIZERS = ("rmsprop", "adam")
# Fields a run may change while it goes on (`LearnerState.hparams`; README, "Run-time changes").
RUNTIME_HPARAMS = (
    "learning_rate", "entropy_cost", "baseline_cost", "clip_rho_threshold", "clip_pg_rho_threshold",
)  # fmt: skip


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
    reward_scale: float = 1.0  # rewards are multiplied by this for learning (values in those units)

    def __post_init__(self):
        if self.learning_rate <= 0:
            bad_algo_field(self, "learning_rate", "must be > 0")
        if self.optimizer not in OPTIMIZERS:
            bad_algo_field(self, "optimizer", f"must be one of {OPTIMIZERS}")
        if not 0.0 <= self.discount <= 1.0:
            bad_algo_field(self, "discount", "must be in [0, 1]")
        if not 0.0 <= self.lambda_ <= 1.0:
            bad_algo_field(self, "lambda_", "must be in [0, 1]")
        if self.reward_scale <= 0:
            bad_algo_field(self, "reward_scale", "must be > 0")
        if not 0.0 <= self.rmsprop_decay < 1.0:
            bad_algo_field(self, "rmsprop_decay", "must be in [0, 1)")
        for field in ("clip_rho_threshold", "clip_pg_rho_threshold"):
            if getattr(self, field) <= 0:
                bad_algo_field(self, field, "must be > 0")
        for field in ("max_grad_norm", "baseline_cost", "entropy_cost", "rmsprop_eps", "adam_eps"):
            if getattr(self, field) < 0:
                bad_algo_field(self, field, "must be >= 0")


def impala_loss(
    policy: Any,
    values: jax.Array,
    rollout: Rollout,
    config: ImpalaConfig,
    dist: Categorical | Gaussian = Categorical(),
) -> tuple[jax.Array, dict[str, jax.Array]]:
    """The IMPALA loss on a batch of segments.

    Args:
      policy: `[T + 1, B, ...]` the learner's distribution params on `rollout.obs` (logits
        `[T + 1, B, A]`, or a Gaussian's `{"mean", "log_std"}`).
      values: `[T + 1, B]` state values on `rollout.obs`.
      rollout: `[T + 1, B]` rollout; `agent_extras["log_prob"]` `[T, B]` holds the behaviour
        policy's log-probability of each action taken.
      config: the loss coefficients.
      dist: the action distribution `policy` parameterises.

    Returns:
      (scalar loss, metrics). Every term is averaged over the valid (non-reset) transitions.
    """
    chex.assert_rank(values, 2)
    chex.assert_equal_shape([values[:-1], rollout.agent_extras["log_prob"]])
    # Truncation bootstraps from V(final obs), termination from 0; reset transitions are masked.
    r_t, discount_t, mask = transitions(rollout, values, config.discount, config.reward_scale)
    v_tm1, v_t = values[:-1], values[1:]
    policy_t = jax.tree.map(lambda x: x[:-1], policy)
    log_pi_a = dist.log_prob(policy_t, rollout.action)
    rho_tm1 = jnp.exp(jax.lax.stop_gradient(log_pi_a) - rollout.agent_extras["log_prob"])

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
    entropy = masked_mean(dist.entropy(policy_t), mask)
    loss = pg_loss + config.baseline_cost * baseline_loss - config.entropy_cost * entropy
    metrics = {
        "loss": loss,
        "pg_loss": pg_loss,
        "baseline_loss": baseline_loss,
        "entropy": entropy,
        "rho_mean": masked_mean(rho_tm1, mask),
        # How far off-policy the batch is: the share of importance weights V-trace truncates.
        "rho_clipped_fraction": masked_mean(rho_tm1 > config.clip_rho_threshold, mask),
        "value_mean": masked_mean(v_tm1, mask),
        # Far from 0 when the critic lags the returns: the policy gradient then follows its bias.
        "advantage_mean": masked_mean(vtrace.pg_advantage, mask),
        "valid_fraction": mask.mean(),
    }
    return loss, metrics


def make_optimizer(config: ImpalaConfig) -> optax.GradientTransformation:
    """Gradient clipping, then RMSProp or Adam; the learning rate is set at each step."""

    def build(learning_rate):
        if config.optimizer == "rmsprop":
            return optax.rmsprop(learning_rate, decay=config.rmsprop_decay, eps=config.rmsprop_eps)
        return optax.adam(learning_rate, eps=config.adam_eps)

    return injected_optimizer(build, config.learning_rate, config.max_grad_norm)


def make_impala(
    config: ImpalaConfig, network_config: NetworkConfig, env_spec: EnvSpec, num_updates: int
) -> Algorithm:
    """Builds IMPALA's pure functions (discrete or continuous actions)."""
    model = make_policy_model(network_config, env_spec)
    fraction = lr_fraction(config.anneal_lr, num_updates)
    optimizer = make_optimizer(config)
    act, greedy_act = actor_functions(model)

    def loss_fn(net, params, rollout, loss_config):
        policy, values = model.apply({**params, "net": net}, rollout.obs)
        return impala_loss(policy, values, rollout, loss_config, model.dist)

    def update(state: LearnerState, rollout: Rollout):
        assert_rollout_shapes(rollout)
        loss_config = with_hparams(config, state.hparams)
        params = model.update_obs_stats(state.params, rollout.obs)
        grads, metrics = jax.grad(loss_fn, has_aux=True)(
            params["net"], params, rollout, loss_config
        )
        lr = state.hparams["learning_rate"] * fraction(state.update_step)
        params, opt_state = gradient_step(optimizer, params, state.opt_state, grads, lr)
        metrics["grad_norm"] = optax.tree.norm(grads)
        metrics["learning_rate"] = jnp.asarray(lr, jnp.float32)
        return state._replace(
            params=params, opt_state=opt_state, update_step=state.update_step + 1
        ), metrics

    hparams = initial_hparams(config, RUNTIME_HPARAMS)
    return Algorithm(
        init=lambda key: init_learner_state(model, optimizer, key, hparams),
        act=act,
        greedy_act=greedy_act,
        update=update,
        env_action=model.env_action,
        hyperparams=RUNTIME_HPARAMS,
    )
