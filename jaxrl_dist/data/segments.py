"""Cuts the interleaved `recv()` stream of an (async) EnvPool into per-env segments of T steps.

An async EnvPool returns whichever envs finished first (`[0..3]`, `[4..7]`, then `[1, 4, 6, 7]`),
so envs advance at different rates. Each env writes into its own row at its own time pointer;
when an env has `T + 1` observations its segment is complete, is copied out, and its last
observation becomes the first of its next segment. Complete segments from any envs are grouped
into `[T + 1, B]` rollouts. Observations may be a pytree of arrays (a view and an action mask).
Pure NumPy, no threads: tested on its own.
"""

from __future__ import annotations

import jax
import numpy as np

from jaxrl_dist.types import Rollout


class SegmentBuffer:
    """Per-env ring of one segment; hands out rollouts of `segments_per_rollout` segments."""

    def __init__(
        self,
        num_envs: int,
        unroll_length: int,
        segments_per_rollout: int,
    ):
        n, t = num_envs, unroll_length
        self._t = np.zeros(n, np.int64)  # next row to write for each env
        self._unroll = t
        # Observation and action buffers are allocated on first use, when their shapes are known.
        self._obs = None  # a pytree of [num_envs, T + 1, ...] arrays, shaped like the obs
        self._reward = np.zeros((n, t + 1), np.float32)
        self._terminated = np.zeros((n, t + 1), bool)
        self._truncated = np.zeros((n, t + 1), bool)
        self._version = np.zeros((n, t), np.int32)
        self._action: np.ndarray | None = None
        self._extras: dict[str, np.ndarray] = {}
        self._ready: list[tuple] = []
        self._segments_per_rollout = segments_per_rollout

    def add_observation(self, env_ids, obs, reward, terminated, truncated) -> None:
        """Writes one `recv()` result; completes the segments that reach `T + 1` observations."""
        if self._obs is None:
            n, t1 = self._reward.shape
            self._obs = jax.tree.map(lambda x: np.zeros((n, t1, *x.shape[1:]), x.dtype), obs)
        rows = self._t[env_ids]
        jax.tree.map(lambda buf, x: buf.__setitem__((env_ids, rows), x), self._obs, obs)
        self._reward[env_ids, rows] = reward
        self._terminated[env_ids, rows] = terminated
        self._truncated[env_ids, rows] = truncated
        for env in env_ids[rows == self._unroll]:
            self._complete(env)

    def add_action(self, env_ids, action, extras: dict[str, np.ndarray], version: int) -> None:
        """Writes the action chosen at each env's newest observation and advances its pointer."""
        if self._action is None:
            n, t = self._version.shape
            self._action = np.zeros((n, t, *action.shape[1:]), action.dtype)
            self._extras = {k: np.zeros((n, t, *v.shape[1:]), v.dtype) for k, v in extras.items()}
        rows = self._t[env_ids]
        self._action[env_ids, rows] = action
        for k, v in extras.items():
            self._extras[k][env_ids, rows] = v
        self._version[env_ids, rows] = version
        self._t[env_ids] += 1

    def _complete(self, env: int) -> None:
        self._ready.append(
            (
                jax.tree.map(lambda buf: buf[env].copy(), self._obs),
                self._reward[env].copy(),
                self._terminated[env].copy(),
                self._truncated[env].copy(),
                self._action[env].copy(),
                {k: v[env].copy() for k, v in self._extras.items()},
                self._version[env].copy(),
            )
        )
        last = self._unroll
        for buf in jax.tree.leaves(self._obs):
            buf[env, 0] = buf[env, last]
        self._reward[env, 0] = self._reward[env, last]
        self._terminated[env, 0] = self._terminated[env, last]
        self._truncated[env, 0] = self._truncated[env, last]
        self._t[env] = 0

    def pop_rollout(self) -> Rollout | None:
        """A `[T + 1, B]` rollout of the oldest complete segments, or None if too few are ready."""
        b = self._segments_per_rollout
        if len(self._ready) < b:
            return None
        batch, self._ready = self._ready[:b], self._ready[b:]
        obs, reward, terminated, truncated, action, extras, version = zip(*batch, strict=True)
        stack = lambda xs: np.stack(xs, axis=1)  # noqa: E731  [B] x [T(+1), ...] -> [T(+1), B, ...]
        return Rollout(
            obs=jax.tree.map(lambda *xs: stack(xs), *obs),
            reward=stack(reward),
            terminated=stack(terminated),
            truncated=stack(truncated),
            action=stack(action),
            agent_extras={k: stack([e[k] for e in extras]) for k in extras[0]},
            policy_version=stack(version),
        )
