"""Cuts the interleaved `recv()` stream of an (async) EnvPool into per-env segments of T steps.

An async EnvPool returns whichever envs finished first (`[0..3]`, `[4..7]`, then `[1, 4, 6, 7]`),
so envs advance at different rates. Each env writes its segment into a *slot* of time-major
storage (`[T + 1, slots, ...]`) at its own time pointer; when an env has `T + 1` observations its
slot is complete and joins the ready list, and the env moves to a free slot whose row 0 is its
last observation. A rollout is one gather of `B` ready slots (`[T + 1, B]`, already time-major):
each observation is copied twice on the host (written, gathered), not once more per completed
segment and again to stack them. Observations may be a pytree of arrays (a view and an action
mask). Pure NumPy, no threads: tested on its own.
"""

from __future__ import annotations

import jax
import numpy as np

from jaxrl_dist.types import Rollout


class SegmentBuffer:
    """Per-env segments in shared slots; hands out rollouts of `segments_per_rollout` segments."""

    def __init__(
        self,
        num_envs: int,
        unroll_length: int,
        segments_per_rollout: int,
    ):
        n, t = num_envs, unroll_length
        self._t = np.zeros(n, np.int64)  # next row to write for each env
        self._unroll = t
        self._segments_per_rollout = segments_per_rollout
        # Envs hold n slots; fewer than B + n are ready between pops (a recv completes at most
        # n segments): 2n + B slots never run out when rollouts are popped after every recv.
        # That is about twice the old per-env buffers' memory (128 Atari envs, B 64: 288 slots
        # of 21 frames, ~170 MB) for one copy less of every observation.
        self._slots = 2 * n + segments_per_rollout
        self._slot = np.arange(n)  # each env's current slot
        self._free = list(range(n, self._slots))
        self._ready: list[int] = []
        # Buffers are allocated on first use, when their shapes are known: [T (+ 1), slots, ...].
        self._obs = None
        self._reward = np.zeros((t + 1, self._slots), np.float32)
        self._terminated = np.zeros((t + 1, self._slots), bool)
        self._truncated = np.zeros((t + 1, self._slots), bool)
        self._version = np.zeros((t, self._slots), np.int32)
        self._action: np.ndarray | None = None
        self._extras: dict[str, np.ndarray] = {}
        self._core: object = None  # `[1, slots, ...]` leaves: each segment's starting core state

    def add_observation(self, env_ids, obs, reward, terminated, truncated) -> None:
        """Writes one `recv()` result; completes the segments that reach `T + 1` observations."""
        if self._obs is None:
            t1 = self._unroll + 1
            self._obs = jax.tree.map(
                lambda x: np.zeros((t1, self._slots, *x.shape[1:]), x.dtype), obs
            )
        rows, slots = self._t[env_ids], self._slot[env_ids]
        jax.tree.map(lambda buf, x: buf.__setitem__((rows, slots), x), self._obs, obs)
        self._reward[rows, slots] = reward
        self._terminated[rows, slots] = terminated
        self._truncated[rows, slots] = truncated
        done = rows == self._unroll
        if done.any():
            self._complete(env_ids[done])

    def add_action(
        self, env_ids, action, extras: dict[str, np.ndarray], version: int, core_state=None
    ) -> None:
        """Writes the action chosen at each env's newest observation and advances its pointer;
        `core_state` (`[B, ...]` leaves, the recurrent state each env acted from) is kept for
        the envs whose segment starts at that observation."""
        core_state = {} if core_state is None else core_state
        if self._action is None:
            shape = self._version.shape
            self._action = np.zeros((*shape, *action.shape[1:]), action.dtype)
            self._extras = {k: np.zeros((*shape, *v.shape[1:]), v.dtype) for k, v in extras.items()}
            self._core = jax.tree.map(
                lambda v: np.zeros((1, self._slots, *v.shape[1:]), v.dtype), core_state
            )
        rows, slots = self._t[env_ids], self._slot[env_ids]
        self._action[rows, slots] = action
        for k, v in extras.items():
            self._extras[k][rows, slots] = v
        self._version[rows, slots] = version
        start = rows == 0
        if start.any():
            jax.tree.map(
                lambda buf, v: buf.__setitem__((0, slots[start]), v[start]), self._core, core_state
            )
        self._t[env_ids] += 1

    def _complete(self, envs: np.ndarray) -> None:
        """`envs`' slots are ready; each env continues in a free slot from its last observation."""
        full = self._slot[envs]
        if len(self._free) < len(envs):
            self._grow(len(envs))
        fresh = np.array([self._free.pop() for _ in envs])
        self._ready.extend(full.tolist())
        last = self._unroll
        for buf in (*jax.tree.leaves(self._obs), self._reward, self._terminated, self._truncated):
            buf[0, fresh] = buf[last, full]
        self._slot[envs] = fresh
        self._t[envs] = 0

    def _grow(self, at_least: int) -> None:
        """More slots (only when rollouts are popped less often than after every recv)."""
        more = max(at_least, self._slots)
        pad = (
            lambda buf: np.concatenate(  # noqa: E731
                [buf, np.zeros((buf.shape[0], more, *buf.shape[2:]), buf.dtype)], axis=1
            )
        )
        self._obs = jax.tree.map(pad, self._obs)
        self._reward, self._terminated = pad(self._reward), pad(self._terminated)
        self._truncated, self._version = pad(self._truncated), pad(self._version)
        self._action = pad(self._action)
        self._extras = {k: pad(v) for k, v in self._extras.items()}
        self._core = jax.tree.map(pad, self._core)
        self._free.extend(range(self._slots, self._slots + more))
        self._slots += more

    def pop_rollout(self) -> Rollout | None:
        """A `[T + 1, B]` rollout of the oldest complete segments, or None if too few are ready."""
        b = self._segments_per_rollout
        if len(self._ready) < b:
            return None
        idx, self._ready = np.array(self._ready[:b]), self._ready[b:]
        take = lambda buf: buf[:, idx]  # noqa: E731  one gather, [T (+ 1), B, ...] contiguous
        rollout = Rollout(
            obs=jax.tree.map(take, self._obs),
            reward=take(self._reward),
            terminated=take(self._terminated),
            truncated=take(self._truncated),
            action=take(self._action),
            agent_extras={k: take(v) for k, v in self._extras.items()},
            policy_version=take(self._version),
            core_state=jax.tree.map(take, self._core),
        )
        self._free.extend(idx.tolist())
        return rollout
