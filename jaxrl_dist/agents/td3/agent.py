"""TD3's agent (DDPG: one critic, no delay, no smoothing): a deterministic actor half
explored with Gaussian noise (uniform actions during the warm-up) and the learner half: a
clipped double-Q critic step on smoothed target actions, and every `policy_delay` updates a
deterministic policy-gradient step and the Polyak targets, in one jitted update."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import optax

from jaxrl_dist.agents.base import ActorCore, Agent, LearnerCore, RunShape
from jaxrl_dist.agents.common import initial_hparams, per_env_keys
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
from jaxrl_dist.agents.td3.config import RUNTIME_HPARAMS, TD3Config
from jaxrl_dist.envs import EnvSpec
from jaxrl_dist.networks import NetworkConfig
from jaxrl_dist.ops.continuous_control import (
    clipped_double_q_target,
    deterministic_actor_loss,
    smoothed_target_action,
    td3_critic_loss,
)
from jaxrl_dist.types import Rollout


def make_actor(model: ContinuousModel) -> ActorCore:
    """`clip(mu(s) + noise N(0, 1), -1, 1)` per env with its own key, `noise` the params'
    (uniformly in the box during the warm-up); greedy: `mu(s)`."""

    def act(params, obs, state):
        keys = split_keys(state["key"], 3)
        mu = model.policy.apply(params["policy"], model.prepare(obs))
        eps = jax.vmap(lambda k: jax.random.normal(k, mu.shape[1:], jnp.float32))(keys[:, 1])
        action = uniform_or(params, jnp.clip(mu + params["noise"] * eps, -1.0, 1.0), keys[:, 2])
        return action, {}, {**state, "key": keys[:, 0]}

    def greedy_act(params, obs, state):
        return model.policy.apply(params["policy"], model.prepare(obs)), state

    return ActorCore(per_env_keys, act, greedy_act, env_action=model.env_action)


def make_td3(
    config: TD3Config, network_config: NetworkConfig, env_spec: EnvSpec, run_shape: RunShape
) -> Agent:
    """Builds TD3 (or DDPG) for `env_spec`'s continuous actions (see `TD3Config`)."""
    check_continuous("td3", env_spec, network_config)
    model = ContinuousModel.build(
        network_config, env_spec, gaussian=False, num_critics=config.num_critics
    )
    hparams = initial_hparams(config, RUNTIME_HPARAMS)
    optimizers = {
        "policy": adam(config, config.actor_learning_rate),
        "critic": adam(config, config.critic_learning_rate),
    }

    def init(key: jax.Array) -> ContinuousState:
        policy, critics = model.init(key)
        params = {
            "policy": policy,
            "uniform": uniform_flag(config.warmup),
            "noise": hparams["exploration_noise"],
        }
        return ContinuousState(
            params=params,
            critic_params=critics,
            targets={"critic": critics, "policy": policy},
            log_alpha=jnp.zeros((), jnp.float32),
            opt_state={
                "policy": optimizers["policy"].init(policy),
                "critic": optimizers["critic"].init(critics),
            },
            rng=jax.random.fold_in(key, 1),
            update_step=zero_step(),
            hparams=hparams,
        )

    def critic_step(state, step, key):
        """The clipped double-Q step: (new critic params, opt state, td errors [B], metrics)."""
        hp = state.hparams
        mu_t = model.policy.apply(state.targets["policy"], step.target.obs_t)
        a_t = smoothed_target_action(mu_t, key, hp["target_noise"], config.target_noise_clip)
        q_t = model.critics.apply(state.targets["critic"], step.target.obs_t, a_t)

        def loss_fn(critic_params):
            q_tm1 = model.critics.apply(critic_params, step.obs_tm1, step.a_tm1)
            losses = td3_critic_loss(q_tm1, step.target.r_t, step.target.discount_t, q_t)
            y = clipped_double_q_target(step.target.r_t, step.target.discount_t, q_t)
            return jnp.mean(step.weights * losses), (jnp.mean(q_tm1, 0) - y, q_tm1)

        (loss, (td, q_tm1)), grads = jax.value_and_grad(loss_fn, has_aux=True)(state.critic_params)
        new, opt = adam_step(
            optimizers["critic"],
            state.critic_params,
            state.opt_state["critic"],
            grads,
            hp["critic_learning_rate"],
        )
        metrics = {
            "critic_loss": loss,
            "q_mean": jnp.mean(q_tm1),
            "critic_grad_norm": optax.tree.norm(grads),
        }
        return new, opt, td, metrics

    def policy_loss(policy_params, critics, obs):
        """The deterministic policy gradient's loss through the first critic."""
        q = model.critics.apply(critics, obs, model.policy.apply(policy_params, obs))
        return jnp.mean(deterministic_actor_loss(q[0]))

    def policy_step(state, critics, obs):
        """The deterministic policy-gradient step through the first (updated) critic and the
        Polyak targets: (policy params, its opt state, targets, actor loss)."""

        loss, grads = jax.value_and_grad(policy_loss)(state.params["policy"], critics, obs)
        tau = state.hparams["target_tau"]
        policy, opt = adam_step(
            optimizers["policy"],
            state.params["policy"],
            state.opt_state["policy"],
            grads,
            state.hparams["actor_learning_rate"],
        )
        targets = {
            "critic": polyak(critics, state.targets["critic"], tau),
            "policy": polyak(policy, state.targets["policy"], tau),
        }
        return policy, opt, targets, loss

    def delayed_policy_step(state, critics, obs, updates):
        """`policy_step` on the updates `policy_delay` divides (counted from 1), else the
        policy, its optimizer and the targets as they were, and the policy's loss as it stands
        (a forward pass, so the logged loss is the policy's on every update). One `lax.cond`:
        the skipped updates compute no policy gradient (where nothing vmaps it into a
        select, as Anakin's seeds do)."""
        if config.policy_delay == 1:
            return policy_step(state, critics, obs)

        def skip(state, critics, obs):  # the policy's loss as it stands, for the log
            loss = policy_loss(state.params["policy"], critics, obs)
            return state.params["policy"], state.opt_state["policy"], state.targets, loss

        due = updates % config.policy_delay == 0
        return jax.lax.cond(due, policy_step, skip, state, critics, obs)

    def update(state: ContinuousState, window: Rollout):
        step = window_transition(
            model, window, config.discount, config.prioritized, config.importance_exponent
        )
        rng, critic_key = jax.random.split(state.rng)
        critics, critic_opt, td, metrics = critic_step(state, step, critic_key)
        updates = state.update_step + 1
        policy, policy_opt, targets, actor_loss = delayed_policy_step(
            state, critics, step.obs_tm1, updates
        )
        new = state._replace(
            params={
                "policy": policy,
                "uniform": jnp.zeros((), jnp.float32),
                "noise": state.hparams["exploration_noise"],
            },
            critic_params=critics,
            targets=targets,
            opt_state={"policy": policy_opt, "critic": critic_opt},
            rng=rng,
            update_step=updates,
        )
        metrics.update(actor_loss=actor_loss, exploration_noise=state.hparams["exploration_noise"])
        return new, metrics, priorities(config.prioritized, td)

    update = minibatch_steps(update, config.minibatches, network_config)
    learner = LearnerCore(init, update, with_params=warm_start, priorities=True)
    return Agent(make_actor(model), learner, RUNTIME_HPARAMS)
