"""Actor threads: each steps one EnvPool, asks its policy client for actions and writes complete
rollouts into the data seam. Where inference runs (`policy_client.py`) and where the data go
(`jaxrl_dist.data`) are the actor's collaborators, not its concern."""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
import traceback
from collections.abc import Callable
from typing import Any

import jax
import numpy as np

from jaxrl_dist.acting.params_store import ActingStopped
from jaxrl_dist.acting.policy_client import PolicyClient
from jaxrl_dist.data.base import QueueItem
from jaxrl_dist.data.segments import SegmentBuffer
from jaxrl_dist.envs import EpisodeTracker
from jaxrl_dist.errors import RunError

log = logging.getLogger(__name__)

# The actors' per-stage timers (`ActorStats`), summed over actor threads in the run's log.
ACTOR_TIMERS = ("env_s", "rollout_s", "inference_s", "unroll_s", "queue_put_s")


class ActorStats:
    """Counters and per-stage timers shared by the actor threads; read and reset by the trainer."""

    # env_s: EnvPool recv + send; rollout_s: segment and episode bookkeeping (NumPy);
    # inference_s: the policy client's call (params pick-up, the jitted act, the copy to the
    # host; with a server, the wait for its batch); unroll_s: the jitted T-step unroll of the
    # XLA actor loop (env and inference in one call); queue_put_s: waiting for the data seam
    # (back-pressure from the learner, or a replay's rate limiter).
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
        """Adds timers, env steps and finished episodes (`returns [episodes, *agents]`: the
        training log shows each episode's mean over its agents)."""
        returns = np.asarray(returns, np.float64)
        if returns.ndim > 1:
            returns = returns.reshape(len(returns), -1).mean(axis=1)
        with self._lock:
            for k, v in timers.items():
                self.timers[k] += v
            self.env_steps += steps
            self.episodes_finished += len(returns)
            self.episode_returns.extend(returns)
            self.episode_lengths.extend(lengths)

    def drain(self, into: dict[str, Any] | None = None) -> dict[str, Any]:
        """What was added since the last drain (timers, env steps, episodes), added to `into`
        (an earlier drain's result) if given; the counts start again from zero."""
        with self._lock:
            out = {
                "timers": self.timers,
                "env_steps": self.env_steps,
                "episode_returns": self.episode_returns,
                "episode_lengths": self.episode_lengths,
            }
            self._reset()
        if into is not None:
            out = {
                "timers": {k: into["timers"][k] + v for k, v in out["timers"].items()},
                "env_steps": into["env_steps"] + out["env_steps"],
                "episode_returns": into["episode_returns"] + out["episode_returns"],
                "episode_lengths": into["episode_lengths"] + out["episode_lengths"],
            }
        return out


@dataclasses.dataclass(frozen=True)
class ActorShared:
    """What every actor thread of a process shares.

    Attributes:
      write: the data seam's writer: `write(QueueItem) -> seconds waited`.
      stop: set when the run stops; every wait checks it.
      stats: where actors add their timers, env steps and finished episodes.
      unroll_length: T, transitions per segment.
      segments_per_rollout: segments per written rollout.
      sync: synchronous collection: each unroll is acted with params newer than the last
        unroll's (the actor waits for the learner's next version).
      version_for: lockstep mode, the params version of unroll `v` (None at a stop); None:
        `v` itself (one update per unroll of every actor). A replay's rounds give theirs
        (`data/lockstep_replay.py`).
    """

    write: Callable[[QueueItem], float]
    stop: threading.Event
    stats: ActorStats
    unroll_length: int
    segments_per_rollout: int
    sync: bool = False
    version_for: Callable[[int], int | None] | None = None


class ActorThread(threading.Thread):
    """An actor's thread (`Actor`, `XlaActor`): runs `_loop()`. Exceptions are logged with their
    traceback (a RunError, whose message is whole, is not: the supervisor stops the run with it)
    and kept in `self.error`; the supervisor checks the actors whenever the learner waits for
    data, so a dead actor never hangs the run, and restarts it."""

    def __init__(self, index: int):
        super().__init__(name=f"actor-{index}", daemon=True)
        self.index = index
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self._loop()
        except ActingStopped:
            return  # the run stopped while the actor waited for another agent's params
        except BaseException as e:  # noqa: BLE001  surfaced to the learner via self.error
            self.error = e
            if isinstance(e, RunError):  # a whole message (an env's), the run's stop reason
                log.debug("actor %d failed: %s", self.index, e)
            else:
                log.error("actor %d failed:\n%s", self.index, traceback.format_exc())

    def _loop(self) -> None:
        raise NotImplementedError


