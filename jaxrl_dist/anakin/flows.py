"""The Anakin runtime's data flows: what happens between a rollout and the learner's update.

The Sebulba runtime's data seam (`jaxrl_dist.data`: the on-policy queue, the replays) sits
between threads; on Anakin it is a pure piece of the program, chosen by the agent's registered
flow, with its state (`Carry.data`) in the carry:

- `OnPolicyFlow`: the rollout is the batch, one update per rollout (IMPALA, PPO);
- `PrioritizedFlow`: the rollout goes into a prioritized n-step replay on the device
  (`data/device_replay.py`) and, once it holds `min_size` transitions, each rollout is followed
  by `updates_per_rollout` draws, updates and priority write-backs (Rainbow).

`learn(core, learner, data, rollout, last_metrics) -> (learner, data, metrics)`: `last_metrics`
are what a flow reports when it does not update (a replay filling up); None asks for zeros.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp

from jaxrl_dist.agents.base import LearnerCore, Metrics
from jaxrl_dist.config import TrainConfig
from jaxrl_dist.data.device_replay import DevicePrioritizedReplay
from jaxrl_dist.types import PyTree, Rollout

REPLAY_KEY_PURPOSE = 13  # fold_in path of a seed's key: the replay's sampler


class OnPolicyFlow:
    """One update on each rollout; no state."""

    def init(self, rollout: Rollout, key: jax.Array) -> PyTree:
        return ()

    def learn(self, core: LearnerCore, learner: PyTree, data: PyTree, rollout: Rollout,
              last_metrics: Metrics | None) -> tuple[PyTree, PyTree, Metrics]:  # fmt: skip
        learner, metrics = core.update(learner, rollout)[:2]
        return learner, data, metrics


@dataclasses.dataclass(frozen=True)
class PrioritizedFlow:
    """A rollout in, then (past `min_size` held transitions) `updates_per_rollout` prioritized
    updates; metrics are their mean."""

    replay: DevicePrioritizedReplay
    min_size: int
    updates_per_rollout: int

    def init(self, rollout: Rollout, key: jax.Array) -> PyTree:
        return self.replay.init(rollout, key)

    def learn(self, core: LearnerCore, learner: PyTree, data: PyTree, rollout: Rollout,
              last_metrics: Metrics | None) -> tuple[PyTree, PyTree, Metrics]:  # fmt: skip
        data = self.replay.insert(data, rollout)

        def one_update(_, carry):
            learner, data, sums = carry
            data, window, draw = self.replay.sample(data)
            learner, metrics, priorities = core.update(learner, window)
            data = self.replay.set_priorities(data, draw, priorities)
            return learner, data, jax.tree.map(jnp.add, sums, metrics)

        shapes = jax.eval_shape(lambda: core.update(learner, self.replay.sample(data)[1])[1])
        zeros = jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), shapes)

        def updates(learner, data):
            learner, data, sums = jax.lax.fori_loop(
                0, self.updates_per_rollout, one_update, (learner, data, zeros)
            )
            return learner, data, jax.tree.map(lambda s: s / self.updates_per_rollout, sums)

        def filling(learner, data):
            return learner, data, zeros if last_metrics is None else last_metrics

        ready = self.replay.held(data) >= self.min_size
        return jax.lax.cond(ready, updates, filling, learner, data)


def make_flow(flow: str, config: TrainConfig) -> OnPolicyFlow | PrioritizedFlow:
    """The flow of an agent registered with data `flow` ("on_policy" or "prioritized"); the
    config was checked by `flow_problem`."""
    if flow == "on_policy":
        return OnPolicyFlow()
    r, unroll = config.replay, config.unroll_length
    replay = DevicePrioritizedReplay(
        slots=r.capacity // unroll, unroll_length=unroll, n_step=r.n_step,
        batch_size=config.replay_batch_size, priority_exponent=r.priority_exponent,
        priority_epsilon=r.priority_epsilon,
    )  # fmt: skip
    return PrioritizedFlow(replay, r.min_size, int(updates_per_rollout(config)))


def updates_per_rollout(config: TrainConfig) -> float:
    """Updates after each rollout that keep every transition sampled `samples_per_insert`
    times on average: `batch_size envs x T x samples_per_insert / replay batch`."""
    inserted = config.batch_size * config.unroll_length
    return inserted * config.replay.samples_per_insert / config.replay_batch_size


def flow_problem(flow: str, config: TrainConfig) -> str | None:
    """What keeps `config` from running data flow `flow` on Anakin (one line), or None."""
    if flow == "on_policy":
        return None
    if flow != "prioritized":
        return (f"config.algorithm={config.algorithm!r} learns from a {flow!r} data flow, which "
                "config.runtime='anakin' does not hold; use config.runtime='sebulba'")  # fmt: skip
    r, envs, unroll = config.replay, config.batch_size, config.unroll_length
    k = updates_per_rollout(config)
    if k < 1 or k != int(k):
        spi = config.replay_batch_size / (envs * unroll)
        return (
            f"config.replay.samples_per_insert={r.samples_per_insert} gives {k:g} updates per "
            f"rollout ({envs} envs x {unroll} steps x samples_per_insert / "
            f"replay batch {config.replay_batch_size}); Anakin needs a whole number >= 1: "
            f"use a multiple of {spi:g}"
        )
    if r.capacity // unroll < envs:
        return (
            f"config.replay.capacity={r.capacity} transitions holds fewer segments than one "
            f"rollout's {envs} (config.batch_size envs x unroll_length={unroll}); make it at "
            f"least {envs * unroll}"
        )
    if r.tolerance:
        return ("config.replay.tolerance is Sebulba's (its actors and learner run apart); on "
                "Anakin the ratio is exact: leave it 0")  # fmt: skip
    if r.save is False:
        return ("config.replay.save=False: on Anakin the replay is part of the carry, which a "
                "checkpoint holds whole (exact resume); leave it unset")  # fmt: skip
    return None


def flow_key(key: jax.Array) -> jax.Array:
    """The replay sampler's key from a seed's key."""
    return jax.random.fold_in(key, REPLAY_KEY_PURPOSE)
