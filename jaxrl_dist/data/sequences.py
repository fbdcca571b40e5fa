"""A prioritized replay of whole sequences: the data seam of recurrent Q-learning (R2D2).

Kapturowski et al. 2019 ("Recurrent Experience Replay in Distributed Reinforcement Learning")
store fixed-length sequences with the recurrent state the actor had at their start, and replay
them by a sequence priority. Here a sequence is an actor's segment, kept whole as in every
replay of this library (`replay.py`): a `[T + 1]` column with its `core_state` (`[1]`, the
state `obs[0]` was acted from, `types.Rollout`). A draw is `batch_size` segments in proportion
to their priority (the `SumTree` of `prioritized.py`, one leaf per segment) as a
`[T + 1, batch_size]` rollout; the learner burns the core in over a prefix, learns from the
rest and sends back one priority per sequence (R2D2's `eta * max + (1 - eta) * mean` of the
absolute TD errors).

Priorities follow `prioritized.py`'s rules: a new segment gets the largest priority given so
far (1 at first), stored as `(priority + priority_epsilon) ** priority_exponent`; an id drawn
from a slot overwritten before its priority came back is skipped. Each batch carries, in
`agent_extras`, `replay_probability` (the drawn segment's probability) and `replay_count`
(segments held), both `[T, B]` (constant along T), for the learner's importance weights.

Units: `capacity`, `min_size`, `batch_size` and the rate limiter count segments (sequences),
as the uniform replay does.
"""

from __future__ import annotations

import jax
import numpy as np

from jaxrl_dist.data.prioritized import PrioritizedReplay
from jaxrl_dist.data.replay import UniformReplay
from jaxrl_dist.types import Rollout


class SequenceReplay(PrioritizedReplay):
    """`UniformReplay`'s ring of segments, each drawn whole by its priority. Thread-safe."""

    def __init__(
        self,
        *,
        priority_exponent: float = 0.9,
        priority_epsilon: float = 1e-6,
        **kwargs,
    ):
        """`UniformReplay`'s arguments (counted in segments), the exponent alpha (R2D2: 0.9) and
        the epsilon of stored priorities."""
        if not 0 <= priority_exponent <= 1:
            raise ValueError(f"priority_exponent={priority_exponent} must be in [0, 1]")
        if not priority_epsilon > 0:
            raise ValueError(f"priority_epsilon={priority_epsilon} must be > 0")
        UniformReplay.__init__(self, **kwargs)
        self._init_priorities(1, priority_exponent, priority_epsilon)

    def _eligible(self, slots: np.ndarray) -> np.ndarray:
        return np.ones((1, len(slots)), bool)  # every sequence holds learnable steps

    def _draw(self) -> tuple[Rollout, np.ndarray]:
        slots = self._tree.sample(self._rng, self._batch_size)
        probability = self._tree.get(slots) / self._tree.total
        held = jax.tree.unflatten(self._treedef, [r[:, slots] for r in self._rings])
        shape = held.action.shape[:2]
        extras = {
            **held.agent_extras,
            "replay_probability": np.broadcast_to(probability, shape),
            "replay_count": np.full(shape, float(self._size)),
        }
        ids = np.stack([slots, self._generation[slots]], axis=1)  # [B, 2]
        return held._replace(agent_extras=extras), ids
