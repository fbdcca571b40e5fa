"""The Anakin runtime's data flows: what happens between a rollout and the learner's update.

The Sebulba runtime's data seam (`jaxrl_dist.data`: the on-policy queue, the replays) sits
between threads; on Anakin it is a pure piece of the program, chosen by the agent's registered
flow, with its state (`Carry.data`) in the carry:

- `OnPolicyFlow`: the rollout is the batch, one update per rollout (IMPALA, PPO);
- `PrioritizedFlow`: the rollout goes into a prioritized n-step replay on the device
  (`data/device_replay.py`) and, once it holds `min_size` transitions, each rollout is followed
  by `updates_per_rollout` draws, updates and priority write-backs (Rainbow).

A flow has `init(rollout, key) -> data` (its state for rollouts shaped as `rollout`, `[T + 1,
B]`), `ready(data) -> [] bool` (whether the next rollout will be learned from; the program asks
it of one seed's state outside the seeds' `vmap`, as every seed's fills alike, so the updates
are skipped, not computed and thrown away as a batched `lax.cond` would) and `learn(core,
learner, data, rollout, ready, last_metrics) -> (learner, data, metrics)`, where `last_metrics`
are what it reports when it does not update (a replay filling up; None: zeros).
"""

from __future__ import annotations

import dataclasses
import math
from fractions import Fraction

import jax
import jax.numpy as jnp

from jaxrl_dist.agents.base import LearnerCore, Metrics
from jaxrl_dist.config import TrainConfig
from jaxrl_dist.data.device_replay import DevicePrioritizedReplay, DeviceReplay
from jaxrl_dist.types import PyTree, Rollout


class OnPolicyFlow:
    """One update on each rollout; no state."""

    def init(self, rollout: Rollout, key: jax.Array) -> PyTree:
        return ()

    def ready(self, data: PyTree) -> jax.Array:
        return jnp.asarray(True)

    def learn(self, core: LearnerCore, learner: PyTree, data: PyTree, rollout: Rollout,
              ready: jax.Array, last_metrics: Metrics | None,
              ) -> tuple[PyTree, PyTree, Metrics]:  # fmt: skip
        learner, metrics = core.update(learner, rollout)[:2]
        return learner, data, metrics


@dataclasses.dataclass(frozen=True)
class PrioritizedFlow:
    """A rollout of `num_envs` segments in, then (once the replay holds `min_size`
    transitions) `updates_per_rollout` prioritized updates; metrics are their mean."""

    replay: DevicePrioritizedReplay
    min_size: int
    updates_per_rollout: int
    num_envs: int

    def init(self, rollout: Rollout, key: jax.Array) -> PyTree:
        return self.replay.init(rollout, key)

    def ready(self, data: DeviceReplay) -> jax.Array:
        """Whether the replay will hold `min_size` transitions once the next rollout is in."""
        segments = jnp.minimum(data.size + self.num_envs, self.replay.slots)
        return segments * self.replay.unroll_length >= self.min_size

    def learn(self, core: LearnerCore, learner: PyTree, data: DeviceReplay, rollout: Rollout,
              ready: jax.Array, last_metrics: Metrics | None,
              ) -> tuple[PyTree, DeviceReplay, Metrics]:  # fmt: skip
        """`rollout` `[T + 1, B]` into the replay, then the updates if `ready` (unbatched)."""
        data = self.replay.insert(data, rollout)

        def one_update(_, carry):
            learner, data, sums = carry
            data, window, draw = self.replay.sample(data)
            learner, metrics, priorities = core.update(learner, window)
            data = self.replay.set_priorities(data, draw, priorities)
            return learner, data, jax.tree.map(jnp.add, sums, metrics)

        shapes = last_metrics
        if shapes is None:  # the metrics' shapes, traced once (at init)
            shapes = jax.eval_shape(lambda: core.update(learner, self.replay.sample(data)[1])[1])
        zeros = jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), shapes)
        shown = zeros if last_metrics is None else last_metrics

        def updates(learner, data):
            learner, data, sums = jax.lax.fori_loop(
                0, self.updates_per_rollout, one_update, (learner, data, zeros)
            )
            return learner, data, jax.tree.map(lambda s: s / self.updates_per_rollout, sums)

        def filling(learner, data):
            return learner, data, shown

        return jax.lax.cond(ready, updates, filling, learner, data)


def make_flow(flow: str, config: TrainConfig) -> OnPolicyFlow | PrioritizedFlow:
    """The flow of an agent registered with data `flow` ("on_policy" or "prioritized") for a
    config `flow_problem` passed."""
    if flow == "on_policy":
        return OnPolicyFlow()
    if flow != "prioritized":
        raise ValueError(f"no Anakin data flow {flow!r}")
    r, unroll = config.replay, config.unroll_length
    replay = DevicePrioritizedReplay(
        slots=r.capacity // unroll, unroll_length=unroll, n_step=r.n_step,
        batch_size=config.replay_batch_size, priority_exponent=r.priority_exponent,
        priority_epsilon=r.priority_epsilon,
    )  # fmt: skip
    k = updates_per_rollout(config)
    return PrioritizedFlow(replay, r.min_size, k.numerator, config.batch_size)


def updates_per_rollout(config: TrainConfig) -> Fraction:
    """Updates after each rollout that keep every transition sampled `samples_per_insert`
    times on average: `batch_size envs x T x samples_per_insert / replay batch`, exactly (as
    written: 2.2 is 11/5, not its nearest float)."""
    inserted = config.batch_size * config.unroll_length
    spi = Fraction(repr(config.replay.samples_per_insert))
    return inserted * spi / config.replay_batch_size


def flow_problem(flow: str, config: TrainConfig) -> str | None:
    """What keeps `config` from running data flow `flow` on Anakin (one line), or None."""
    r, envs, unroll = config.replay, config.batch_size, config.unroll_length
    if flow == "on_policy":
        if r.batch_size:
            return (f"config.replay.batch_size={r.batch_size} is a replay's, and "
                    f"{config.algorithm!r} learns on-policy; leave it 0")  # fmt: skip
        return None
    if flow != "prioritized":
        return (f"config.algorithm={config.algorithm!r} learns from a {flow!r} data flow, which "
                "config.runtime='anakin' does not hold; use config.runtime='sebulba'")  # fmt: skip
    k = updates_per_rollout(config)
    if k < 1 or k.denominator != 1:
        step = Fraction(config.replay_batch_size, envs * unroll)  # spi giving one update
        near = sorted({max(1, math.floor(k)), max(1, math.ceil(k))})
        values = " or ".join(f"{float(m * step):g}" for m in near)
        return (
            f"config.replay.samples_per_insert={r.samples_per_insert} gives {float(k):g} updates "
            f"per rollout ({envs} envs x {unroll} steps x samples_per_insert / replay batch "
            f"{config.replay_batch_size}); Anakin needs a whole number >= 1: use {values}"
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
