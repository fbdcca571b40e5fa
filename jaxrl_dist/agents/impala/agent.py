"""IMPALA's agent: the sampling actor-critic actor half and the V-trace learner half."""

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
    sampling_actor,
    sequence_inputs,
    with_hparams,
)
from jaxrl_dist.agents.impala.config import RUNTIME_HPARAMS, ImpalaConfig
from jaxrl_dist.agents.impala.loss import impala_loss
from jaxrl_dist.agents.intrinsic import RND, with_intrinsic
from jaxrl_dist.envs import EnvSpec
from jaxrl_dist.networks import NetworkConfig
from jaxrl_dist.types import Rollout, assert_rollout_shapes


def make_optimizer(config: ImpalaConfig) -> optax.GradientTransformation:
    """Gradient clipping, then RMSProp or Adam; the learning rate is set at each step."""

    def build(learning_rate):
        if config.optimizer == "rmsprop":
            return optax.rmsprop(learning_rate, decay=config.rmsprop_decay, eps=config.rmsprop_eps)
        return optax.adam(learning_rate, eps=config.adam_eps)

    return injected_optimizer(build, config.learning_rate, config.max_grad_norm)


def make_impala(
    config: ImpalaConfig,
    network_config: NetworkConfig,
    env_spec: EnvSpec,
    run_shape: RunShape,
    intrinsic: RND | None = None,
) -> Agent:
    """Builds IMPALA's two halves (discrete or continuous actions); the learning rate anneals
    linearly to 0 over the run's env steps. With `intrinsic`, the network has an intrinsic
    value head and the policy follows both rewards' advantages (`impala_loss`)."""
    model = make_policy_model(network_config, env_spec, 1 if intrinsic is None else 2)
    fraction = lr_fraction(config.anneal_lr, run_shape.num_updates)
    optimizer = make_optimizer(config)

    def loss_fn(net, params, rollout, loss_config, r_int):
        first, core_state = sequence_inputs(rollout)
        policy, values, _ = model.unroll({**params, "net": net}, rollout.obs, first, core_state)
        terms = None if r_int is None else (r_int, intrinsic.config)
        return impala_loss(policy, values, rollout, loss_config, model.dist, terms)

    def update(state: LearnerState, rollout: Rollout, r_int: jax.Array | None = None):
        assert_rollout_shapes(rollout)
        loss_config = with_hparams(config, state.hparams)
        params = model.update_obs_stats(state.params, rollout.obs)
        grads, metrics = jax.grad(loss_fn, has_aux=True)(
            params["net"], params, rollout, loss_config, r_int
        )
        lr = state.hparams["learning_rate"] * fraction(state.update_step)
        params, opt_state = gradient_step(optimizer, params, state.opt_state, grads, lr)
        metrics["grad_norm"] = optax.tree.norm(grads)
        metrics["learning_rate"] = jnp.asarray(lr, jnp.float32)
        return state._replace(
            params=params, opt_state=opt_state, update_step=state.update_step + 1
        ), metrics

    hparams = initial_hparams(config, RUNTIME_HPARAMS)
    learner = LearnerCore(lambda key: init_learner_state(model, optimizer, key, hparams), update)
    if intrinsic is not None:
        learner = with_intrinsic(learner, intrinsic)
    return Agent(sampling_actor(model), learner, RUNTIME_HPARAMS)
