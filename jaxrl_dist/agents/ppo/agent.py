"""PPO, asynchronous (Sebulba style): clipped surrogate on rollouts from actor threads.

Schulman et al. 2017 ("Proximal Policy Optimization Algorithms"), with the implementation details
of Huang et al. 2022 ("The 37 Implementation Details of PPO"): GAE (Schulman et al. 2016),
per-minibatch advantage normalisation, optional value clipping, entropy bonus, global gradient
clipping, learning rate annealed linearly over every optimizer step.

One `update(state, rollout)` runs `num_epochs` passes over `num_minibatches` minibatches of the
`[T + 1, B]` rollout inside one jitted `lax.scan`; minibatches split the env axis B, so every
minibatch keeps whole segments. Rollouts a few updates stale are handled with the decoupled
objective of Hilton et al. 2021: the ratio is clipped around the policy at the start of the
update and each sample is weighted by the truncated ratio of that policy to the behaviour policy
that acted (whose log-probabilities travel in the rollout); `advantage_estimator="vtrace"` also
corrects the advantages and value targets for the staleness with V-trace (Espeholt et al. 2018),
as APPO does.
"""

from __future__ import annotations

import dataclasses
from typing import Any

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
from jaxrl_dist.ops import truncated_generalized_advantage_estimation, vtrace_td_error_and_advantage
from jaxrl_dist.types import Rollout, assert_rollout_shapes

ESTIMATORS = ("gae", "vtrace")
# Fields a run may change while it goes on (`LearnerState.hparams`; README, "Run-time changes").
RUNTIME_HPARAMS = ("learning_rate", "entropy_cost", "value_cost", "clip_eps")


@dataclasses.dataclass(frozen=True)
class PPOConfig:
    """PPO hyperparameters; defaults follow Huang et al. 2022's Atari/CartPole settings."""

    learning_rate: float = 2.5e-4
    anneal_lr: bool = True
    adam_eps: float = 1e-5
    max_grad_norm: float = 0.5  # 0 disables clipping
    num_epochs: int = 4
    num_minibatches: int = 4  # must divide config.batch_size (envs per update)
    discount: float = 0.99
    gae_lambda: float = 0.95
    advantage_estimator: str = "gae"  # "gae" | "vtrace" (corrects stale rollouts, as APPO)
    clip_eps: float = 0.1
    clip_value: bool = True
    value_cost: float = 0.5
    entropy_cost: float = 0.01
    normalize_advantages: bool = True
    reward_scale: float = 1.0  # rewards are multiplied by this for learning (values in those units)
    max_behaviour_weight: float = 1.0  # cap on pi_old / mu for rollouts a few updates stale

    def __post_init__(self):
        for field in ("learning_rate", "clip_eps"):
            if getattr(self, field) <= 0:
                bad_algo_field(self, field, "must be > 0")
        for field in ("num_epochs", "num_minibatches"):
            if getattr(self, field) < 1:
                bad_algo_field(self, field, "must be >= 1")
        for field in ("discount", "gae_lambda"):
            if not 0.0 <= getattr(self, field) <= 1.0:
                bad_algo_field(self, field, "must be in [0, 1]")
        if self.reward_scale <= 0:
            bad_algo_field(self, "reward_scale", "must be > 0")
        if self.max_behaviour_weight <= 0:
            bad_algo_field(self, "max_behaviour_weight", "must be > 0")
        for field in ("max_grad_norm", "value_cost", "entropy_cost", "adam_eps"):
            if getattr(self, field) < 0:
                bad_algo_field(self, field, "must be >= 0")
        if self.advantage_estimator not in ESTIMATORS:
            bad_algo_field(self, "advantage_estimator", f"must be one of {ESTIMATORS}")


def check_ppo(config: PPOConfig, train_config) -> str | None:
    """Minibatches split the learner batch's envs: num_minibatches must divide batch_size."""
    if train_config.batch_size % config.num_minibatches:
        return (
            f"config.algo.num_minibatches={config.num_minibatches} does not divide "
            f"config.batch_size={train_config.batch_size}; make batch_size a multiple of it"
        )
    return None


