"""A prioritized replay of n-step transitions: the data seam of Rainbow-style learners.

Storage is `UniformReplay`'s ring of whole segments (actors deliver segments of any env in any
order, so transitions are never stitched across segments); what is sampled is a transition `t`
of a held segment, in proportion to its priority (Schaul et al. 2016, proportional variant, with
a stratified draw over a `SumTree`), and what the learner gets for it is its n-step window:

  a `[n + 1, B]` rollout whose column j is `obs[t .. t + n]`, `reward[t .. t + n]`, ... of
  the sampled segment, time-step aligned as every rollout (`types.Rollout`; cut by
  `types.windows`).

Where the window runs past the segment's end `T`, it is cut there: `truncated` is set from index
`T - t` on (the target bootstraps from the value of `obs[T]`, the real next observation, unless
it is terminal), the observations and actions after it repeat the last ones and their rewards
are 0 (masked by the learner, as every transition that starts at an episode end). Terminations
and truncations inside the window stay as the env gave them. Transitions that start at an
episode end (EnvPool's reset step) get priority 0 and are never drawn.

Priorities: a new transition gets the largest priority given so far (1 at first); after an
update the learner's `|TD error|`-like priorities come back through `update_priorities`, stored
as `(priority + priority_epsilon) ** priority_exponent`. An id drawn from a ring slot that was
overwritten before its priorities came back is skipped. Each batch carries, in
`agent_extras`, `replay_probability` (the drawn transition's probability) and `replay_count`
(transitions held), both `[n, B]` (constant along n), so the learner computes importance
weights `(count * probability) ** -beta` with its own (annealed, run-time) exponent.

Units: `capacity`, `min_size`, `batch_size` and the rate limiter count transitions (`T` per
segment, `samples_per_insert` samples per inserted transition: the seed's
`max_train_frequency`); the ring holds `capacity // T` segments.
"""

from __future__ import annotations

import jax
import numpy as np

from jaxrl_dist.data.replay import UniformReplay
from jaxrl_dist.data.sum_tree import SumTree
from jaxrl_dist.types import Rollout, windows


