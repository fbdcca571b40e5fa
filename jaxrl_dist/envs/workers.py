"""A Python env's worker process, as its pool (`process_pool.py`) starts and ends it, and the
errors a pool raises. Imports no JAX.

A worker is a fresh interpreter (`python -m jaxrl_dist.envs.steppers FD`) in a session of its
own, talking to its pool over a socket. No worker outlives the interpreter that started it: one
whose pool was never closed (an evaluator left open, a run ended by an exception) is killed at
the interpreter's exit (`_kill_left_workers`); it would otherwise live on until its next read,
which a worker building its envs or inside a step does not do.
"""

from __future__ import annotations

import atexit
import multiprocessing.connection
import socket
import subprocess
import sys
from typing import Any

from jaxrl_dist.errors import RunError

WORKER_MODULE = "jaxrl_dist.envs.steppers"  # a worker: `python -m` it with the socket's fd
# A worker's imports and env construction, and again its envs' first reset
# (`config.sebulba.env_start_timeout_s`; `process_pool.py`'s module doc).
START_TIMEOUT_S = 300.0

_LIVE_WORKERS: set[subprocess.Popen] = set()  # every worker started, until it is killed


class WorkerError(RunError):
    """A worker failed and no restart was allowed (the restart budget is spent, or the pool
    restarts none); `reason` says how it failed."""

    def __init__(self, message: str, reason: str = ""):
        super().__init__(message)
        self.reason = reason or message


class WorkerStartError(RunError):
    """A worker did not start within the start timeout: not a fault a restart mends."""


class EnvContractError(RunError):
    """An env broke its declared spaces (wrong observation shape or dtype, NaN)."""


def start_worker(payload: bytes, name: str, seeds: list[int], quiet: bool) -> tuple[Any, Any]:
    """A worker process given the pickled env factory `payload` for the envs of `seeds`
    (`name`: the env, for its messages): `(process, connection)`. `quiet`: its stderr
    discarded."""
    parent, child = socket.socketpair()
    proc = subprocess.Popen(
        [sys.executable, "-m", WORKER_MODULE, str(child.fileno())],
        pass_fds=(child.fileno(),),
        stdin=subprocess.DEVNULL,
        # Its own session: a Ctrl-C (or a signal to the run's process group) stops the run,
        # which then closes its workers, instead of killing them mid-step; a worker whose
        # parent is gone leaves at its next read.
        start_new_session=True,
        stderr=subprocess.DEVNULL if quiet else None,
    )
    _LIVE_WORKERS.add(proc)
    child.close()
    conn = multiprocessing.connection.Connection(parent.detach())
    try:
        conn.send((list(sys.path), payload, name, seeds))
    except (BrokenPipeError, OSError):
        pass  # it died at once: its pool finds out waiting for it to be ready
    return proc, conn


def kill_worker(proc: Any, conn: Any) -> None:
    """Closes the connection and kills the process (either may be None), and reaps it."""
    if conn is not None:
        conn.close()
    if proc is not None and proc.poll() is None:
        proc.kill()
        proc.wait(5.0)
    _LIVE_WORKERS.discard(proc)


@atexit.register
def _kill_left_workers() -> None:
    """At the interpreter's exit: kills the workers nobody closed (module doc)."""
    for proc in list(_LIVE_WORKERS):
        if proc.poll() is None:
            proc.kill()
