"""A sum tree over per-item priorities: proportional sampling in O(log n), vectorised in NumPy.

Leaves hold the priorities of `capacity` items; each inner node holds the sum of its two
children, so the root is the total and a draw walks down from it. Sampling a batch is `depth`
vectorised steps over the whole batch; updating a batch of leaves recomputes only their
ancestors, level by level. Sums are float64: after millions of updates a float32 root drifts
from its leaves by more than the smallest priorities.
"""

from __future__ import annotations

import numpy as np


class SumTree:
    """Priorities of `capacity` items (all 0 at first) for sampling in proportion to them.

    Not thread-safe: the replay that owns it holds its lock around every call.
    """

    def __init__(self, capacity: int):
        if capacity < 1:
            raise ValueError(f"SumTree capacity must be at least 1, got {capacity}")
        self.capacity = capacity
        self._leaves = 1 << max(0, (capacity - 1).bit_length())  # a power of two >= capacity
        self._depth = self._leaves.bit_length() - 1
        self._nodes = np.zeros(2 * self._leaves, np.float64)  # node 1 is the root; leaves last

    @property
    def total(self) -> float:
        return float(self._nodes[1])

    def get(self, indices: np.ndarray) -> np.ndarray:
        """The priorities of items `indices`, `[n]` float64."""
        return self._nodes[self._leaves + self._check(indices)]

    def set(self, indices: np.ndarray, priorities: np.ndarray) -> None:
        """Sets items' priorities (>= 0, finite). A repeated index keeps its last priority."""
        indices = self._check(indices)
        if indices.size == 0:
            return
        priorities = np.broadcast_to(np.asarray(priorities, np.float64), indices.shape)
        if not np.all(np.isfinite(priorities)) or np.any(priorities < 0):
            raise ValueError("priorities must be finite and >= 0")
        nodes = self._leaves + indices
        self._nodes[nodes] = priorities  # NumPy assigns repeated indices in order: last wins
        for _ in range(self._depth):  # every touched leaf is at the same depth
            nodes = np.unique(nodes // 2)
            self._nodes[nodes] = self._nodes[2 * nodes] + self._nodes[2 * nodes + 1]

    def find(self, targets: np.ndarray) -> np.ndarray:
        """For each target mass `u` in `[0, total)`, the item `i` whose cumulative priority range
        `[sum(p[:i]), sum(p[:i + 1]))` holds it; items with priority 0 are never returned."""
        u = np.asarray(targets, np.float64).copy()
        nodes = np.ones(u.shape, np.int64)
        for _ in range(self._depth):
            left = 2 * nodes
            left_sum = self._nodes[left]
            go_right = (u >= left_sum) & (self._nodes[left + 1] > 0)  # round-off past the end
            u = np.where(go_right, u - left_sum, u)
            nodes = np.where(go_right, left + 1, left)
        return nodes - self._leaves

    def sample(self, rng: np.random.Generator, size: int) -> np.ndarray:
        """`size` items drawn with replacement, item `i` with probability `p_i / total`:
        stratified as in Schaul et al. 2016 (one uniform draw in each of `size` equal slices of
        the total mass), which keeps a batch from piling onto one item by chance."""
        total = self.total
        if not total > 0:
            raise ValueError("cannot sample from a SumTree whose priorities are all 0")
        bounds = np.arange(size, dtype=np.float64) + rng.uniform(size=size)
        return self.find(np.minimum(bounds * (total / size), np.nextafter(total, 0)))

    def _check(self, indices: np.ndarray) -> np.ndarray:
        indices = np.asarray(indices, np.int64)
        if indices.size and (indices.min() < 0 or indices.max() >= self.capacity):
            raise IndexError(f"SumTree indices must be in [0, {self.capacity})")
        return indices
