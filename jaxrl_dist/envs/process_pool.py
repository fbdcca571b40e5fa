"""Python envs (gymnasium's API) in worker processes, behind EnvPool's async protocol.

`ProcessPool` speaks what the actors, evaluators and seats speak to an EnvPool (`config`,
`async_reset`, `recv`, `send`, `reset`, `step`, `render`, `close`), so a Python env runs
wherever an EnvPool does:

- `num_envs` envs over `num_workers` processes, a block of envs each. A worker is a fresh
  interpreter (`python -m jaxrl_dist.envs.steppers`), not a fork (the parent runs JAX's
  threads) nor multiprocessing's `spawn` (which re-runs the user's script unless it is
  guarded by `if __name__ == "__main__"`); it gets the parent's `sys.path` and the env factory
  pickled with cloudpickle (a lambda or a class of a notebook works) over a socket.
  `send(actions, env_ids)` hands each worker its envs' actions in one message; `recv()`
  returns the first `batch_size` envs to finish, by `info["env_id"]`. With `batch_size <
  num_envs` the actor acts on the envs that are ready while the other workers step: EnvPool's
  async overlap.
- EnvPool's auto-reset: the step after an episode ends is a reset step (`elapsed_step == 0`,
  reward 0, both flags False, the action ignored). Termination and truncation stay apart (a
  `TimeLimit` truncation bootstraps). Env `i` is seeded with `seed + i` at its first reset.
- A worker that raises, dies (SIGKILL) or does not answer within `step_timeout_s` is replaced
  when `restart(reason)` allows it (the actors' restart budget): its envs' episodes end as
  truncated at their last observation (counted in `cut_episodes`), and the new worker's envs
  start new episodes. When the budget is spent, `recv` raises `WorkerError`.
- A slow start is not a hang: a worker has `start_timeout_s` to import and build its envs, and
  again to answer its first request (their first reset), where later answers have
  `step_timeout_s`. A worker that does not start in time raises `WorkerStartError` (restarting
  it would be as slow: no restart is spent).
- An env that breaks its contract (an observation of the wrong shape or dtype, a NaN) is not a
  fault a restart mends: `recv` raises `EnvContractError` and the run stops with the reason.
- No worker outlives its pool: `close` (also on any error while starting) ends them, and one
  left open is killed when the interpreter exits (`workers.py`).
"""

from __future__ import annotations

import logging
import multiprocessing.connection
import subprocess
import time
from collections import deque
from collections.abc import Callable
from typing import Any

import numpy as np

from jaxrl_dist.envs.workers import (
    START_TIMEOUT_S,
    EnvContractError,
    WorkerError,
    WorkerStartError,
    kill_worker,
    start_worker,
)

log = logging.getLogger(__name__)

CLOSE_WAIT_S = 2.0  # at close: for all workers to leave by themselves, before they are killed
RESTART_SEED_STRIDE = 1_000_003  # a replaced worker's seeds: apart from every env's first
START_FIX = "raise config.sebulba.env_start_timeout_s if the env is that slow to start"


