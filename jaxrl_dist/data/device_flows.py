"""The data flows' device implementations: what happens between a rollout and the learner's
update inside the Anakin runtime's jitted program (`flows.py` holds each flow's definition).

The Sebulba runtime's data seam (the on-policy queue, the replays) sits between threads; on
Anakin it is a pure piece of the program, chosen by the agent's flow, with its state
(`Carry.data`) in the carry:

- `OnPolicyFlow`: the rollout is the batch, one update per rollout (IMPALA, PPO);
- `PrioritizedFlow`: the rollout goes into a prioritized replay on the device, of n-step
  transitions (`data/device_replay.py`, Rainbow) or of whole sequences with their recurrent
  state (`data/device_sequences.py`, R2D2), and, once it holds `min_size` (transitions or
  segments), each rollout is followed by `updates_per_rollout` draws, updates and priority
  write-backs.

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
from typing import Any

import jax
import jax.numpy as jnp

from jaxrl_dist.data.device_replay import DevicePrioritizedReplay, DeviceReplay
from jaxrl_dist.data.device_sequences import DeviceSequenceReplay
from jaxrl_dist.types import PyTree, Rollout

# The learner half (`agents.base.LearnerCore`: `update(state, batch) -> (state, metrics, ...)`)
# and its metrics; the data layer sits below the agents and only calls them.
LearnerCore = Any
Metrics = dict[str, jax.Array]


class OnPolicyFlow:
    """One update on each rollout; no state."""

    def init(self, rollout: Rollout, key: jax.Array) -> PyTree:
        return ()

    def ready(self, data: PyTree) -> jax.Array:
        return jnp.asarray(True)

    def learn(
        self,
        core: LearnerCore,
        learner: PyTree,
        data: PyTree,
        rollout: Rollout,
        ready: jax.Array,
        last_metrics: Metrics | None,
    ) -> tuple[PyTree, PyTree, Metrics]:
        learner, metrics = core.update(learner, rollout)[:2]
        return learner, data, metrics


@dataclasses.dataclass(frozen=True)
class PrioritizedFlow:
    """A rollout of `num_envs` segments in, then (once the replay holds `min_size`
    transitions, or segments for sequences) `updates_per_rollout` prioritized updates; metrics
    are their mean."""

    replay: DevicePrioritizedReplay | DeviceSequenceReplay
    min_size: int
    updates_per_rollout: int
    num_envs: int

    @classmethod
    def of(cls, config: Any) -> PrioritizedFlow:
        """The flow of a config `prioritized_flow_problem` passed: `config.replay`'s
        replay of `capacity // unroll_length` segments."""
        r, unroll = config.replay, config.unroll_length
        replay = DevicePrioritizedReplay(
            slots=r.capacity // unroll,
            unroll_length=unroll,
            n_step=r.n_step,
            batch_size=config.replay_batch_size,
            priority_exponent=r.priority_exponent,
            priority_epsilon=r.priority_epsilon,
        )
        k = updates_per_rollout(config)
        return cls(replay, r.min_size, k.numerator, config.batch_size)

    @classmethod
    def of_sequences(cls, config: Any) -> PrioritizedFlow:
        """R2D2's flow of a config `sequence_flow_problem` passed: `config.replay`'s replay of
        `capacity` segments."""
        r = config.replay
        replay = DeviceSequenceReplay(
            slots=r.capacity,
            unroll_length=config.unroll_length,
            batch_size=config.replay_batch_size,
            priority_exponent=r.priority_exponent,
            priority_epsilon=r.priority_epsilon,
        )
        k = updates_per_rollout(config, per_segment=1)
        return cls(replay, r.min_size, k.numerator, config.batch_size)

    def init(self, rollout: Rollout, key: jax.Array) -> PyTree:
        return self.replay.init(rollout, key)

    def ready(self, data: DeviceReplay) -> jax.Array:
        """Whether the replay will hold `min_size` once the next rollout is in."""
        segments = jnp.minimum(data.size + self.num_envs, self.replay.slots)
        return segments * self.replay.units_per_segment >= self.min_size

    def learn(
        self,
        core: LearnerCore,
        learner: PyTree,
        data: DeviceReplay,
        rollout: Rollout,
        ready: jax.Array,
        last_metrics: Metrics | None,
    ) -> tuple[PyTree, DeviceReplay, Metrics]:
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


def updates_per_rollout(config: Any, per_segment: int | None = None) -> Fraction:
    """Updates after each rollout that keep every item (transition, or segment with
    `per_segment=1`) sampled `samples_per_insert` times on average: `batch_size envs x
    per_segment (T) x samples_per_insert / replay batch`, exactly (as written: 2.2 is 11/5, not
    its nearest float)."""
    inserted = config.batch_size * (config.unroll_length if per_segment is None else per_segment)
    spi = Fraction(repr(config.replay.samples_per_insert))
    return inserted * spi / config.replay_batch_size


def _whole_updates_problem(config: Any, per_segment: int) -> str | None:
    """One line when `samples_per_insert` gives no whole number >= 1 of updates a rollout."""
    r, envs, unroll = config.replay, config.batch_size, config.unroll_length
    k = updates_per_rollout(config, per_segment)
    if k >= 1 and k.denominator == 1:
        return None
    step = Fraction(config.replay_batch_size, envs * per_segment)  # spi giving one update
    near = sorted({max(1, math.floor(k)), max(1, math.ceil(k))})
    values = " or ".join(f"{float(m * step):g}" for m in near)
    steps = f" x {unroll} steps" if per_segment > 1 else " (a segment each)"
    return (
        f"config.replay.samples_per_insert={r.samples_per_insert} gives {float(k):g} updates "
        f"per rollout ({envs} envs{steps} x samples_per_insert / replay batch "
        f"{config.replay_batch_size}); Anakin needs a whole number >= 1: use {values}"
    )


def _saved_problem(config: Any) -> str | None:
    if config.replay.save is False:
        return (
            "config.replay.save=False: on Anakin the replay is part of the carry, which a "
            "checkpoint holds whole (exact resume); leave it unset"
        )
    return None


def sequence_flow_problem(config: Any) -> str | None:
    """What keeps `config` from running R2D2's `PrioritizedFlow.of_sequences` (one line), or
    None."""
    r, envs = config.replay, config.batch_size
    problem = _whole_updates_problem(config, 1)
    if problem:
        return problem
    if r.capacity < envs:
        return (
            f"config.replay.capacity={r.capacity} segments is fewer than one rollout's {envs} "
            f"(config.batch_size); make it at least {envs}"
        )
    return _saved_problem(config)


def prioritized_flow_problem(config: Any) -> str | None:
    """What keeps `config` from running `PrioritizedFlow` (one line), or None."""
    r, envs, unroll = config.replay, config.batch_size, config.unroll_length
    problem = _whole_updates_problem(config, unroll)
    if problem:
        return problem
    if r.capacity // unroll < envs:
        return (
            f"config.replay.capacity={r.capacity} transitions holds fewer segments than one "
            f"rollout's {envs} (config.batch_size envs x unroll_length={unroll}); make it at "
            f"least {envs * unroll}"
        )
    return _saved_problem(config)
