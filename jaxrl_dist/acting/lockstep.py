"""Deterministic (lockstep) acting: the data depend only on the seed, not on thread timing.

Unroll `v` is acted with exactly version `v` of the params (a replay's rounds give their own
version, `data/lockstep_replay.py`), waiting for the learner to publish it, and with actor
state initialised from `fold_in(key, v)` but for each env's recurrent state, which goes on
from unroll to unroll (reset at its episodes' starts). At every multiple of
`epoch_updates` the actor starts a new synchronous EnvPool seeded from the epoch, so the env
state at any unroll follows from the epoch's seed and the env actions sent since the epoch
began. A resumed actor rebuilds it by replaying those actions without inference and puts back
the recurrent states the checkpoint saved; a restarted one replays what its slot's
`LockstepProgress` recorded, and carries on exactly where its predecessor died (unless the env
fails again on the same steps).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from typing import Any

import jax
import numpy as np

from jaxrl_dist.acting.actor import Actor, ActorShared, ActorStats
from jaxrl_dist.acting.policy_client import PolicyClient


@dataclasses.dataclass
class LockstepProgress:
    """Where an actor slot is, kept by the slot (not the thread) so a restart reads it.

    Attributes:
      next_unroll: the index of the slot's next unroll (its round: unroll `v` of every actor;
        acted with params version `v`, or a replay's version of round `v`).
      epoch_sent: `[T, num_envs, ...]` env actions of each unroll of this env epoch before it.
      replay: `[n, T, num_envs, ...]` env actions to replay before acting `next_unroll` (a
        resume's, from the checkpoint), or None.
      memory: each env's recurrent state before unroll `next_unroll` (host arrays, `{}` for
        a memoryless policy), or None at an epoch's start.
    """

    next_unroll: int
    epoch_sent: list[np.ndarray] = dataclasses.field(default_factory=list)
    replay: np.ndarray | None = None
    memory: Any = None

    def restart_point(self, epoch_updates: int) -> None:
        """After a failure: replay this epoch's unrolls before the one that failed."""
        played = self.epoch_sent[: self.next_unroll % epoch_updates]
        self.replay = np.stack(played) if played else None


class LockstepActor(Actor):
    """An actor on a synchronous EnvPool in lockstep with the learner (see the module doc).

    `make_env(epoch)` builds the pool of an env epoch; `key` is the actor's own key.
    """

    def __init__(
        self,
        index: int,
        make_env: Callable[[int], Any],
        client: PolicyClient,
        shared: ActorShared,
        *,
        key: jax.Array,
        progress: LockstepProgress,
        epoch_updates: int,
    ):
        super().__init__(index, make_env, client, shared)
        self._key, self._progress, self._epoch_updates = key, progress, epoch_updates

    def _loop(self) -> None:
        progress, env = self._progress, None
        try:
            while not self._shared.stop.is_set():
                unroll = progress.next_unroll
                if env is None or unroll % self._epoch_updates == 0:
                    if env is not None:
                        env.close()
                    env = None  # a failed make_env must not close the old pool twice
                    env = self._make_env(unroll // self._epoch_updates)
                    replay, progress.replay = progress.replay, None
                    progress.epoch_sent = [] if replay is None else list(replay)
                    started = self._start_epoch(env, replay)
                    if started is None:
                        return
                    buffer, tracker, step = started
                    if replay is not None and progress.memory is not None:
                        self._client.set_memory(progress.memory)  # the replayed unrolls' end
                step = self._unroll(env, buffer, tracker, step, unroll)
                if step is None:
                    return
                progress.next_unroll = unroll + 1
        finally:
            if env is not None:
                env.close()

    def _start_epoch(self, env, replay: np.ndarray | None) -> tuple | None:
        """Resets a new synchronous pool and replays `replay`'s env actions (no inference, no
        data kept); returns a fresh segment buffer, episode tracker and the first recv() (None
        on a stop)."""
        num_envs = env.config["num_envs"]
        buffer, tracker = self._new_buffers(num_envs)
        every_env = np.arange(num_envs)
        # ended[i]: env i's last observation ended an episode, so its next one starts one (a
        # recurrent policy resets there); every env's first observation does.
        self._ended = np.ones(num_envs, bool)
        env.async_reset()
        for env_action in () if replay is None else replay.reshape(-1, *replay.shape[2:]):
            if self._shared.stop.is_set():
                return None
            _, reward, terminated, truncated, info = env.recv()
            tracker.update(info["env_id"], reward, terminated, truncated, info)
            self._ended[info["env_id"]] = np.logical_or(terminated, truncated)
            env.send(env_action, every_env)
        step = env.recv()
        # Episodes this recv() ends were reported by the run (or actor) that first played them.
        tracker.update(step[4]["env_id"], *step[1:4], step[4])
        buffer.add_observation(step[4]["env_id"], *step[:4])
        return buffer, tracker, step

    def _unroll(self, env, buffer, tracker, step, unroll: int) -> tuple | None:
        """Acts T steps from the recv() result `step` with the params of unroll `unroll`, writes
        the unroll's rollout with the env actions sent; returns the last recv() (None on a
        stop)."""
        timers = dict.fromkeys(ActorStats.TIMERS, 0.0)
        version_for = self._shared.version_for
        version = unroll if version_for is None else version_for(unroll)
        if version is None:
            return None
        self._client.reset(jax.random.fold_in(self._key, unroll), keep_memory=True)
        sent, stats, ended = [], self._shared.stats, self._ended
        for _ in range(self._shared.unroll_length):
            obs, env_ids = step[0], step[4]["env_id"]
            first = ended[env_ids]
            ended[env_ids] = np.logical_or(step[2], step[3])
            t0 = time.perf_counter()
            acted = self._client.act(obs, env_ids, min_version=version, first=first)
            if acted is None:
                return None
            if acted.version != version:
                raise RuntimeError(f"lockstep actor wanted params {version}, got {acted.version}")
            t1 = time.perf_counter()
            buffer.add_action(env_ids, acted.action, acted.extras, version, acted.core_state)
            by_env = np.empty_like(acted.env_action)
            by_env[env_ids] = acted.env_action
            sent.append(by_env)
            t2 = time.perf_counter()
            env.send(acted.env_action, env_ids)
            step = env.recv()
            t3 = time.perf_counter()
            _, reward, terminated, truncated, info = step
            buffer.add_observation(info["env_id"], *step[:4])
            returns, lengths = tracker.update(info["env_id"], reward, terminated, truncated, info)
            timers["inference_s"] += t1 - t0
            timers["env_s"] += t3 - t2
            timers["rollout_s"] += (t2 - t1) + time.perf_counter() - t3
            stats.add(timers, len(env_ids), returns, lengths)
            timers = dict.fromkeys(timers, 0.0)
        self._progress.epoch_sent.append(np.stack(sent))
        self._progress.memory = self._client.memory()  # before unroll `unroll + 1`
        self._flush(buffer, timers, self._progress.epoch_sent[-1], self._progress.memory)
        stats.add(timers, 0, (), ())
        return step
