"""PPO, asynchronous (Sebulba style): clipped surrogate on rollouts from actor threads.

Schulman et al. 2017 ("Proximal Policy Optimization Algorithms"), with the implementation details
of Huang et al. 2022 ("The 37 Implementation Details of PPO"): GAE (Schulman et al. 2016),
per-minibatch advantage normalisation, optional value clipping, entropy bonus, global gradient
clipping, learning rate annealed linearly over every optimizer step.

One `update(state, rollout)` runs `num_epochs` passes over `num_minibatches` minibatches of the
`[T + 1, B]` rollout inside one jitted `lax.scan`; minibatches split the env axis B, so every
minibatch keeps whole segments (a recurrent core unrolls each from its stored state).
Rollouts a few updates stale are handled with the decoupled objective of Hilton et al. 2021:
the ratio is clipped around the policy at the start of the update and each sample is weighted
by the truncated ratio of that policy to the behaviour policy that acted (whose log-probabilities
travel in the rollout); `advantage_estimator="vtrace"` also corrects the advantages and value
targets for the staleness with V-trace (Espeholt et al. 2018), as APPO does.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import optax

from jaxrl_dist.agents.base import Agent, LearnerCore, LearnerState, RunShape
from jaxrl_dist.agents.common import (
    gradient_step,
    init_learner_state,
    initial_hparams,
    injected_optimizer,
    lr_fraction,
    make_policy_model,
    masked_mean,
    sampling_actor,
    sequence_inputs,
    sgd_loop_unroll,
    value_means,
    with_hparams,
)
from jaxrl_dist.agents.intrinsic import RND, with_intrinsic
from jaxrl_dist.agents.ppo.config import RUNTIME_HPARAMS, PPOConfig
from jaxrl_dist.agents.ppo.loss import (
    advantages_and_targets,
    combined_advantages_and_targets,
    ppo_loss,
)
from jaxrl_dist.envs import EnvSpec
from jaxrl_dist.networks import NetworkConfig
from jaxrl_dist.types import Rollout, assert_rollout_shapes


def make_ppo(
    config: PPOConfig,
    network_config: NetworkConfig,
    env_spec: EnvSpec,
    run_shape: RunShape,
    intrinsic: RND | None = None,
) -> Agent:
    """Builds PPO's two halves (discrete or continuous actions); the learning rate anneals
    linearly to 0 over the run's env steps, per optimizer step. With `intrinsic`, the network
    has an intrinsic value head and the advantage is `ext_coef` times the env reward's plus
    `int_coef` times the intrinsic reward's (Burda et al. 2018)."""
    model = make_policy_model(network_config, env_spec, 1 if intrinsic is None else 2)
    steps_per_update = config.num_epochs * config.num_minibatches
    fraction = lr_fraction(config.anneal_lr, run_shape.num_updates * steps_per_update)

    optimizer = injected_optimizer(
        lambda learning_rate: optax.adam(learning_rate, eps=config.adam_eps),
        config.learning_rate,
        config.max_grad_norm,
    )

    def minibatch_loss(net, params, mb, loss_config):
        core_state = jax.tree.map(lambda x: x[0], mb["core_state"])
        policy, values, _ = model.unroll({**params, "net": net}, mb["obs"], mb["first"], core_state)
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

        unroll = sgd_loop_unroll(network_config, steps_per_update)
        return jax.lax.scan(sgd_step, (params, opt_state), minibatches, unroll=unroll)

    def advantages(values, log_pi, rollout, r_int):
        """(advantages `[T, B]`, targets shaped like `values[:-1]`, mask `[T, B]`)."""
        if r_int is None:
            return advantages_and_targets(values, log_pi, rollout, config)
        return combined_advantages_and_targets(
            values, log_pi, rollout, r_int, config, intrinsic.config
        )

    def update(state: LearnerState, rollout: Rollout, r_int: jax.Array | None = None):
        assert_rollout_shapes(rollout)
        params = model.update_obs_stats(state.params, rollout.obs)
        first, core_state = sequence_inputs(rollout)
        policy, values, _ = model.unroll(params, rollout.obs, first, core_state)
        log_pi = model.dist.log_prob(jax.tree.map(lambda x: x[:-1], policy), rollout.action)
        adv, target, mask = advantages(values, log_pi, rollout, r_int)
        data = {
            "obs": jax.tree.map(lambda x: x[:-1], rollout.obs),
            "action": rollout.action,
            "advantage": adv,
            "behaviour_log_prob": rollout.agent_extras["log_prob"],
            "old_log_prob": log_pi,
            "target": target,
            "old_value": values[:-1],
            "mask": mask,
            "first": first[:-1],
            "core_state": rollout.core_state,  # [1, B]: whole segments
        }
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
        metrics.update(value_means(values[:-1], mask))
        return state._replace(
            params=params, opt_state=opt_state, rng=rng, update_step=state.update_step + 1
        ), metrics

    hparams = initial_hparams(config, RUNTIME_HPARAMS)
    learner = LearnerCore(lambda key: init_learner_state(model, optimizer, key, hparams), update)
    if intrinsic is not None:
        learner = with_intrinsic(learner, intrinsic)
    return Agent(sampling_actor(model), learner, RUNTIME_HPARAMS)


def _shuffled_minibatches(data: dict, key: jax.Array, num_epochs: int, num_minibatches: int):
    """`[T, B, ...]` arrays -> `[num_epochs * num_minibatches, T, B / num_minibatches, ...]`:
    each epoch a fresh permutation of the envs, so minibatches keep whole segments."""
    num_envs = data["mask"].shape[1]

    def one_epoch(key):
        order = jax.random.permutation(key, num_envs)
        split = (
            lambda x: jnp.swapaxes(  # noqa: E731
                x[:, order].reshape(
                    x.shape[0], num_minibatches, num_envs // num_minibatches, *x.shape[2:]
                ),
                0,
                1,
            )
        )
        return jax.tree.map(split, data)

    epochs = jax.vmap(one_epoch)(jax.random.split(key, num_epochs))  # [E, M, T, B/M, ...]
    # Sizes spelled out, not -1: a width-0 leaf (continuous agents' action mask) has no size
    # for numpy to infer a -1 from.
    return jax.tree.map(lambda x: x.reshape(x.shape[0] * x.shape[1], *x.shape[2:]), epochs)
