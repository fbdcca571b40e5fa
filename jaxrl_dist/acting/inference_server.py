"""A central inference server (SEED RL, Espeholt et al. 2020): one per inference device.

Many actor threads send requests (`obs [B, ...]` of some of their envs) to one server thread,
which batches them (up to `max_batch` env rows, or whatever arrived within `timeout_ms` of the
first request), pads the batch to exactly `max_batch` rows so one program serves every batch,
and runs the agent's `ActorCore` on its device with the per-env actor state of every actor slot:
`[slots * envs_per_slot + 1, ...]`, the last row a padding row whose results are dropped.

The actor's side, `ServerClient` (a `PolicyClient`, interchangeable with `LocalClient`), and the
`ServerHandle` it finds its server through live in `server_client.py`. The server thread is
supervised like an actor (`.index`, `.error`, `is_alive()`): when it dies, the supervisor
starts a new one and swaps it into the handle; each client then re-registers its slot there
(fresh per-env state from `fold_in(key, generation)`) and resends.
"""

from __future__ import annotations

import collections
import logging
import threading
import time
import traceback
from typing import Any

import jax
import numpy as np

from jaxrl_dist.acting.params_store import ParamsStore
from jaxrl_dist.acting.policy_client import (
    ActResult,
    as_structure,
    episode_starts,
    jit_inference_step,
    wait_for_params,
)
from jaxrl_dist.agents.base import ActorCore, ActorIdentity
from jaxrl_dist.threads import POLL_S
from jaxrl_dist.types import PyTree, pad_rows

log = logging.getLogger(__name__)

# Writes a slot's rows `[E, ...]` into the state `[R, ...]` at row `start` (traced: one compile).
_write_rows = jax.jit(
    lambda state, new, start: jax.tree.map(
        lambda s, n: jax.lax.dynamic_update_slice_in_dim(s, n, start, 0), state, new
    ),
    donate_argnums=0,
)


class Request:
    """One actor's request: `obs [B, ...]` of its envs `env_ids [B]` (slot-local ids), with
    the episode starts `first [B]`."""

    def __init__(
        self, slot: int, obs: np.ndarray, env_ids: np.ndarray, min_version: int, first: np.ndarray
    ):
        self.slot, self.obs, self.env_ids, self.min_version = slot, obs, env_ids, min_version
        self.first = first
        self.submitted = time.monotonic()
        self.failed = False  # the server died holding it: it will never be served
        self._result: ActResult | None = None
        self._done = threading.Event()

    def __len__(self) -> int:
        return len(self.env_ids)

    def wait(self, timeout: float | None) -> ActResult | None:
        """The result, or None if it is not ready within `timeout` s (or the request failed)."""
        self._done.wait(timeout)
        return self._result

    def _finish(self, result: ActResult | None) -> None:
        self.failed = result is None
        self._result = result
        self._done.set()