class PrioritizedReplay(UniformReplay):
    """`UniformReplay`'s ring and rate limiter, sampled per transition by priority.

    Thread-safe as `UniformReplay`; `update_priorities` takes the same lock.
    """

    def __init__(
        self,
        *,
        capacity: int,
        unroll_length: int,
        n_step: int,
        priority_exponent: float = 0.5,
        priority_epsilon: float = 1e-6,
        **kwargs,
    ):
        """`UniformReplay`'s arguments (counted in transitions: see the module docstring), and
        the segments' `unroll_length` T, the window length `n_step` (1..T), the exponent alpha
        and the epsilon of stored priorities."""
        if not 1 <= n_step <= unroll_length:
            raise ValueError(
                f"n_step={n_step} must be in [1, unroll_length={unroll_length}]: a window is cut "
                "at its segment's end"
            )
        if not 0 <= priority_exponent <= 1:
            raise ValueError(f"priority_exponent={priority_exponent} must be in [0, 1]")
        if not priority_epsilon > 0:
            raise ValueError(f"priority_epsilon={priority_epsilon} must be > 0")
        if capacity < unroll_length:
            raise ValueError(
                f"replay capacity ({capacity} transitions) holds no segment of "
                f"unroll_length={unroll_length}"
            )
        super().__init__(capacity=capacity, items_per_segment=unroll_length, **kwargs)
        self._unroll, self._n = unroll_length, n_step
        self._init_priorities(unroll_length, priority_exponent, priority_epsilon)

    def _init_priorities(self, per_slot: int, alpha: float, eps: float) -> None:
        """Priority bookkeeping for `per_slot` items per ring slot (leaf = slot * per_slot + i)."""
        self._per_slot, self._alpha, self._eps = per_slot, alpha, eps
        self._tree = SumTree(self._capacity * per_slot)
        self._generation = np.zeros(self._capacity, np.int64)  # bumped when a slot is rewritten
        self._writes = 0
        self._max_priority = 1.0  # stored form, (p + eps) ** alpha

    def _stored(self, slots: np.ndarray) -> None:
        """New segments: every item `_eligible` gets the largest priority so far."""
        self._writes += 1
        self._generation[slots] = self._writes
        per_slot = self._per_slot
        leaves = slots[None, :] * per_slot + np.arange(per_slot)[:, None]  # [per_slot, n]
        priority = np.where(self._eligible(slots), self._max_priority, 0.0)
        self._tree.set(leaves.reshape(-1), priority.reshape(-1))

    def _eligible(self, slots: np.ndarray) -> np.ndarray:
        """`[T, n]` which transitions of the new segments may be drawn: those that do not start
        at an episode end."""
        held = jax.tree.unflatten(self._treedef, self._rings)
        return ~(held.terminated[: self._unroll, slots] | held.truncated[: self._unroll, slots])

    def _snapshot_extra(self) -> dict[str, np.ndarray]:
        leaves = self._tree.get(np.arange(self._capacity * self._per_slot))
        generation = np.append(self._generation, self._writes)
        return {"priorities": leaves, "generation": generation, "max_priority": self._max_priority}

    def _restore_extra(self, arrays: dict[str, np.ndarray]) -> None:
        leaves = arrays["priorities"]
        if leaves.shape != (self._capacity * self._per_slot,):
            raise ValueError(
                f"the saved replay holds {leaves.size} priorities, this one "
                f"{self._capacity * self._per_slot}: resume with the run's own replay.capacity "
                "and unroll_length"
            )
        self._tree.set(np.arange(leaves.size), leaves)
        self._generation, self._writes = (
            arrays["generation"][:-1].copy(),
            int(arrays["generation"][-1]),
        )
        self._max_priority = float(arrays["max_priority"])

    def _draw(self) -> tuple[Rollout, np.ndarray]:
        leaves = self._tree.sample(self._rng, self._batch_size)
        slots, t = np.divmod(leaves, self._unroll)
        probability = self._tree.get(leaves) / self._tree.total
        window = windows(jax.tree.unflatten(self._treedef, self._rings), slots, t, self._n)
        count = float(self._size * self._unroll)
        extras = {
            **window.agent_extras,
            "replay_probability": np.broadcast_to(probability, (self._n, len(leaves))),
            "replay_count": np.full((self._n, len(leaves)), count),
        }
        ids = np.stack([leaves, self._generation[slots]], axis=1)  # [B, 2]
        return window._replace(agent_extras=extras), ids

    def set_priority_exponent(self, alpha: float, reweigh: bool = True) -> None:
        """Run-time replay settings: priorities stored from now on are `(p + eps) ** alpha`,
        and (`reweigh`) every held one is raised to `alpha / alpha_before` (the same value as
        if stored with `alpha`; with `alpha_before` 0 the held ones were all 1 and stay so
        until their transitions are drawn again). Items that may not be drawn keep priority
        0. Not `reweigh`: the held ones were stored with `alpha` (a resume's snapshot)."""
        if not 0 <= alpha <= 1:
            raise ValueError(f"priority_exponent={alpha} must be in [0, 1]")
        with self._cond:
            if reweigh and self._alpha > 0:
                leaves = np.arange(self._capacity * self._per_slot)
                held = self._tree.get(leaves)
                ratio = alpha / self._alpha
                self._tree.set(leaves, np.where(held > 0, held**ratio, 0.0))
                self._max_priority = self._max_priority**ratio
            self._alpha = alpha

    def update_priorities(self, sample_ids: np.ndarray, priorities: np.ndarray) -> None:
        """Sets the priorities of the items a batch drew (`sample_ids` `[B, 2]` from its
        `Batch`, `priorities` `[B]`, >= 0). An item drawn twice keeps the last one."""
        priorities = np.asarray(priorities, np.float64)
        if not np.all(np.isfinite(priorities)) or np.any(priorities < 0):
            raise ValueError("priorities must be finite and >= 0")
        leaves, generation = sample_ids[:, 0], sample_ids[:, 1]
        stored = (priorities + self._eps) ** self._alpha
        with self._cond:
            current = self._generation[leaves // self._per_slot] == generation
            self._tree.set(leaves[current], stored[current])
            if np.any(current):
                self._max_priority = max(self._max_priority, float(stored[current].max()))
