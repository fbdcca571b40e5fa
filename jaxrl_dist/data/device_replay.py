"""The prioritized n-step replay as pure JAX functions: the replay of the Anakin runtime, held
in its carry on the device (`device_flows.py`).

The same rules as the host replay (`data/prioritized.py`), so a Rainbow learner cannot tell the
two apart:

- storage is a ring of whole segments, every `Rollout` leaf `[T + 1 or T, slots, ...]`; each
  rollout `[T + 1, B]` writes its `B` columns into the next `B` slots, overwriting the oldest;
- a draw picks a transition `(slot, t)` in proportion to its stored priority, stratified as
  `SumTree.sample` (one uniform draw in each of `batch_size` equal slices of the total mass);
- what the learner gets is its n-step window, cut at the segment's end by the host replay's
  own `windows` function, with `replay_probability` and `replay_count` (transitions held) in
  `agent_extras`, `[n, B]`;
- a new transition gets the largest stored priority so far (1 at first), one that starts at an
  episode end gets 0 and is never drawn; a learner's priorities come back stored as
  `(priority + epsilon) ** alpha`, a transition drawn twice in one batch keeping the last.

What differs is only what the device makes moot: updates follow the insert in the same program,
so a priority can never come back for an overwritten slot (no generations), and the sampler's
key lives in the state (a resume draws the same batches).

The mass is summed per slot first and the slot drawn from those sums, then the step within the
slot: two short float32 running sums instead of one over every transition (the host's sums are
float64). XLA does not add a running sum in order (on CPU it may step down, or step up over a
slot with no mass), so each is made flat over zero mass and never decreasing before it is
searched: a draw can only land on a transition with priority > 0.
"""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

import jax
import jax.numpy as jnp

from jaxrl_dist.types import Rollout, windows


class DeviceReplay(NamedTuple):
    """A replay's whole state (checkpointed with the carry).

    Attributes:
      ring: the held segments, every leaf `[T + 1 or T, slots, ...]`.
      priority: `[slots, T]` float32 stored priorities `(p + eps) ** alpha`; 0 = never drawn.
      max_priority: `[]` float32, the largest stored priority so far (new transitions get it).
      next_slot: `[]` int32, where the next rollout's first column goes.
      size: `[]` int32, segments held (at most `slots`).
      key: the sampler's PRNG key.
    """

    ring: Rollout
    priority: jax.Array
    max_priority: jax.Array
    next_slot: jax.Array
    size: jax.Array
    key: jax.Array


class Draw(NamedTuple):
    """Which transitions a batch holds: ring slot and step, each `[batch_size]` int32."""

    slot: jax.Array
    t: jax.Array


