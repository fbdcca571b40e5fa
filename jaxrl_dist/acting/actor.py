"""Actor threads: one EnvPool each, batched inference on the actor's device, rollouts to a queue."""

from __future__ import annotations

import dataclasses
import logging
import queue
import threading
import time
import traceback
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import numpy as np

from jaxrl_dist.envs import EpisodeTracker, derive_seed, make_env
from jaxrl_dist.run.logger import ACTOR_TIMERS
from jaxrl_dist.acting.params_store import ParamsStore
from jaxrl_dist.data.segments import SegmentBuffer
from jaxrl_dist.types import Rollout

log = logging.getLogger(__name__)

# Every blocking call wakes at least this often to check the stop flag.
POLL_S = 0.1
ACTOR_SEED_PURPOSE = 1  # derive_seed/fold_in path of the actors' env seeds and keys
LOCKSTEP_SEED_PURPOSE = 3  # derive_seed path of lockstep actors' env seeds (per env epoch)


class ActorStats:
    """Counters and per-stage timers shared by the actor threads; read and reset by the trainer."""

    # env_s: EnvPool recv + send; rollout_s: segment and episode bookkeeping (NumPy);
    # inference_s: params pick-up, the jitted act and the actions' copy to the host;
    # queue_put_s: waiting for room in the rollout queue (back-pressure from the learner).
    TIMERS = ACTOR_TIMERS

    def __init__(self):
        self._lock = threading.Lock()
        self.episodes_finished = 0  # since the start; never reset
        self._reset()

    def _reset(self):
        self.timers = dict.fromkeys(self.TIMERS, 0.0)
        self.env_steps = 0
        self.episode_returns: list[float] = []
        self.episode_lengths: list[int] = []

    def add(self, timers: dict[str, float], steps: int, returns, lengths) -> None:
        with self._lock:
            for k, v in timers.items():
                self.timers[k] += v
            self.env_steps += steps
            self.episodes_finished += len(returns)
            self.episode_returns.extend(returns)
            self.episode_lengths.extend(lengths)

    def drain(self) -> dict[str, Any]:
        with self._lock:
            out = {
                "timers": self.timers,
                "env_steps": self.env_steps,
                "episode_returns": self.episode_returns,
                "episode_lengths": self.episode_lengths,
            }
            self._reset()
        return out


def make_act_step(act: Callable, env_action: Callable) -> Callable:
    """Jits `act` with the key split and the env action inside: one dispatch per env step.

    `act_step(params, obs, key) -> (key, action, env_action, extras)`.
    """

    def act_step(params, obs, key):
        key, sub = jax.random.split(key)
        action, extras = act(params, obs, sub)
        return key, action, env_action(action), extras

    return jax.jit(act_step)


class QueueItem(NamedTuple):
    """What an actor hands the learner through the rollout queue.

    Attributes:
      actor_index: the actor's global index (over all processes).
      rollout: a `[T + 1, B]` rollout.
      env_actions: from a lockstep actor, the env actions it sent during that unroll, `[T, B,
        ...]` by env id, for the replay of a resumed run (see `Lockstep`); None otherwise.
    """

    actor_index: int
    rollout: Rollout
    env_actions: np.ndarray | None = None


@dataclasses.dataclass(frozen=True)
class Lockstep:
    """Deterministic mode for one actor on a synchronous EnvPool.

    Unroll `v` (from `start_version` on) is acted with exactly version `v` of the params, waiting
    for the learner to publish it, and with the key `fold_in(key, v)`. At every multiple of
    `epoch_updates` the actor starts a new EnvPool seeded from the epoch, so the env state at any
    unroll follows from the epoch's seed and the actions sent since the epoch began. A resumed
    actor rebuilds it by replaying `replay`: `[n, T, num_envs, ...]` env actions of the unrolls
    `start_version - n .. start_version - 1` (all in `start_version`'s epoch). A restarted actor
    does the same with the actions its predecessor sent, so the data do not depend on thread
    timing, on whether or where the run was interrupted, nor on a restart (unless the env fails
    again on the same steps).
    """

    start_version: int
    epoch_updates: int
    replay: np.ndarray | None = None


