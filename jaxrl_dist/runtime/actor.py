"""Actor threads: one EnvPool each, batched inference on the actor's device, rollouts to a queue."""

from __future__ import annotations

import logging
import queue
import threading
import time
import traceback
from collections.abc import Callable
from typing import Any

import jax

from jaxrl_dist.envs import EpisodeTracker, derive_seed, make_env
from jaxrl_dist.logger import ACTOR_TIMERS
from jaxrl_dist.runtime.params_store import ParamsStore
from jaxrl_dist.runtime.segments import SegmentBuffer

log = logging.getLogger(__name__)

# Every blocking call wakes at least this often to check the stop flag.
POLL_S = 0.1
ACTOR_SEED_PURPOSE = 1  # derive_seed/fold_in path of the actors' env seeds and keys


class ActorStats:
    """Counters and per-stage timers shared by the actor threads; read and reset by the trainer."""

    # env_s: EnvPool recv + send; rollout_s: segment and episode bookkeeping (NumPy);
    # inference_s: params pick-up, the jitted act and the actions' copy to the host;
    # queue_put_s: waiting for room in the rollout queue (back-pressure from the learner).
    TIMERS = ACTOR_TIMERS

    def __init__(self):
        self._lock = threading.Lock()
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


class Actor(threading.Thread):
    """Steps one EnvPool with the newest published params and queues `(index, [T + 1, B] rollout)`
    items.

    Exceptions are logged with their traceback and kept in `self.error`; the learner checks
    `is_alive()`/`error` on every queue wait, so a dead actor never hangs the run.

    `lockstep` (deterministic mode, a synchronous EnvPool): the k-th unroll of T steps is acted
    with exactly version `start_version + k` of the params, waiting for the learner to publish
    it, so the data does not depend on thread timing.
    """

    def __init__(
        self,
        index: int,
        make_env: Callable[[], Any],
        act_step: Callable,
        params_store: ParamsStore,
        device: jax.Device,
        key: jax.Array,
        out_queue: queue.Queue,
        stop: threading.Event,
        stats: ActorStats,
        unroll_length: int,
        segments_per_rollout: int,
        lockstep: bool = False,
        start_version: int = 0,
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
        self._start_version = start_version
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self._loop()
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

    def _flush(self, buffer: SegmentBuffer, timers: dict[str, float]) -> None:
        """Queues every complete rollout (one recv() can complete several), timing the rollout
        assembly (`rollout_s`) and the wait for room in the queue (`queue_put_s`)."""
        while True:
            start = time.perf_counter()
            rollout = buffer.pop_rollout()
            timers["rollout_s"] += time.perf_counter() - start
            if rollout is None:
                return
            timers["queue_put_s"] += self._put((self.index, rollout))

    def _put(self, item) -> float:
        start = time.perf_counter()
        while not self._stop_event.is_set():
            try:
                self._queue.put(item, timeout=POLL_S)
                break
            except queue.Full:
                continue
        return time.perf_counter() - start

    def _loop(self) -> None:
        env = self._make_env()
        num_envs = env.config["num_envs"]
        buffer = SegmentBuffer(num_envs, self._unroll, self._segments_per_rollout)
        tracker = EpisodeTracker(num_envs)
        timers = dict.fromkeys(ActorStats.TIMERS, 0.0)
        key = self._key
        steps = 0  # recv()s acted on: one step of every env when lockstep (a sync EnvPool)
        env.async_reset()
        try:
            while not self._stop_event.is_set():
                t0 = time.perf_counter()
                obs, reward, terminated, truncated, info = env.recv()
                t1 = time.perf_counter()
                env_ids = info["env_id"]
                buffer.add_observation(env_ids, obs, reward, terminated, truncated)
                returns, lengths = tracker.update(env_ids, reward, terminated, truncated, info)
                t2 = time.perf_counter()
                min_version = 0
                if self._lockstep:
                    # Hand over the finished unroll before waiting for the next params.
                    self._flush(buffer, timers)
                    min_version = self._start_version + steps // self._unroll
                    t2 = time.perf_counter()
                got = self._params(min_version)
                if got is None:
                    break
                params, version = got
                steps += 1
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


def start_actors(
    config: Any,
    algorithm: Any,
    devices: list[jax.Device],
    store: ParamsStore,
    out_queue: queue.Queue,
    stop: threading.Event,
    stats: ActorStats,
    start_update: int = 0,
    process_index: int = 0,
) -> list[Actor]:
    """Starts `config.num_actor_threads` actors, round-robin over this process's actor `devices`.

    Actor `i` of process `p` has the global index `g = p * num_actor_threads + i`; its env seed
    and key fold in `g` (and the update count the run starts from, so a resumed run does not
    replay the first run's episodes and samples). No two actors of a run share a stream, and an
    actor slot gets the same stream however the run's actors are spread over processes.
    """
    act_step = make_act_step(algorithm.act, algorithm.env_action)
    root = jax.random.PRNGKey(config.seed)
    root = jax.random.fold_in(jax.random.fold_in(root, ACTOR_SEED_PURPOSE), start_update)
    segments = config.rollout_segments(jax.process_count())
    actors = []
    for i in range(config.num_actor_threads):
        g = process_index * config.num_actor_threads + i
        env_seed = derive_seed(config.seed, ACTOR_SEED_PURPOSE, start_update, g)
        make = lambda s=env_seed: make_env(  # noqa: E731
            config.env_id, config.env_kwargs, config.envs_per_actor, config.env_batch_size, s,
            config.env_threads_per_actor,
        )  # fmt: skip
        actor = Actor(
            g, make, act_step, store, devices[i % len(devices)], jax.random.fold_in(root, g),
            out_queue, stop, stats, config.unroll_length, segments,
            lockstep=config.deterministic, start_version=start_update,
        )  # fmt: skip
        actor.start()
        actors.append(actor)
    return actors