@dataclasses.dataclass(frozen=True)
class DevicePrioritizedReplay:
    """The replay's fixed sizes and exponents; its functions are pure and jittable.

    Attributes:
      slots: segments the ring holds (the capacity in transitions // T).
      unroll_length: T, transitions per segment.
      n_step: window length (1..T).
      batch_size: transitions drawn per update.
      priority_exponent: alpha; 0 = uniform over the transitions that can be drawn.
      priority_epsilon: added to a learner's priority before the exponent.
    """

    slots: int
    unroll_length: int
    n_step: int
    batch_size: int
    priority_exponent: float
    priority_epsilon: float

    @property
    def units_per_segment(self) -> int:
        """`min_size` and `replay_count` count transitions: T a segment."""
        return self.unroll_length

    def __post_init__(self):
        if not 1 <= self.n_step <= self.unroll_length:
            raise ValueError(f"n_step={self.n_step} must be in [1, T={self.unroll_length}]")

    def init(self, example: Rollout, key: jax.Array) -> DeviceReplay:
        """An empty replay for rollouts shaped as `example` (`[T + 1, B]`, arrays or shapes)."""
        ring = jax.tree.map(
            lambda x: jnp.zeros((x.shape[0], self.slots, *x.shape[2:]), x.dtype), example
        )
        return DeviceReplay(
            ring=ring,
            priority=jnp.zeros((self.slots, self.unroll_length), jnp.float32),
            max_priority=jnp.ones((), jnp.float32),
            next_slot=jnp.zeros((), jnp.int32),
            size=jnp.zeros((), jnp.int32),
            key=key,
        )

    def held(self, replay: DeviceReplay) -> jax.Array:
        """`[]` int32 transitions held (what `min_size` and `replay_count` count)."""
        return replay.size * self.unroll_length

    def insert(self, replay: DeviceReplay, rollout: Rollout) -> DeviceReplay:
        """Writes the `B` segments of `rollout` (`[T + 1, B]`, `B <= slots`) into the next `B`
        slots; their transitions get the largest priority so far, 0 where one starts at an
        episode end (EnvPool's reset step)."""
        width = rollout.action.shape[1]
        slots = (replay.next_slot + jnp.arange(width)) % self.slots
        ring = jax.tree.map(lambda r, x: r.at[:, slots].set(x), replay.ring, rollout)
        t = self.unroll_length
        ended = rollout.terminated[:t] | rollout.truncated[:t]  # [T, B]
        fresh = jnp.where(ended.T, 0.0, replay.max_priority)  # [B, T]
        return replay._replace(
            ring=ring,
            priority=replay.priority.at[slots].set(fresh),
            next_slot=(replay.next_slot + width) % self.slots,
            size=jnp.minimum(replay.size + width, self.slots),
        )

    def sample(self, replay: DeviceReplay) -> tuple[DeviceReplay, Rollout, Draw]:
        """`batch_size` transitions by priority -> (the replay with its key advanced, their
        `[n + 1, batch_size]` windows, which they were). Needs a positive total priority (the
        Anakin flow samples only once `min_size` transitions are held)."""
        key, draw_key = jax.random.split(replay.key)
        total = jnp.sum(replay.priority)
        draw = self._draw(replay.priority, total, draw_key)
        window = windows(replay.ring, draw.slot, draw.t, self.n_step, xp=jnp)
        probability = replay.priority[draw.slot, draw.t] / total
        shape = (self.n_step, self.batch_size)
        extras = {
            **window.agent_extras,
            "replay_probability": jnp.broadcast_to(probability, shape),
            "replay_count": jnp.full(shape, self.held(replay), jnp.float32),
        }
        return replay._replace(key=key), window._replace(agent_extras=extras), draw

    def _draw(self, priority: jax.Array, total: jax.Array, key: jax.Array) -> Draw:
        """Stratified proportional draws from `priority` `[slots, T]` (summing to `total`): one
        uniform point in each of `batch_size` equal slices of the total mass, found by `find`."""
        batch = self.batch_size
        u = (jnp.arange(batch) + jax.random.uniform(key, (batch,))) * (total / batch)
        return find(priority, u)

    def set_priorities(
        self, replay: DeviceReplay, draw: Draw, priorities: jax.Array
    ) -> DeviceReplay:
        """Stores a learner's `priorities` `[batch_size]` for the transitions of `draw` as
        `(p + epsilon) ** alpha`, a negative one as 0 (a NaN stays NaN, and the learner's
        metrics stop the run); a transition drawn twice keeps the last."""
        p = jnp.maximum(priorities.astype(jnp.float32), 0.0)
        stored = (p + self.priority_epsilon) ** self.priority_exponent
        leaf = draw.slot * self.unroll_length + draw.t
        index = jnp.arange(self.batch_size)
        later = index[None, :] > index[:, None]
        overridden = jnp.any((leaf[None, :] == leaf[:, None]) & later, axis=1)
        target = jnp.where(overridden, self.slots * self.unroll_length, leaf)  # out of range: drop
        flat = replay.priority.reshape(-1).at[target].set(stored, mode="drop")
        return replay._replace(
            priority=flat.reshape(replay.priority.shape),
            max_priority=jnp.maximum(replay.max_priority, jnp.max(stored)),
        )


def find(priority: jax.Array, u: jax.Array) -> Draw:
    """The transitions at points `u` `[n]` (in `[0, total)`) of the mass of `priority`
    `[slots, T]`, laid out slot after slot: each lands on a transition with priority > 0."""
    slot_cdf = running_mass(jnp.sum(priority, axis=1))  # [slots]
    u = jnp.minimum(u, jnp.nextafter(slot_cdf[-1], 0.0))
    # side="right": the first slot whose running mass exceeds u, which has mass of its own.
    slot = jnp.minimum(jnp.searchsorted(slot_cdf, u, side="right"), priority.shape[0] - 1)
    before = jnp.where(slot > 0, slot_cdf[jnp.maximum(slot - 1, 0)], 0.0)
    rows = priority[slot]  # [n, T]
    rest = jnp.maximum(u - before, 0.0)
    t = jax.vmap(lambda c, r: jnp.searchsorted(c, r, side="right"))(
        jax.vmap(running_mass)(rows), rest
    )
    # The slot's own running mass may end below its share of the total by a rounding step:
    # a point in that sliver takes the slot's last transition with mass.
    last = priority.shape[1] - 1 - jnp.argmax((rows > 0)[:, ::-1], axis=1)
    return Draw(slot.astype(jnp.int32), jnp.minimum(t, last).astype(jnp.int32))


def running_mass(mass: jax.Array) -> jax.Array:
    """`cumsum(mass)` made flat where `mass` is 0 and never decreasing, `[n]`."""
    running = jnp.where(mass > 0, jnp.cumsum(mass), 0.0)
    return jax.lax.cummax(running)