class Actor(threading.Thread):
    """Steps one EnvPool with the newest published params and queues `QueueItem`s.

    Exceptions are logged with their traceback and kept in `self.error`; the learner's supervisor
    checks the actors on every queue wait, so a dead actor never hangs the run, and restarts it.
    `make_env(generation)` builds the actor's EnvPool: generation 0, or the epoch in lockstep.
    """

    def __init__(
        self,
        index: int,
        make_env: Callable[[int], Any],
        act_step: Callable,
        params_store: ParamsStore,
        device: jax.Device,
        key: jax.Array,
        out_queue: queue.Queue,
        stop: threading.Event,
        stats: ActorStats,
        unroll_length: int,
        segments_per_rollout: int,
        lockstep: Lockstep | None = None,
    ):
        super().__init__(name=f"actor-{index}", daemon=True)
        self.index = index
        self._make_env = make_env
        self._act_step = act_step
        self._params_store = params_store
        self._device = device
        self._key = jax.device_put(key, device)
        self._queue = out_queue
        self._stop_event = stop
        self._stats = stats
        self._unroll = unroll_length
        self._segments_per_rollout = segments_per_rollout
        self._lockstep = lockstep
        # Lockstep: the next unroll's params version, and the env actions of this epoch's
        # unrolls before it: where, and from what, a restarted actor carries on.
        self.next_version = lockstep.start_version if lockstep else 0
        self.epoch_sent: list[np.ndarray] = []
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            if self._lockstep is None:
                self._async_loop()
            else:
                self._lockstep_loop()
        except BaseException as e:  # noqa: BLE001  surfaced to the learner via self.error
            self.error = e
            log.error("actor %d failed:\n%s", self.index, traceback.format_exc())

    def _params(self, min_version: int) -> tuple[Any, int] | None:
        """(params, version) on this actor's device; None if the run stops while waiting."""
        while not self._stop_event.is_set():
            try:
                return self._params_store.get(self._device, POLL_S, min_version)
            except TimeoutError:
                continue
        return None

    def _flush(self, buffer: SegmentBuffer, timers: dict[str, float], env_actions=None) -> None:
        """Queues every complete rollout (one recv() can complete several), timing the rollout
        assembly (`rollout_s`) and the wait for room in the queue (`queue_put_s`)."""
        while True:
            start = time.perf_counter()
            rollout = buffer.pop_rollout()
            timers["rollout_s"] += time.perf_counter() - start
            if rollout is None:
                return
            timers["queue_put_s"] += self._put(QueueItem(self.index, rollout, env_actions))

    def _put(self, item: QueueItem) -> float:
        start = time.perf_counter()
        while not self._stop_event.is_set():
            try:
                self._queue.put(item, timeout=POLL_S)
                break
            except queue.Full:
                continue
        return time.perf_counter() - start

    def _async_loop(self) -> None:
        env = self._make_env(0)
        try:
            num_envs = env.config["num_envs"]
            buffer = SegmentBuffer(num_envs, self._unroll, self._segments_per_rollout)
            tracker = EpisodeTracker(num_envs)
            timers = dict.fromkeys(ActorStats.TIMERS, 0.0)
            key = self._key
            env.async_reset()
            while not self._stop_event.is_set():
                t0 = time.perf_counter()
                obs, reward, terminated, truncated, info = env.recv()
                t1 = time.perf_counter()
                env_ids = info["env_id"]
                buffer.add_observation(env_ids, obs, reward, terminated, truncated)
                returns, lengths = tracker.update(env_ids, reward, terminated, truncated, info)
                t2 = time.perf_counter()
                got = self._params(0)
                if got is None:
                    break
                params, version = got
                key, action, env_action, extras = self._act_step(params, obs, key)
                action, env_action, extras = jax.device_get((action, env_action, extras))
                t3 = time.perf_counter()
                buffer.add_action(env_ids, action, extras, version)
                t4 = time.perf_counter()
                env.send(env_action, env_ids)
                t5 = time.perf_counter()
                timers["env_s"] += (t1 - t0) + (t5 - t4)
                timers["rollout_s"] += (t2 - t1) + (t4 - t3)
                timers["inference_s"] += t3 - t2
                self._flush(buffer, timers)  # envs step meanwhile
                self._stats.add(timers, len(env_ids), returns, lengths)
                timers = dict.fromkeys(timers, 0.0)
        finally:
            env.close()

    def _lockstep_loop(self) -> None:
        lockstep, env = self._lockstep, None
        try:
            while not self._stop_event.is_set():
                version = self.next_version
                if env is None or version % lockstep.epoch_updates == 0:
                    if env is not None:
                        env.close()
                    env = None  # a failed make_env must not close the old pool twice
                    env = self._make_env(version // lockstep.epoch_updates)
                    replay = lockstep.replay if version == lockstep.start_version else None
                    self.epoch_sent = [] if replay is None else list(replay)
                    started = self._start_epoch(env, replay)
                    if started is None:
                        return
                    buffer, tracker, step = started
                step = self._lockstep_unroll(env, buffer, tracker, step, version)
                if step is None:
                    return
                self.next_version = version + 1
        finally:
            if env is not None:
                env.close()

    def _start_epoch(self, env, replay: np.ndarray | None) -> tuple | None:
        """Resets a new synchronous pool and replays `replay`'s env actions (no inference, no
        data kept); returns a fresh segment buffer, episode tracker and the first recv() (None
        on a stop)."""
        num_envs = env.config["num_envs"]
        tracker = EpisodeTracker(num_envs)
        every_env = np.arange(num_envs)
        env.async_reset()
        for env_action in () if replay is None else replay.reshape(-1, *replay.shape[2:]):
            if self._stop_event.is_set():
                return None
            _, reward, terminated, truncated, info = env.recv()
            tracker.update(info["env_id"], reward, terminated, truncated, info)
            env.send(env_action, every_env)
        step = env.recv()
        # Episodes this recv() ends were reported by the run (or actor) that first played them.
        tracker.update(step[4]["env_id"], *step[1:4], step[4])
        buffer = SegmentBuffer(num_envs, self._unroll, self._segments_per_rollout)
        buffer.add_observation(step[4]["env_id"], *step[:4])
        return buffer, tracker, step

    def _lockstep_unroll(self, env, buffer, tracker, step, version: int) -> tuple | None:
        """Acts T steps from the recv() result `step` with params `version`, queues the unroll's
        rollout with the env actions sent; returns the last recv() (None on a stop)."""
        t0 = time.perf_counter()
        got = self._params(version)
        if got is None:
            return None
        params, published = got
        if published != version:
            raise RuntimeError(f"lockstep actor wanted params {version}, got {published}")
        key = jax.random.fold_in(self._key, version)
        timers = dict.fromkeys(ActorStats.TIMERS, 0.0)
        timers["inference_s"] += time.perf_counter() - t0
        sent = []
        for _ in range(self._unroll):
            obs, env_ids = step[0], step[4]["env_id"]
            t0 = time.perf_counter()
            key, action, env_action, extras = self._act_step(params, obs, key)
            action, env_action, extras = jax.device_get((action, env_action, extras))
            t1 = time.perf_counter()
            buffer.add_action(env_ids, action, extras, version)
            by_env = np.empty_like(env_action)
            by_env[env_ids] = env_action
            sent.append(by_env)
            t2 = time.perf_counter()
            env.send(env_action, env_ids)
            step = env.recv()
            t3 = time.perf_counter()
            _, reward, terminated, truncated, info = step
            buffer.add_observation(info["env_id"], *step[:4])
            returns, lengths = tracker.update(info["env_id"], reward, terminated, truncated, info)
            timers["inference_s"] += t1 - t0
            timers["env_s"] += t3 - t2
            timers["rollout_s"] += (t2 - t1) + time.perf_counter() - t3
            self._stats.add(timers, len(env_ids), returns, lengths)
            timers = dict.fromkeys(timers, 0.0)
        self.epoch_sent.append(np.stack(sent))
        self._flush(buffer, timers, self.epoch_sent[-1])
        self._stats.add(timers, 0, (), ())
        return step


def actor_spawner(
    config: Any,
    algorithm: Any,
    devices: list[jax.Device],
    store: ParamsStore,
    out_queue: queue.Queue,
    stop: threading.Event,
    stats: ActorStats,
    start_update: int = 0,
    process_index: int = 0,
    replay: dict[int, np.ndarray] | None = None,
) -> Callable[[int, int, Actor | None], Actor]:
    """`spawn(slot, restarts=0, previous=None)` starts this process's actor `slot`, round-robin
    over the actor `devices`; `previous` is the dead actor a restart replaces.

    Actor `slot` of process `p` has the global index `g = p * num_actor_threads + slot`; its env
    seed and key fold in `g`. No two actors of a run share a stream, and an actor slot gets the
    same stream however the run's actors are spread over processes.
    - Asynchronous actors also fold in the update the run starts from, so a resumed run does not
      replay the first run's episodes and samples, and a restart count (fresh episodes).
    - Lockstep actors (`config.deterministic`) derive their env seed from the env epoch and their
      key per unroll (see `Lockstep`): nothing depends on when the run was resumed. `replay`
      maps a global actor index to its env actions to replay on resume; a restarted lockstep
      actor replays its predecessor's instead, and carries on exactly where it died.
    """
    act_step = make_act_step(algorithm.act, algorithm.env_action)
    root = jax.random.fold_in(jax.random.PRNGKey(config.seed), ACTOR_SEED_PURPOSE)
    if not config.deterministic:
        root = jax.random.fold_in(root, start_update)
    segments = config.rollout_segments(jax.process_count())
    replay = replay or {}

    def spawn(slot: int, restarts: int = 0, previous: Actor | None = None) -> Actor:
        g = process_index * config.num_actor_threads + slot
        # Restarted async actors take fresh streams (first incarnations keep the old ones).
        again = (restarts,) if restarts and not config.deterministic else ()

        def make(generation: int):
            if config.deterministic:
                path = (LOCKSTEP_SEED_PURPOSE, generation, g, *again)
            else:
                path = (ACTOR_SEED_PURPOSE, start_update, g, *again)
            return make_env(
                config.env_id, config.env_kwargs, config.envs_per_actor, config.env_batch_size,
                derive_seed(config.seed, *path), config.env_threads_per_actor,
            )  # fmt: skip

        lockstep = None
        if config.deterministic:
            start, replayed = start_update, replay.get(g)
            if previous is not None:
                start = previous.next_version
                played = previous.epoch_sent[: start % config.env_epoch_updates]
                replayed = np.stack(played) if played else None
            lockstep = Lockstep(start, config.env_epoch_updates, replayed)
        key = jax.random.fold_in(root, g)
        key = jax.random.fold_in(key, restarts) if again else key
        actor = Actor(
            g, make, act_step, store, devices[slot % len(devices)], key, out_queue, stop, stats,
            config.unroll_length, segments, lockstep,
        )  # fmt: skip
        actor.start()
        return actor

    return spawn


def start_actors(config: Any, *args, **kwargs) -> list[Actor]:
    """Starts `config.num_actor_threads` actors (see `actor_spawner` for the arguments)."""
    spawn = actor_spawner(config, *args, **kwargs)
    return [spawn(slot) for slot in range(config.num_actor_threads)]
