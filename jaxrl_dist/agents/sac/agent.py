"""SAC's agent: a squashed-Gaussian actor half (uniform actions during the warm-up) and the
learner half: a soft clipped double-Q critic step, a reparameterised policy step against the
updated critics, a temperature step and the critics' Polyak targets, in one jitted update."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import optax

from jaxrl_dist.agents.base import ActorCore, Agent, LearnerCore, RunShape
from jaxrl_dist.agents.common import initial_hparams, per_env_keys
from jaxrl_dist.agents.distributions import Gaussian
from jaxrl_dist.agents.off_policy import (
    ContinuousModel,
    ContinuousState,
    adam,
    adam_step,
    check_continuous,
    minibatch_steps,
    polyak,
    priorities,
    split_keys,
    uniform_flag,
    uniform_or,
    warm_start,
    window_transition,
    zero_step,
)
from jaxrl_dist.agents.sac.config import SACConfig
from jaxrl_dist.envs import EnvSpec
from jaxrl_dist.networks import NetworkConfig
from jaxrl_dist.ops.continuous_control import (
    clipped_double_q_target,
    sac_actor_loss,
    sac_critic_loss,
    sac_temperature_loss,
)
from jaxrl_dist.types import Rollout

SQUASHED = Gaussian(tanh_squash=True)


def squashed_sample(model: ContinuousModel, policy_params: Any, obs: jax.Array, key: jax.Array):
    """`(tanh(u) [B, D], log pi [B])` for `u` drawn (reparameterised) from the policy at
    `obs [B, ...]`; the log-probability is of the squashed action."""
    dist = model.policy.apply(policy_params, obs)
    u = SQUASHED.sample(dist, key)
    return jnp.tanh(u), SQUASHED.log_prob(dist, u)


def make_actor(model: ContinuousModel) -> ActorCore:
    """Samples `tanh(u)` per env with its own key (uniformly in the box during the warm-up);
    greedy: `tanh(mean)`."""

    def act(params, obs, state):
        keys = split_keys(state["key"], 3)
        dist = model.policy.apply(params["policy"], model.prepare(obs))
        u = jax.vmap(SQUASHED.sample)(dist, keys[:, 1])
        action = uniform_or(params, jnp.tanh(u), keys[:, 2])
        return action, {}, {**state, "key": keys[:, 0]}

    def greedy_act(params, obs, state):
        dist = model.policy.apply(params["policy"], model.prepare(obs))
        return jnp.tanh(SQUASHED.mode(dist)), state

    return ActorCore(per_env_keys, act, greedy_act, env_action=model.env_action)


def make_sac(
    config: SACConfig, network_config: NetworkConfig, env_spec: EnvSpec, run_shape: RunShape
) -> Agent:
    """Builds SAC for `env_spec`'s continuous actions (see `SACConfig`)."""
    check_continuous("sac", env_spec, network_config)
    model = ContinuousModel.build(
        network_config, env_spec, gaussian=True, num_critics=config.num_critics
    )
    hparam_names = config.runtime_hparams()
    hparams = initial_hparams(config, hparam_names)
    optimizers = {
        "policy": adam(config, config.actor_learning_rate),
        "critic": adam(config, config.critic_learning_rate),
        "alpha": adam(config, config.alpha_learning_rate),
    }
    target_entropy = (
        -float(env_spec.action_dim) if config.target_entropy is None else config.target_entropy
    )

    def init(key: jax.Array) -> ContinuousState:
        policy, critics = model.init(key)
        log_alpha = jnp.log(jnp.asarray(config.alpha, jnp.float32))
        return ContinuousState(
            params={"policy": policy, "uniform": uniform_flag(config.warmup)},
            critic_params=critics,
            targets={"critic": critics},
            log_alpha=log_alpha,
            opt_state={
                "policy": optimizers["policy"].init(policy),
                "critic": optimizers["critic"].init(critics),
                "alpha": optimizers["alpha"].init(log_alpha),
            },
            rng=jax.random.fold_in(key, 1),
            update_step=zero_step(),
            hparams=hparams,
        )

    def temperature(state: ContinuousState) -> jax.Array:
        return jnp.exp(state.log_alpha) if config.autotune else state.hparams["alpha"]

    def critic_step(state, step, alpha, key):
        """The soft Q step: returns (new critic params, opt state, td errors [B], metrics)."""
        a_t, log_pi_t = squashed_sample(model, state.params["policy"], step.target.obs_t, key)
        q_t = model.critics.apply(state.targets["critic"], step.target.obs_t, a_t)

        def loss_fn(critic_params):
            q_tm1 = model.critics.apply(critic_params, step.obs_tm1, step.a_tm1)
            losses = sac_critic_loss(
                q_tm1, step.target.r_t, step.target.discount_t, q_t, log_pi_t, alpha
            )
            y = clipped_double_q_target(
                step.target.r_t, step.target.discount_t, q_t, -alpha * log_pi_t
            )
            return jnp.mean(step.weights * losses), (jnp.mean(q_tm1, 0) - y, q_tm1)

        (loss, (td, q_tm1)), grads = jax.value_and_grad(loss_fn, has_aux=True)(state.critic_params)
        lr = state.hparams["critic_learning_rate"]
        new, opt = adam_step(
            optimizers["critic"], state.critic_params, state.opt_state["critic"], grads, lr
        )
        metrics = {
            "critic_loss": loss,
            "q_mean": jnp.mean(q_tm1),
            "critic_grad_norm": optax.tree.norm(grads),
        }
        return new, opt, td, metrics

    def actor_step(state, critic_params, obs, alpha, key):
        def loss_fn(policy_params):
            action, log_pi = squashed_sample(model, policy_params, obs, key)
            q = model.critics.apply(critic_params, obs, action)
            return jnp.mean(sac_actor_loss(q, log_pi, alpha)), log_pi

        (loss, log_pi), grads = jax.value_and_grad(loss_fn, has_aux=True)(state.params["policy"])
        lr = state.hparams["actor_learning_rate"]
        new, opt = adam_step(
            optimizers["policy"], state.params["policy"], state.opt_state["policy"], grads, lr
        )
        metrics = {
            "actor_loss": loss,
            "entropy": -jnp.mean(log_pi),
            "actor_grad_norm": optax.tree.norm(grads),
        }
        return new, opt, log_pi, metrics

    def alpha_step(state, log_pi):
        if not config.autotune:
            return state.log_alpha, state.opt_state["alpha"], {}
        loss_fn = lambda log_alpha: jnp.mean(
            sac_temperature_loss(log_alpha, log_pi, target_entropy)
        )  # noqa: E731
        loss, grad = jax.value_and_grad(loss_fn)(state.log_alpha)
        lr = state.hparams["alpha_learning_rate"]
        new, opt = adam_step(
            optimizers["alpha"], state.log_alpha, state.opt_state["alpha"], grad, lr
        )
        return new, opt, {"alpha_loss": loss}

    def update(state: ContinuousState, window: Rollout):
        step = window_transition(
            model, window, config.discount, config.prioritized, config.importance_exponent
        )
        rng, critic_key, actor_key = jax.random.split(state.rng, 3)
        alpha = temperature(state)
        critics, critic_opt, td, metrics = critic_step(state, step, alpha, critic_key)
        policy, policy_opt, log_pi, actor_metrics = actor_step(
            state, critics, step.obs_tm1, alpha, actor_key
        )
        log_alpha, alpha_opt, alpha_metrics = alpha_step(state, log_pi)
        target = polyak(critics, state.targets["critic"], state.hparams["target_tau"])
        new = state._replace(
            params={"policy": policy, "uniform": jnp.zeros((), jnp.float32)},
            critic_params=critics,
            targets={"critic": target},
            log_alpha=log_alpha,
            opt_state={"policy": policy_opt, "critic": critic_opt, "alpha": alpha_opt},
            rng=rng,
            update_step=state.update_step + 1,
        )
        metrics.update(actor_metrics, **alpha_metrics, alpha=alpha)
        return new, metrics, priorities(config.prioritized, td)

    update = minibatch_steps(update, config.minibatches, network_config)
    learner = LearnerCore(init, update, with_params=warm_start, priorities=True)
    return Agent(make_actor(model), learner, hparam_names)