def layout_fits(num_envs: int, batch_size: int, workers: int) -> bool:
    """Whether `workers` processes can hold `num_envs` envs with `recv()` batches of
    `batch_size`: every worker the same number of envs, a batch whole workers."""
    return num_envs % workers == 0 and batch_size % (num_envs // workers) == 0


def _last_line(text: str) -> str:
    lines = [ln.strip() for ln in str(text).splitlines() if ln.strip()]
    return lines[-1] if lines else "no message"


# ---------------------------------------------------------------------------- parent side
class ProcessPool:
    """`num_envs` Python envs in `num_workers` processes (module doc).

    Args:
      factory: builds one env (a gymnasium `Env`, or a PettingZoo game: `steppers.py`);
        pickled with cloudpickle for the workers.
      name: the env as the user named it, for messages.
      restart: asked before a failed worker is replaced (spends one restart of the actors'
        budget); None: never.
      step_timeout_s: a worker silent this long on a request is hung.
      start_timeout_s: a worker's start, and its first answer (module doc).
      quiet: the workers' stderr discarded (the start-up check's probe: its failures are
        reported in one line, from the worker's traceback sent over the socket).
    """

    def __init__(
        self,
        factory: Callable[[], Any],
        name: str,
        num_envs: int,
        batch_size: int,
        num_workers: int,
        *,
        seed: int,
        restart: Callable[[str], bool] | None = None,
        step_timeout_s: float = 60.0,
        start_timeout_s: float = START_TIMEOUT_S,
        quiet: bool = False,
    ):
        import cloudpickle

        if not layout_fits(num_envs, batch_size, num_workers):
            raise ValueError(
                f"{num_envs} envs over {num_workers} workers with recv batches of {batch_size}: "
                "each worker must hold the same number of envs, and a batch whole workers"
            )
        self.config = {"num_envs": num_envs, "batch_size": batch_size, "num_threads": num_workers}
        self._name, self._seed = name, seed
        self._payload = cloudpickle.dumps(factory)
        self._per_worker = num_envs // num_workers
        self._restart, self._timeout_s = restart, step_timeout_s
        self._start_timeout_s, self._quiet = start_timeout_s, quiet
        self._last: list[tuple | None] = [None] * num_envs  # each env's last row
        self._ready: deque[tuple] = deque()  # finished envs' rows, oldest first
        # worker -> its requests in flight, oldest first: (envs, sent at); a worker answers in
        # order, so any subset of envs can be sent at any time, as to an EnvPool.
        self._pending: dict[int, deque[tuple]] = {}  # (envs, actions, force reset, since)
        self._cut: set[int] = set()  # envs whose worker was replaced while they were mid-episode
        self.cut_episodes = 0
        self._restarts = [0] * num_workers
        self._procs: list[Any] = [None] * num_workers
        self._conns: list[Any] = [None] * num_workers
        self._spawned_at = [0.0] * num_workers
        self._answered = [False] * num_workers  # its first request answered: it has started
        try:
            for w in range(num_workers):
                self._spawn(w)
            for w in range(num_workers):
                self._await_ready(w)
        except BaseException:
            self.close()
            raise

    # ------------------------------------------------------------------ workers
    def _spawn(self, w: int) -> None:
        first = w * self._per_worker
        # A replaced worker's envs take fresh streams, not the first incarnation's episodes.
        again = self._restarts[w] * RESTART_SEED_STRIDE
        seeds = [(self._seed + first + j + again) % 2**31 for j in range(self._per_worker)]
        self._spawned_at[w], self._answered[w] = time.monotonic(), False
        self._procs[w], self._conns[w] = start_worker(self._payload, self._name, seeds, self._quiet)

    def _not_started(self, w: int, what: str) -> WorkerStartError:
        return WorkerStartError(
            f"{self._name}: env worker {w} did not {what} within {self._start_timeout_s:g}s, "
            f"its start timeout; {START_FIX}"
        )

    def _await_ready(self, w: int) -> None:
        """Waits for worker `w` to build its envs (the start timeout counts from its spawn:
        workers spawned together start together)."""
        conn = self._conns[w]
        left = self._spawned_at[w] + self._start_timeout_s - time.monotonic()
        if not conn.poll(max(0.0, left)):
            raise self._not_started(w, f"import and build its {self._per_worker} env(s)")
        try:
            kind, body = conn.recv()
        except EOFError:
            kind, body = "error", f"exit code {self._exit_code(w)}"
        if kind != "ready":
            reason = f"building the env raised {_last_line(body)}"
            raise WorkerError(f"{self._name}: env worker {w} failed: {reason}", reason)

    def _replace(self, w: int, reason: str) -> None:
        """Worker `w` failed: restart it if the budget allows. Its envs that were mid-episode
        end there, truncated at their last observation (counted in `cut_episodes`): those in
        flight at once, the others (their last row with the actor, or in `_ready`) at their
        next `send`. Requests in flight that were reset steps go to the new worker as they
        were (its envs reset on their first step)."""
        if self._restart is None:
            raise WorkerError(f"{self._name}: env worker {w} failed: {reason}", reason)
        if not self._restart(f"env worker {w}: {reason}"):
            raise WorkerError(
                f"{self._name}: env worker {w} failed ({reason}) and the restart budget is "
                "spent; raise config.sebulba.actor_max_restarts or "
                "config.sebulba.actor_restart_window_s to "
                "allow more",
                reason,
            )
        log.warning("restarting env worker %d of %s after: %s", w, self._name, reason)
        self._kill(w)
        self._restarts[w] += 1
        self._spawn(w)
        self._await_ready(w)
        requests = self._pending.pop(w, deque())
        in_flight = {int(i) for ids, *_ in requests for i in ids}
        for i in self._worker_envs(w):
            if i not in in_flight and self._mid_episode(i):
                self._cut.add(i)
        for ids, actions, force_reset, _ in requests:
            resets = [force_reset or not self._mid_episode(i) for i in ids]
            for i, reset in zip(ids, resets, strict=True):
                if not reset:
                    self._cut_now(int(i))
            again = [j for j, reset in enumerate(resets) if reset]
            if again:
                kept = None if actions is None else actions[again]
                self._send_to(w, ids[again], kept, force_reset)

    def _worker_envs(self, w: int) -> range:
        return range(w * self._per_worker, (w + 1) * self._per_worker)

    def _mid_episode(self, i: int) -> bool:
        """Whether env `i`'s last row left it inside an episode (its next step is no reset)."""
        last = self._last[i]
        return last is not None and not (last[2] or last[3])

    def _cut_now(self, i: int) -> None:
        """Env `i`'s episode ends here, truncated at its last observation (its worker died)."""
        obs, reward, _, _, extra, steps = self._last[i]
        row = (obs, np.zeros_like(reward), False, True, extra, steps + 1)
        self._last[i] = row
        self._ready.append((i, *row))
        self.cut_episodes += 1

    def _exit_code(self, w: int) -> int | None:
        try:
            return self._procs[w].wait(5.0)
        except subprocess.TimeoutExpired:
            return None

    def _kill(self, w: int) -> None:
        kill_worker(self._procs[w], self._conns[w])

    # ------------------------------------------------------------------ protocol
    def async_reset(self) -> None:
        """Starts a new episode in every env (answered by the next `recv`s)."""
        self._request(np.arange(self.config["num_envs"]), None, force_reset=True)

    def send(self, action: Any, env_id: Any) -> None:
        self._request(np.asarray(env_id), np.asarray(action), force_reset=False)

    def _request(self, env_ids: np.ndarray, action: np.ndarray | None, force_reset: bool) -> None:
        if self._cut:  # envs whose worker was replaced mid-episode: their episode ends now
            cut = np.array([int(i) in self._cut and not force_reset for i in env_ids], bool)
            for i in env_ids[cut]:
                self._cut.discard(int(i))
                self._cut_now(int(i))
            self._cut.difference_update(int(i) for i in env_ids)  # a reset starts afresh
            env_ids = env_ids[~cut]
            action = None if action is None else action[~cut]
        worker = env_ids // self._per_worker
        for w in np.unique(worker):
            rows = np.flatnonzero(worker == w)
            self._send_to(
                int(w), env_ids[rows], None if action is None else action[rows], force_reset
            )

    def _send_to(self, w: int, ids: np.ndarray, action: np.ndarray | None, force: bool) -> None:
        acts = [None] * len(ids) if action is None else list(action)
        self._pending.setdefault(w, deque()).append((ids, action, force, time.monotonic()))
        try:
            self._conns[w].send(("step", ids - w * self._per_worker, acts, force))
        except (BrokenPipeError, OSError):
            pass  # a dead worker: recv() finds it and restarts it

    def recv(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        """The first `batch_size` envs to finish their step (EnvPool's `recv`)."""
        batch = self.config["batch_size"]
        while len(self._ready) < batch:
            if not self._pending:
                raise RuntimeError("recv() with no step in flight; send() first")
            self._collect()
        rows = [self._ready.popleft() for _ in range(batch)]
        if batch == self.config["num_envs"]:
            rows.sort(key=lambda row: row[0])  # a sync pool answers in env order
        return _combine(rows)

    def _limit_s(self, w: int) -> float:
        """How long worker `w` may take to answer: its first answer is part of its start."""
        return self._timeout_s if self._answered[w] else self._start_timeout_s

    def _collect(self) -> None:
        """Waits for the next workers' answers (or a failure) and files them."""
        now = time.monotonic()
        deadline = min(q[0][-1] + self._limit_s(w) for w, q in self._pending.items())
        conns = {self._conns[w]: w for w in self._pending}
        for conn in multiprocessing.connection.wait(list(conns), max(0.0, deadline - now)):
            w = conns[conn]
            try:
                kind, body = conn.recv()
            except (EOFError, OSError):
                self._replace(w, f"the process died (exit code {self._exit_code(w)})")
                continue
            if kind == "contract":
                raise EnvContractError(
                    f"{body}; fix the env so its observations match its observation_space"
                )
            if kind == "error":
                self._replace(w, f"the env raised {_last_line(body)}")
                continue
            ids, *_ = self._pending[w].popleft()  # answered in the order they were sent
            self._answered[w] = True
            if self._pending[w]:  # the next request's clock starts now: the worker is on it
                nxt = self._pending[w][0]
                self._pending[w][0] = (*nxt[:-1], max(nxt[-1], time.monotonic()))
            else:
                del self._pending[w]
            for i, row in zip(ids, body, strict=True):
                self._last[i] = row
                self._ready.append((i, *row))
        now = time.monotonic()
        for w, requests in list(self._pending.items()):
            # An answer already waiting in the socket is no hang (the parent was busy).
            if now - requests[0][-1] <= self._limit_s(w) or self._conns[w].poll(0):
                continue
            if not self._answered[w]:
                raise self._not_started(w, "answer its envs' first reset")
            self._replace(w, f"no answer within {self._timeout_s:g}s (hung)")

    def reset(self, **_: Any) -> tuple[np.ndarray, dict[str, Any]]:
        """Every env starts a new episode (a sync pool: `batch_size == num_envs`)."""
        self._check_sync("reset")
        self._ready.clear()
        self._drain()
        self.async_reset()
        obs, _, _, _, info = self.recv()
        return obs, info

    def step(self, action: Any, env_id: Any = None) -> tuple:
        self._check_sync("step")
        ids = np.arange(self.config["num_envs"]) if env_id is None else np.asarray(env_id)
        self.send(action, ids)
        return self.recv()

    def render(self) -> np.ndarray:
        """Env 0's frame (`render_mode="rgb_array"` in its kwargs), `[1, H, W, 3]`; between
        steps (nothing in flight for its worker)."""
        if 0 in self._pending:
            raise RuntimeError("render() with a step in flight; recv() it first")
        self._conns[0].send(("render",))
        kind, frame = self._conns[0].recv()
        if kind != "render":
            raise RuntimeError(f"{self._name}: rendering failed: {_last_line(frame)}")
        return np.asarray(frame)[None]

    def _check_sync(self, what: str) -> None:
        if self.config["batch_size"] != self.config["num_envs"]:
            raise RuntimeError(f"{what}() needs a sync pool (batch_size == num_envs)")

    def _drain(self) -> None:
        while self._pending:
            self._collect()
        self._ready.clear()

    def close(self) -> None:
        """Asks every worker to leave, and kills those still there after `CLOSE_WAIT_S` in
        all (one still building its envs, or inside a step, reads no request)."""
        for w, conn in enumerate(self._conns):
            if conn is not None and self._procs[w].poll() is None:
                try:
                    conn.send(("close",))
                except (BrokenPipeError, OSError):
                    pass
        deadline = time.monotonic() + CLOSE_WAIT_S
        for w, proc in enumerate(self._procs):
            if proc is not None:
                try:
                    proc.wait(max(0.0, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    pass
                self._kill(w)
        self._conns = [None] * len(self._conns)


def _combine(rows: list[tuple]) -> tuple:
    """Rows `(env, obs, reward, terminated, truncated, extra, elapsed)` as one `recv()` result:
    EnvPool's layouts, chosen by the rows themselves. A game's rows (`extra` holds
    `current_player`) give every seat's observation and reward, `[games * players, ...]` with
    `info["players"]`; dict observations (a simultaneous task) are stacked key by key."""
    ids, obs, reward, terminated, truncated, extra, elapsed = zip(*rows, strict=True)
    info = {"env_id": np.array(ids, np.int32), "elapsed_step": np.array(elapsed, np.int32)}
    if extra[0] is not None:  # a turn-based game
        players = len(reward[0])
        info["players"] = {
            "env_id": np.repeat(info["env_id"], players),
            "id": np.tile(np.arange(players, dtype=np.int32), len(ids)),
        }
        info["current_player"] = np.array([e["current_player"] for e in extra], np.int32)
        info["legal_action_mask"] = np.stack([e["legal_action_mask"] for e in extra])
        stacked, rewards = np.concatenate(obs), np.concatenate(reward)
    elif isinstance(obs[0], dict):
        stacked = {key: np.stack([o[key] for o in obs]) for key in obs[0]}
        rewards = np.stack(reward)
    else:
        stacked, rewards = np.stack(obs), np.array(reward, np.float32)
    return stacked, rewards, np.array(terminated, bool), np.array(truncated, bool), info