class InferenceServer(threading.Thread):
    """One per inference device; batches the requests of many actor threads.

    Exceptions in `run` are logged with their traceback and kept in `self.error`; the requests it
    held fail (their clients move to the next server). `stats()` gives the counters.
    """

    def __init__(
        self,
        *,
        index: int,
        core: ActorCore,
        store: ParamsStore,
        device: jax.Device,
        slots: int,
        envs_per_slot: int,
        max_batch: int,
        timeout_ms: float,
        broadcast_period: int,
        stop: threading.Event,
        greedy: Any = False,
    ):
        super().__init__(name=f"inference-server-{index}", daemon=True)
        if min(slots, envs_per_slot, max_batch, broadcast_period) < 1:
            raise ValueError("slots, envs_per_slot, max_batch and broadcast_period must be >= 1")
        self.index, self.error = index, None
        self.slots, self.envs_per_slot, self.max_batch = slots, envs_per_slot, max_batch
        self._core, self._store, self._device = core, store, device
        self._halt = stop  # not `_stop`: threading.Thread has a `_stop` method
        self._timeout_s, self._period = timeout_ms / 1000.0, broadcast_period
        self._pad_row = slots * envs_per_slot  # the state has one more row: the padding row
        # The policy's mode, not a sample (`config.exploration_mask`), or per state row.
        self.greedy = greedy
        self.step = jit_inference_step(core, greedy)
        self._lock = threading.Lock()  # guards the state (the step donates it)
        self._state: PyTree | None = None  # built at the first register
        self._registered: set[int] = set()
        self._cond = threading.Condition()  # guards the queue, the in-flight batch and _dead
        self._queue: collections.deque[Request] = collections.deque()
        self._inflight: list[Request] = []
        self._dead = False
        self._obs_spec: PyTree | None = None  # (shape, dtype) per observation leaf
        self._params: PyTree | None = None
        self.version: int | None = None  # of the params held
        self._counts = dict.fromkeys(("batches", "requests", "rows", "padded_rows", "refreshes"), 0)
        self._times = dict.fromkeys(("idle_s", "fill_s", "params_wait_s", "step_s"), 0.0)

    def register(
        self, slot: int, identity: ActorIdentity, key: jax.Array, keep_memory: bool = False
    ) -> None:
        """(Re)initialises the per-env state rows `[slot * E, (slot + 1) * E)` of `slot` from
        `core.init_state(identity, E, key)` (`keep_memory`: each row's recurrent state
        stays); thread-safe (between batches)."""
        if not 0 <= slot < self.slots:
            raise ValueError(f"slot {slot} is not in [0, {self.slots})")
        rows = jax.device_put(
            self._core.init_state(identity, self.envs_per_slot, key), self._device
        )
        with self._lock:
            if self._state is None:  # every row valid from the start; slots overwrite theirs
                full = self._core.init_state(identity, self._pad_row + 1, key)
                self._state = jax.device_put(full, self._device)
            elif keep_memory:
                rows = self._core.with_core_state(rows, self._slot_memory(slot))
            self._state = _write_rows(self._state, rows, slot * self.envs_per_slot)
            self._registered.add(slot)

    def _slot_memory(self, slot: int) -> PyTree:
        start, count = slot * self.envs_per_slot, self.envs_per_slot
        core = self._core.core_state(self._state)
        return jax.tree.map(lambda c: c[start : start + count], core)

    def memory(self, slot: int) -> PyTree:
        """Host copies of `slot`'s rows' recurrent states (`PolicyClient.memory`)."""
        with self._lock:
            return jax.device_get(self._slot_memory(slot))

    def set_memory(self, slot: int, memory: PyTree) -> None:
        """Puts back `slot`'s rows' recurrent states (`PolicyClient.set_memory`)."""
        start = slot * self.envs_per_slot
        with self._lock:
            core = self._core.core_state(self._state)
            memory = as_structure(core, memory)
            core = jax.tree.map(lambda c, m: c.at[start : start + len(m)].set(m), core, memory)
            self._state = self._core.with_core_state(self._state, core)

    def submit(
        self, slot: int, obs: np.ndarray, env_ids: np.ndarray, min_version: int, first=None
    ) -> Request:
        """Queues `obs [B, ...]` of the envs `env_ids [B]` (ids within the slot) of a registered
        `slot`, `first [B]` the ones that start an episode (None: none); raises ValueError for
        a bad request (B > max_batch, unknown ids, other obs)."""
        obs, env_ids = jax.tree.map(np.asarray, obs), np.asarray(env_ids, np.int32)
        n = len(env_ids)
        rows_ok = all(len(x) == n for x in jax.tree.leaves(obs))
        if env_ids.ndim != 1 or not 1 <= n <= self.max_batch or not rows_ok:
            raise ValueError(f"a request needs 1..{self.max_batch} env ids, one obs row each")
        if slot not in self._registered:
            raise ValueError(f"slot {slot} is not registered with inference server {self.index}")
        if env_ids.min() < 0 or env_ids.max() >= self.envs_per_slot:
            raise ValueError(f"env ids must be in [0, {self.envs_per_slot}): {env_ids}")
        first = episode_starts(first, n)
        if first.shape != (n,):
            raise ValueError(f"first must be [{n}] bool, one per env id, got {first.shape}")
        request = Request(slot, obs, env_ids, min_version, first)
        with self._cond:
            spec = jax.tree.map(lambda x: (x.shape[1:], x.dtype), obs)
            if self._obs_spec is not None and spec != self._obs_spec:
                raise ValueError(f"obs {spec} differ from earlier requests' {self._obs_spec}")
            self._obs_spec = spec
            if self._dead:
                request._finish(None)
            else:
                self._queue.append(request)
                self._cond.notify_all()
        return request

    def params_published(self, min_version: int, stop: threading.Event) -> bool:
        """Waits until the store holds params of at least `min_version`; False if stopped."""
        return wait_for_params(self._store, self._device, min_version, stop) is not None

    def stats(self) -> dict[str, float]:
        """Counters so far: batches, requests, rows served, padded rows, refreshes, the seconds
        spent waiting for a first request / to fill batches / for params / in steps, and the
        version held (-1: none) and queued requests now."""
        version = -1 if self.version is None else self.version
        return {**self._counts, **self._times, "version": version, "queued": len(self._queue)}

    def run(self) -> None:
        try:
            while not self._halt.is_set():
                batch = self._next_batch()
                if batch:
                    self._run_batch(batch)
        except BaseException as e:  # noqa: BLE001  surfaced via self.error and failed requests
            self.error = e
            log.error("inference server %d failed:\n%s", self.index, traceback.format_exc())
            with self._cond:
                self._dead = True
                for request in [*self._inflight, *self._queue]:
                    request._finish(None)
                self._queue.clear()

    def _next_batch(self) -> list[Request]:
        """The first request (waiting in POLL_S slices), then more until the batch holds
        max_batch rows, the next would overflow it, or timeout_ms passed since the first
        arrived. [] once stopped."""
        start = time.perf_counter()
        with self._cond:
            while not self._queue:
                if self._halt.is_set():
                    return []
                self._cond.wait(POLL_S)
            filled = time.perf_counter()
            batch = [self._queue.popleft()]
            rows, deadline = len(batch[0]), batch[0].submitted + self._timeout_s
            while rows < self.max_batch and not self._halt.is_set():
                if self._queue:
                    if rows + len(self._queue[0]) > self.max_batch:
                        break
                    batch.append(self._queue.popleft())
                    rows += len(batch[-1])
                    continue
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._cond.wait(min(left, POLL_S))
            self._inflight = batch
        self._times["idle_s"] += filled - start
        self._times["fill_s"] += time.perf_counter() - filled
        return batch

    def _refresh(self, batch: list[Request]) -> bool:
        """Takes the newest params when none are held, when the store is `broadcast_period`
        versions ahead, or when a request needs a newer version (waiting for it). False if
        stopped while waiting."""
        need, held, newest = max(r.min_version for r in batch), self.version, self._store.version
        if held is not None and need <= held and (newest is None or newest - held < self._period):
            return True
        start = time.perf_counter()
        got = wait_for_params(self._store, self._device, need, self._halt)
        self._times["params_wait_s"] += time.perf_counter() - start
        if got is None:
            return False
        self._params, self.version = got
        self._counts["refreshes"] += 1
        return True

    def _run_batch(self, batch: list[Request]) -> None:
        """One padded step over `batch`; hands each request its rows of the results."""
        if not self._refresh(batch):
            return
        start = time.perf_counter()
        obs = jax.tree.map(lambda *xs: np.concatenate(xs), *[r.obs for r in batch])
        n = sum(len(r) for r in batch)
        padded = pad_rows(obs, self.max_batch)
        rows = np.full(self.max_batch, self._pad_row, np.int32)
        rows[:n] = np.concatenate([r.slot * self.envs_per_slot + r.env_ids for r in batch])
        first = np.zeros(self.max_batch, bool)
        first[:n] = np.concatenate([r.first for r in batch])
        inputs = jax.device_put((padded, rows, first), self._device)
        with self._lock:  # the server keeps every env's state, a recurrent core's included
            *out, self._state = self.step(self._params, *inputs, self._state)
        action, env_action, extras, core_state = jax.device_get(out)
        offset = 0
        for r in batch:
            part = slice(offset, offset + len(r))
            cut = lambda x, part=part: x[part]  # noqa: E731
            extras_r, core_r = jax.tree.map(cut, (extras, core_state))
            r._finish(ActResult(cut(action), cut(env_action), extras_r, self.version, core_r))
            offset += len(r)
        with self._cond:
            self._inflight = []
        self._times["step_s"] += time.perf_counter() - start
        self._counts["batches"] += 1
        self._counts["requests"] += len(batch)
        self._counts["rows"] += n
        self._counts["padded_rows"] += self.max_batch - n
