"""An actor-critic learner with an intrinsic reward beside it (`config.intrinsic`).

`with_intrinsic(core, rnd, config)` wraps a `LearnerCore` whose `update(state, rollout,
intrinsic_reward)` takes the intrinsic rewards `[T, B]` of the rollout's transitions (PPO's and
IMPALA's do: they learn them with their intrinsic value head). Each update first asks RND for
the batch's rewards (and trains its predictor), then updates the agent. In pre-training the
env's reward is replaced by zeros before the agent sees it. Everything the runtime reads
(acting params, run-time hyperparameters, the update count) is the agent's own, so warm
starts, schedules and run-time changes work unchanged.

Params put into the learner (a warm start, a load into a running job) replace everything but
the intrinsic value head, which stays the learner's own: its values are returns of this
learner's RND (its predictor and statistics), which params do not bring. A fine-tune from a
pre-training thus starts its intrinsic head fresh, as its RND starts fresh (on DeepSea 10 x 10,
8 of 10 fine-tunes found the treasure with the head fresh, 6 of 10 with it loaded:
benchmarks/results/cpu/learning/deepsea10_intrinsic_head/).
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp

from jaxrl_dist.agents.base import LearnerCore
from jaxrl_dist.agents.intrinsic.rnd import RND, IntrinsicLearnerState
from jaxrl_dist.types import Rollout


def with_intrinsic(core: LearnerCore, rnd: RND) -> LearnerCore:
    """`core` learning from the env's reward and `rnd`'s (the env's alone replaced by 0 when
    `rnd.config.pretraining`); its state an `IntrinsicLearnerState`."""
    pretraining = rnd.config.pretraining

    def init(key: jax.Array) -> IntrinsicLearnerState:
        return IntrinsicLearnerState(core.init(key), rnd.init(jax.random.fold_in(key, 0x5EED)))

    def update(state: IntrinsicLearnerState, rollout: Rollout):
        rnd_state, r_int, rnd_metrics = rnd.step(state.rnd, rollout)
        if pretraining:
            rollout = rollout._replace(reward=jnp.zeros_like(rollout.reward))
        agent, metrics = core.update(state.agent, rollout, r_int)
        return IntrinsicLearnerState(agent, rnd_state), {**metrics, **rnd_metrics}

    return dataclasses.replace(
        core,
        init=init,
        update=update,
        actor_params=lambda state: core.actor_params(state.agent),
        with_params=lambda state, params: state._replace(
            agent=core.with_params(state.agent, _own_head(core.actor_params(state.agent), params))
        ),
        hparams=lambda state: core.hparams(state.agent),
        with_hparams=lambda state, hparams: state._replace(
            agent=core.with_hparams(state.agent, hparams)
        ),
        update_count=lambda state: core.update_count(state.agent),
    )


INTRINSIC_HEAD = "intrinsic_value_head"


def _own_head(own: dict, loaded: dict) -> dict:
    """`loaded` params with every `INTRINSIC_HEAD` subtree taken from `own` (same layout)."""
    if not isinstance(loaded, dict):
        return loaded
    return {
        key: own[key] if key == INTRINSIC_HEAD else _own_head(own[key], value)
        for key, value in loaded.items()
    }
