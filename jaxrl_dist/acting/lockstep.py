"""Deterministic (lockstep) acting: the data depend only on the seed, not on thread timing.

Unroll `v` is acted with exactly version `v` of the params (a replay's rounds give their own
version, `data/lockstep_replay.py`), waiting for the learner to publish it, and with actor
state initialised from `fold_in(key, v)` but for each env's recurrent state, which goes on
from unroll to unroll (reset at its episodes' starts). An unroll is T actions of every stream:
a seated game's streams take them at their seats' turns, each waiting, once done, for the
others (`LockstepActor._play`). At every multiple of
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

from jaxrl_dist.acting.actor import Actor, ActorShared, ActorStats, UnrollGate
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
      playing: the round the actor acts or replays now (other agents in its games move with
        their params of it, `params_store.RoundParams`).
      results: what its games' players record of the round it acts (a pool's results), kept
        until the unroll is whole: an actor that fails mid-round records none of it, and the
        one restarted in its slot acts the round again.
    """

    next_unroll: int
    epoch_sent: list[np.ndarray] = dataclasses.field(default_factory=list)
    replay: np.ndarray | None = None
    memory: Any = None
    playing: int = 0
    results: list[Callable[[], None]] = dataclasses.field(default_factory=list)

    def restart_point(self, epoch_updates: int) -> None:
        """After a failure: replay this epoch's unrolls before the one that failed."""
        played = self.epoch_sent[: self.next_unroll % epoch_updates]
        self.replay = np.stack(played) if played else None
        self.results.clear()


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
                    if progress.replay is None and self._round_version(unroll) is None:
                        return  # a fresh epoch's first moves are the round's: wait for it
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
        data kept); returns a fresh segment buffer, episode tracker and the rows waiting for
        the first unroll's actions (None on a stop)."""
        num_envs = env.config["num_envs"]
        buffer, tracker = self._new_buffers(num_envs)
        # ended[i]: env i's last observation ended an episode, so its next one starts one (a
        # recurrent policy resets there); every env's first observation does.
        self._ended = np.ones(num_envs, bool)
        # The epoch's first round: other agents move in the first observations with its params.
        first_round = self._progress.next_unroll - (0 if replay is None else len(replay))
        self._progress.playing = first_round
        env.async_reset()
        # Episodes the replayed steps end were reported by the run (or actor) that played them.
        waiting = self._receive(env, tracker)[:2]
        for i, unroll_actions in enumerate(() if replay is None else replay):
            self._progress.playing = first_round + i
            waiting = self._play(env, waiting, _replaying(unroll_actions), tracker)
            if waiting is None:
                return None
        env_ids, (_, step) = waiting
        buffer.add_observation(env_ids, *step)
        return buffer, tracker, waiting

    def _receive(self, env, tracker, buffer=None) -> tuple:
        """One `recv()` as `(env_ids, (first, step), ended)`: whether each row starts an
        episode, its `(obs, reward, terminated, truncated)` (added to `buffer` when given),
        and the episodes it ended `(returns, lengths)`."""
        obs, reward, terminated, truncated, info = env.recv()
        env_ids, step = info["env_id"], (obs, reward, terminated, truncated)
        if buffer is not None:
            buffer.add_observation(env_ids, *step)
        ended = tracker.update(env_ids, reward, terminated, truncated, info)
        first = self._ended[env_ids]
        self._ended[env_ids] = np.logical_or(terminated, truncated)
        return env_ids, (first, step), ended

    def _play(self, env, waiting, choose, tracker, buffer=None, timers=None) -> tuple | None:
        """One unroll of every stream from rows `waiting`, `(env_ids, (first, step))`: acts T
        times for each, `choose(obs, env_ids, first, steps)` giving the env actions of rows at
        their unroll steps `steps`; returns the rows that end it, waiting for the next unroll's
        actions (None on a stop).

        A synchronous pool's streams all step together; a seated game's (`SeatedGame` with
        `gather`) only at their seats' turns, so a stream whose T actions are done waits, its
        game paused, while the others' games play on (`UnrollGate`): the unroll is each
        stream's T actions in an order that follows from the env and the actions alone, so
        the same actions replayed make the same unroll."""
        gate = UnrollGate(env.config["num_envs"], self._shared.unroll_length)
        env_ids, rows = waiting
        while not self._shared.stop.is_set():
            env_ids, (first, step), steps = gate.admit(env_ids, rows)
            if gate.all_held:  # every row now starts the next unroll
                return gate.release()
            t0 = time.perf_counter()
            if len(env_ids):
                env_action = choose(step[0], env_ids, first, steps)
                if env_action is None:
                    return None
                t0 = time.perf_counter()
                env.send(env_action, env_ids)
            acted = len(env_ids)
            env_ids, rows, ended = self._receive(env, tracker, buffer)
            if timers is not None:
                timers["env_s"] += time.perf_counter() - t0
                self._shared.stats.add(timers, acted, *ended)
                for k in timers:
                    timers[k] = 0.0
        return None

    def _unroll(self, env, buffer, tracker, waiting, unroll: int) -> tuple | None:
        """Acts one unroll of every stream from rows `waiting` with the params of unroll
        `unroll`, writes the unroll's rollouts with the env actions sent (`[T, streams, ...]`,
        each stream's in its own order); returns the rows waiting for the next (None on a
        stop)."""
        timers = dict.fromkeys(ActorStats.TIMERS, 0.0)
        self._progress.playing = unroll
        version = self._round_version(unroll)
        if version is None:
            return None
        self._client.reset(jax.random.fold_in(self._key, unroll), keep_memory=True)
        sent: list[np.ndarray] = []  # [T, streams, ...] once the first actions are known

        def act(obs, env_ids, first, steps):
            t0 = time.perf_counter()
            acted = self._client.act(obs, env_ids, min_version=version, first=first)
            if acted is None:
                return None
            if acted.version != version:
                raise RuntimeError(f"lockstep actor wanted params {version}, got {acted.version}")
            t1 = time.perf_counter()
            buffer.add_action(env_ids, acted.action, acted.extras, version, acted.core_state)
            if not sent:
                streams = env.config["num_envs"]
                shape = (self._shared.unroll_length, streams, *acted.env_action.shape[1:])
                sent.append(np.zeros(shape, acted.env_action.dtype))
            sent[0][steps, env_ids] = acted.env_action
            timers["inference_s"] += t1 - t0
            timers["rollout_s"] += time.perf_counter() - t1
            return acted.env_action

        waiting = self._play(env, waiting, act, tracker, buffer, timers)
        if waiting is None:
            return None
        for record in self._progress.results:  # the round is whole: its results count
            record()
        self._progress.results.clear()
        self._progress.epoch_sent.append(sent[0])
        self._progress.memory = self._client.memory()  # before unroll `unroll + 1`
        self._flush(buffer, timers, self._progress.epoch_sent[-1], self._progress.memory)
        self._shared.stats.add(timers, 0, (), ())
        return waiting

    def _round_version(self, unroll: int) -> int | None:
        """The params version unroll `unroll` is acted with, once the learner has it (every
        actor then ended the round before: a pool's draw weighs their games); None at a stop."""
        version_for = self._shared.version_for
        return unroll if version_for is None else version_for(unroll)


def _replaying(unroll_actions: np.ndarray):
    """`_play`'s `choose` that sends an unroll's recorded env actions, `[T, streams, ...]`:
    each row's at its step."""
    return lambda obs, env_ids, first, steps: unroll_actions[steps, env_ids]