def advantages_and_targets(
    values: jax.Array, log_pi: jax.Array, rollout: Rollout, config: PPOConfig
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """Advantages `[T, B]`, value targets `[T, B]` and the transition mask `[T, B]`.

    `values` `[T + 1, B]` and `log_pi` `[T, B]` (log-probabilities of the actions taken) are the
    learner's, before this update; V-trace compares `log_pi` with the behaviour log-probs.
    """
    r_t, discount_t, mask = transitions(rollout, values, config.discount, config.reward_scale)
    if config.advantage_estimator == "gae":
        adv = truncated_generalized_advantage_estimation(r_t, discount_t, config.gae_lambda, values)
        return adv, adv + values[:-1], mask
    rho = jnp.exp(log_pi - rollout.agent_extras["log_prob"])
    vtrace = vtrace_td_error_and_advantage(
        values[:-1], values[1:], r_t, discount_t, rho, config.gae_lambda
    )
    # q - v, not pg_advantage: the surrogate already weights by min(c, pi_old / mu) once.
    return vtrace.q_estimate - values[:-1], vtrace.errors + values[:-1], mask


def ppo_loss(
    policy: Any,
    values: jax.Array,
    batch: dict[str, jax.Array],
    config: PPOConfig,
    dist: Categorical | Gaussian = Categorical(),
) -> tuple[jax.Array, dict[str, jax.Array]]:
    """Clipped-surrogate PPO loss on a minibatch of transitions, decoupled for stale data.

    The ratio pi / pi_old is clipped around the policy at the start of this update (`old_log_prob`)
    and each sample is weighted by `min(max_behaviour_weight, pi_old / mu)`, mu the behaviour
    policy that acted (Hilton et al. 2021, "Batch size-invariance for policy optimization"). On
    fresh data (pi_old = mu) this is the standard PPO objective.

    Args:
      policy: `[T, b, ...]` the current params' distribution params at the transitions' obs.
      values: `[T, b]` the current params' values there.
      batch: `action`, `behaviour_log_prob`, `old_log_prob`, `advantage`, `target`,
        `old_value`, `mask`, each `[T, b]` (actions `[T, b, ...]`).
      config: coefficients.
      dist: the action distribution `policy` parameterises.
    """
    mask = batch["mask"]
    adv = batch["advantage"]
    if config.normalize_advantages:
        mean = masked_mean(adv, mask)
        std = jnp.sqrt(masked_mean(jnp.square(adv - mean), mask))
        adv = (adv - mean) / (std + 1e-8)
    log_ratio = dist.log_prob(policy, batch["action"]) - batch["old_log_prob"]
    ratio = jnp.exp(log_ratio)
    clipped = jnp.clip(ratio, 1.0 - config.clip_eps, 1.0 + config.clip_eps)
    weight = jnp.minimum(
        config.max_behaviour_weight, jnp.exp(batch["old_log_prob"] - batch["behaviour_log_prob"])
    )
    weight = jax.lax.stop_gradient(weight)
    pg_loss = -masked_mean(weight * jnp.minimum(ratio * adv, clipped * adv), mask)
    value_loss = jnp.square(values - batch["target"])
    if config.clip_value:
        old = batch["old_value"]
        v_clipped = old + jnp.clip(values - old, -config.clip_eps, config.clip_eps)
        value_loss = jnp.maximum(value_loss, jnp.square(v_clipped - batch["target"]))
    value_loss = 0.5 * masked_mean(value_loss, mask)
    entropy = masked_mean(dist.entropy(policy), mask)
    loss = pg_loss + config.value_cost * value_loss - config.entropy_cost * entropy
    return loss, {
        "loss": loss,
        "pg_loss": pg_loss,
        "value_loss": value_loss,
        "entropy": entropy,
        "approx_kl": masked_mean((ratio - 1.0) - log_ratio, mask),  # Schulman's k3 estimator
        "behaviour_weight": masked_mean(weight, mask),
        "clip_fraction": masked_mean((jnp.abs(ratio - 1.0) > config.clip_eps).astype(float), mask),
    }


def make_ppo(
    config: PPOConfig, network_config: NetworkConfig, env_spec: EnvSpec, num_updates: int
) -> Algorithm:
    """Builds PPO's pure functions (discrete or continuous actions)."""
    model = make_policy_model(network_config, env_spec)
    steps_per_update = config.num_epochs * config.num_minibatches
    fraction = lr_fraction(config.anneal_lr, num_updates * steps_per_update)

    optimizer = injected_optimizer(
        lambda learning_rate: optax.adam(learning_rate, eps=config.adam_eps),
        config.learning_rate,
        config.max_grad_norm,
    )
    act, greedy_act = actor_functions(model)

    def minibatch_loss(net, params, mb, loss_config):
        policy, values = model.apply({**params, "net": net}, mb["obs"])
        return ppo_loss(policy, values, mb, loss_config, model.dist)

    def sgd_steps(params, opt_state, minibatches, hparams):
        loss_config = with_hparams(config, hparams)

        def sgd_step(carry, mb):
            params, opt_state = carry
            grads, metrics = jax.grad(minibatch_loss, has_aux=True)(
                params["net"], params, mb, loss_config
            )
            lr = hparams["learning_rate"] * fraction(opt_state.count)  # per optimizer step
            params, opt_state = gradient_step(optimizer, params, opt_state, grads, lr)
            metrics["grad_norm"] = optax.tree.norm(grads)
            return (params, opt_state), metrics

        return jax.lax.scan(sgd_step, (params, opt_state), minibatches)

    def update(state: LearnerState, rollout: Rollout):
        assert_rollout_shapes(rollout)
        params = model.update_obs_stats(state.params, rollout.obs)
        policy, values = model.apply(params, rollout.obs)
        log_pi = model.dist.log_prob(jax.tree.map(lambda x: x[:-1], policy), rollout.action)
        adv, target, mask = advantages_and_targets(values, log_pi, rollout, config)
        data = {
            "obs": rollout.obs[:-1], "action": rollout.action, "advantage": adv,
            "behaviour_log_prob": rollout.agent_extras["log_prob"], "old_log_prob": log_pi,
            "target": target,
            "old_value": values[:-1], "mask": mask,
        }  # fmt: skip
        data = jax.tree.map(jax.lax.stop_gradient, data)
        rng, key = jax.random.split(state.rng)
        minibatches = _shuffled_minibatches(data, key, config.num_epochs, config.num_minibatches)
        (params, opt_state), metrics = sgd_steps(
            params, state.opt_state, minibatches, state.hparams
        )
        metrics = jax.tree.map(jnp.mean, metrics)
        metrics["learning_rate"] = jnp.asarray(
            state.hparams["learning_rate"] * fraction(state.update_step * steps_per_update),
            jnp.float32,
        )
        metrics["advantage_mean"] = masked_mean(adv, mask)
        metrics["value_mean"] = masked_mean(values[:-1], mask)
        return state._replace(
            params=params, opt_state=opt_state, rng=rng, update_step=state.update_step + 1
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


def _shuffled_minibatches(data: dict, key: jax.Array, num_epochs: int, num_minibatches: int):
    """`[T, B, ...]` arrays -> `[num_epochs * num_minibatches, T, B / num_minibatches, ...]`:
    each epoch a fresh permutation of the envs, so minibatches keep whole segments."""
    num_envs = data["mask"].shape[1]

    def one_epoch(key):
        order = jax.random.permutation(key, num_envs)
        split = (
            lambda x: jnp.swapaxes(  # noqa: E731
                x[:, order].reshape(x.shape[0], num_minibatches, -1, *x.shape[2:]), 0, 1
            )
        )
        return jax.tree.map(split, data)

    epochs = jax.vmap(one_epoch)(jax.random.split(key, num_epochs))  # [E, M, T, B/M, ...]
    return jax.tree.map(lambda x: x.reshape(-1, *x.shape[2:]), epochs)