class Actor(ActorThread):
    """Steps one EnvPool asynchronously with the newest params its client offers, and writes
    `QueueItem`s. `make_env()` builds its EnvPool."""

    def __init__(
        self, index: int, make_env: Callable[[], Any], client: PolicyClient, shared: ActorShared
    ):
        super().__init__(index)
        self._make_env = make_env
        self._client = client
        self._shared = shared

    def _flush(
        self, buffer: SegmentBuffer, timers: dict[str, float], env_actions=None, memory=None
    ) -> int:
        """Writes every complete rollout (one recv() can complete several), timing the rollout
        assembly (`rollout_s`) and the wait for the data seam (`queue_put_s`); how many.
        `env_actions` and `memory` (a lockstep unroll's, every stream's) go with the first
        rollout only: an unroll of several rollouts (streams of several agents per env) sent
        them once."""
        written = 0
        while True:
            start = time.perf_counter()
            rollout = buffer.pop_rollout()
            timers["rollout_s"] += time.perf_counter() - start
            if rollout is None:
                return written
            lockstep = (None, None) if written else (env_actions, memory)
            item = QueueItem(self.index, rollout, *lockstep)
            timers["queue_put_s"] += self._shared.write(item)
            written += 1

    def _new_buffers(self, num_envs: int) -> tuple[SegmentBuffer, EpisodeTracker]:
        shared = self._shared
        buffer = SegmentBuffer(num_envs, shared.unroll_length, shared.segments_per_rollout)
        return buffer, EpisodeTracker(num_envs)

    def _loop(self) -> None:
        env = self._make_env()
        stop, stats = self._shared.stop, self._shared.stats
        try:
            buffer, tracker = self._new_buffers(env.config["num_envs"])
            # ended[i]: env i's last observation ended an episode, so its next one (the reset
            # step's) starts one; every env's first observation does.
            ended = np.ones(env.config["num_envs"], bool)
            timers = dict.fromkeys(ActorStats.TIMERS, 0.0)
            min_version = last_version = 0  # sync: the params version the next act needs
            gate = UnrollGate(env.config["num_envs"], self._shared.unroll_length)
            env.async_reset()
            while not stop.is_set():
                t0 = time.perf_counter()
                obs, reward, terminated, truncated, info = env.recv()
                t1 = time.perf_counter()
                env_ids = info["env_id"]
                buffer.add_observation(env_ids, obs, reward, terminated, truncated)
                returns, lengths = tracker.update(env_ids, reward, terminated, truncated, info)
                first = ended[env_ids]
                ended[env_ids] = np.logical_or(terminated, truncated)
                t2 = time.perf_counter()
                if self._shared.sync:
                    env_ids, (obs, first), _ = gate.admit(env_ids, (obs, first))
                    if not len(env_ids):
                        if not gate.all_held:  # the others' games play on: receive them
                            timers["env_s"] += t1 - t0
                            timers["rollout_s"] += time.perf_counter() - t1
                            stats.add(timers, 0, returns, lengths)
                            timers = dict.fromkeys(timers, 0.0)
                            continue
                        # Every unroll is complete: written whole (an update that takes some
                        # actors' unrolls takes each actor's at once), and the next ones wait
                        # for params newer than every step of theirs.
                        self._flush(buffer, timers)
                        env_ids, (obs, first), _ = gate.admit(*gate.release())
                        min_version = last_version + 1
                    t2 = time.perf_counter()
                acted = self._client.act(obs, env_ids, min_version=min_version, first=first)
                if acted is None:
                    break
                last_version = acted.version
                t3 = time.perf_counter()
                buffer.add_action(
                    env_ids, acted.action, acted.extras, acted.version, acted.core_state
                )
                t4 = time.perf_counter()
                env.send(acted.env_action, env_ids)
                t5 = time.perf_counter()
                timers["env_s"] += (t1 - t0) + (t5 - t4)
                timers["rollout_s"] += (t2 - t1) + (t4 - t3)
                timers["inference_s"] += t3 - t2
                if not self._shared.sync:  # (synchronous: written when every unroll is)
                    self._flush(buffer, timers)  # envs step meanwhile
                stats.add(timers, len(env_ids), returns, lengths)
                timers = dict.fromkeys(timers, 0.0)
        finally:
            env.close()


class UnrollGate:
    """A stream whose unroll is full (T actions, and now the observation that ends it) is held
    until every stream's is; then all start their next unroll. A synchronous pool's streams
    fill together; a seated game's fill apart (a learner seat moves only at its turns), so
    the others play on while the first wait. Synchronous collection's actors act the released
    rows with the next params; lockstep actors end their unroll there (`LockstepActor._play`).
    """

    def __init__(self, num_streams: int, unroll_length: int):
        self._steps = np.zeros(num_streams, np.int64)  # actions in each stream's unroll
        self._unroll = unroll_length
        self._held: list[tuple] = []  # (env_ids, rows) held
        self._num_held = 0

    @property
    def all_held(self) -> bool:
        return self._num_held == len(self._steps)

    def admit(self, env_ids: np.ndarray, rows: Any) -> tuple[np.ndarray, Any, np.ndarray]:
        """The rows of one `recv()` (`rows`: any tree of `[n, ...]` arrays) that act now,
        `(env_ids, rows, steps)` with each one's step in its unroll; the rest are held."""
        full = self._steps[env_ids] == self._unroll
        if full.any():
            self._held.append(_rows((env_ids, rows), full))
            self._num_held += int(full.sum())
            env_ids, rows = _rows((env_ids, rows), ~full)
        steps = self._steps[env_ids]
        self._steps[env_ids] += 1
        return env_ids, rows, steps

    def release(self) -> tuple[np.ndarray, Any]:
        """Every held row, `(env_ids, rows)`, at the start of its next unroll (to admit)."""
        held, self._held, self._num_held = self._held, [], 0
        env_ids, rows = jax.tree.map(lambda *parts: np.concatenate(parts), *held)
        self._steps[env_ids] = 0
        return env_ids, rows


def _rows(tree: Any, mask: np.ndarray) -> Any:
    return jax.tree.map(lambda x: x[mask], tree)
