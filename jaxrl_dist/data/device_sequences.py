"""The prioritized replay of whole sequences as pure JAX functions: R2D2's replay on the Anakin
runtime, held in its carry on the device (`device_flows.py`).

The same rules as the host's (`data/sequences.py`), so an R2D2 learner cannot tell the two
apart:

- storage is a ring of whole segments, every `Rollout` leaf `[T + 1 or T, slots, ...]` (the
  `core_state` each segment was acted from `[1, slots, ...]`); each rollout `[T + 1, B]` writes
  its `B` columns into the next `B` slots, overwriting the oldest;
- a draw is `batch_size` segments in proportion to their stored priority, stratified (one
  uniform point in each of `batch_size` equal slices of the total mass), returned whole as a
  `[T + 1, batch_size]` rollout with `replay_probability` and `replay_count` (segments held) in
  `agent_extras`, `[T, batch_size]`;
- a new segment gets the largest stored priority so far (1 at first); a learner's priorities
  (one per sequence) come back stored as `(priority + epsilon) ** alpha`, a segment drawn twice
  in one batch keeping the last.

As for the transitions' device replay (`device_replay.py`): updates follow the insert in the
same program, so no priority can come back for an overwritten slot, and the sampler's key lives
in the state (a resume draws the same batches).
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp

from jaxrl_dist.data.device_replay import DeviceReplay, running_mass
from jaxrl_dist.types import Rollout


@dataclasses.dataclass(frozen=True)
class DeviceSequenceReplay:
    """The replay's fixed sizes and exponents; its functions are pure and jittable.

    Attributes:
      slots: segments the ring holds (`config.replay.capacity`, counted in segments).
      unroll_length: T, the steps of a segment.
      batch_size: segments drawn per update.
      priority_exponent: alpha (R2D2: 0.9); 0 = uniform.
      priority_epsilon: added to a learner's priority before the exponent.
    """

    slots: int
    unroll_length: int
    batch_size: int
    priority_exponent: float
    priority_epsilon: float

    units_per_segment = 1  # `min_size` and `replay_count` count segments

    def init(self, example: Rollout, key: jax.Array) -> DeviceReplay:
        """An empty replay for rollouts shaped as `example` (`[T + 1, B]`, arrays or shapes)."""
        ring = jax.tree.map(
            lambda x: jnp.zeros((x.shape[0], self.slots, *x.shape[2:]), x.dtype), example
        )
        return DeviceReplay(
            ring=ring,
            priority=jnp.zeros((self.slots,), jnp.float32),
            max_priority=jnp.ones((), jnp.float32),
            next_slot=jnp.zeros((), jnp.int32),
            size=jnp.zeros((), jnp.int32),
            key=key,
        )

    def insert(self, replay: DeviceReplay, rollout: Rollout) -> DeviceReplay:
        """Writes the `B` segments of `rollout` (`[T + 1, B]`, `B <= slots`) into the next `B`
        slots, each with the largest priority so far (every sequence holds steps to learn)."""
        width = rollout.action.shape[1]
        slots = (replay.next_slot + jnp.arange(width)) % self.slots
        ring = jax.tree.map(lambda r, x: r.at[:, slots].set(x), replay.ring, rollout)
        return replay._replace(
            ring=ring,
            priority=replay.priority.at[slots].set(replay.max_priority),
            next_slot=(replay.next_slot + width) % self.slots,
            size=jnp.minimum(replay.size + width, self.slots),
        )

    def sample(self, replay: DeviceReplay) -> tuple[DeviceReplay, Rollout, jax.Array]:
        """`batch_size` segments by priority -> (the replay with its key advanced, them as a
        `[T + 1, batch_size]` rollout, their slots `[batch_size]`). Needs a positive total
        priority (the flow samples only once `min_size` segments are held)."""
        key, draw_key = jax.random.split(replay.key)
        total = jnp.sum(replay.priority)
        batch = self.batch_size
        u = (jnp.arange(batch) + jax.random.uniform(draw_key, (batch,))) * (total / batch)
        cdf = running_mass(replay.priority)
        u = jnp.minimum(u, jnp.nextafter(cdf[-1], 0.0))
        slot = jnp.minimum(jnp.searchsorted(cdf, u, side="right"), self.slots - 1)
        slot = slot.astype(jnp.int32)
        held = jax.tree.map(lambda r: r[:, slot], replay.ring)
        shape = held.action.shape[:2]
        extras = {
            **held.agent_extras,
            "replay_probability": jnp.broadcast_to(replay.priority[slot] / total, shape),
            "replay_count": jnp.full(shape, replay.size, jnp.float32),
        }
        return replay._replace(key=key), held._replace(agent_extras=extras), slot

    def set_priorities(
        self, replay: DeviceReplay, slot: jax.Array, priorities: jax.Array
    ) -> DeviceReplay:
        """Stores a learner's `priorities` `[batch_size]` (one per drawn sequence) as `(p +
        epsilon) ** alpha`, a negative one as 0; a segment drawn twice keeps the last."""
        p = jnp.maximum(priorities.astype(jnp.float32), 0.0)
        stored = (p + self.priority_epsilon) ** self.priority_exponent
        index = jnp.arange(self.batch_size)
        later = index[None, :] > index[:, None]
        overridden = jnp.any((slot[None, :] == slot[:, None]) & later, axis=1)
        target = jnp.where(overridden, self.slots, slot)  # out of range: dropped
        return replay._replace(
            priority=replay.priority.at[target].set(stored, mode="drop"),
            max_priority=jnp.maximum(replay.max_priority, jnp.max(stored)),
        )
