"""JAX's multi-controller runtime: start-up, and the few host values processes must agree on.

Every process runs the same program: its own actors, its own slice of the global batch, and the
same jitted update on a learner mesh that spans every process's learner devices. Besides the
update's own collectives, the trainer exchanges small host vectors with `gather` (a
`process_allgather` over all devices): one per update to agree on stopping, one per log line for
the metrics. With one process `gather` is local and free, so the same code runs everywhere.
"""

from __future__ import annotations

import dataclasses
import inspect
import logging
import os
import sys

import jax
import numpy as np

log = logging.getLogger(__name__)

INIT_TIMEOUT_S = 120  # every process must reach the coordinator within this time


class ProcessLostError(RuntimeError):
    """A collective with the other processes failed: one of them most likely died."""


@dataclasses.dataclass(frozen=True)
class LaunchSpec:
    """How this process joins a multi-process run (flags of `scripts/train.py`).

    Explicit: `coordinator_address` (host:port of process 0), `num_processes`, `process_id`.
    Auto (`auto=True`): JAX detects the cluster (SLURM, TPU pod slices, Open MPI).
    Neither: a single process, no `jax.distributed` at all.
    """

    coordinator_address: str | None = None
    num_processes: int | None = None
    process_id: int | None = None
    auto: bool = False
    heartbeat_timeout_s: int = 30

    @property
    def enabled(self) -> bool:
        return self.auto or self.num_processes not in (None, 1)

    def problem(self) -> str | None:
        """A one-line description of what is wrong with the flags, or None."""
        explicit = (self.coordinator_address, self.num_processes, self.process_id)
        if self.auto and any(v is not None for v in explicit):
            return (
                "--distributed detects the cluster itself; drop --coordinator_address, "
                "--num_processes and --process_id (or drop --distributed)"
            )
        if self.num_processes is not None and self.num_processes < 1:
            return f"--num_processes={self.num_processes} must be >= 1"
        if self.num_processes not in (None, 1):
            if not self.coordinator_address or ":" not in self.coordinator_address:
                return "--num_processes > 1 needs --coordinator_address=HOST:PORT (process 0's)"
            if self.process_id is None or not 0 <= self.process_id < self.num_processes:
                return (
                    f"--process_id={self.process_id} must be in [0, {self.num_processes}) "
                    "with --num_processes > 1"
                )
        elif self.process_id not in (None, 0):
            return f"--process_id={self.process_id} needs --num_processes > {self.process_id}"
        if self.heartbeat_timeout_s < 1:
            return f"--heartbeat_timeout_s={self.heartbeat_timeout_s} must be >= 1"
        return None


def initialize(spec: LaunchSpec) -> None:
    """Calls `jax.distributed.initialize` for a multi-process launch; must run before any JAX
    computation. A process that dies is noticed by the others within `heartbeat_timeout_s`."""
    if not spec.enabled:
        return
    kwargs = {"initialization_timeout": INIT_TIMEOUT_S}
    if "heartbeat_timeout_seconds" in inspect.signature(jax.distributed.initialize).parameters:
        kwargs["heartbeat_timeout_seconds"] = spec.heartbeat_timeout_s
    if not spec.auto:
        kwargs.update(
            coordinator_address=spec.coordinator_address,
            num_processes=spec.num_processes,
            process_id=spec.process_id,
        )
    jax.distributed.initialize(**kwargs)
    log.info(
        "process %d of %d, %d local devices of %d",
        jax.process_index(),
        jax.process_count(),
        jax.local_device_count(),
        jax.device_count(),
    )


class Cluster:
    """This process's place among the processes of a run, and the host-value collectives.

    Only the main thread calls `gather` (every process must issue the same collectives in the same
    order).
    """

    def __init__(self):
        self.index = jax.process_index()
        self.count = jax.process_count()

    @property
    def is_primary(self) -> bool:
        """Process 0 evaluates and writes the logs, `config.json` and `summary.json`."""
        return self.index == 0

    def gather(self, values: np.ndarray) -> np.ndarray:
        """`[num_processes, ...]`: every process's `values`, in process order, on every process.

        Raises ProcessLostError when another process is gone.
        """
        values = np.asarray(values)
        if self.count == 1:
            return values[None]
        from jax.experimental import multihost_utils

        try:
            return np.asarray(multihost_utils.process_allgather(values))
        except jax.errors.JaxRuntimeError as e:
            raise ProcessLostError(lost_message(e)) from None

    def gather_digests(self, digest: str) -> list[str]:
        """Every process's hex `digest` (a SHA-256), in process order."""
        rows = self.gather(np.frombuffer(bytes.fromhex(digest), np.uint8))
        return [bytes(row).hex() for row in rows]

    def disagreeing(self, digest: str) -> list[int]:
        """Processes whose `digest` differs from process 0's."""
        digests = self.gather_digests(digest)
        return [i for i, d in enumerate(digests) if d != digests[0]]


def lost_message(error: Exception) -> str:
    """One line for a failed collective (the runtime's own message is many lines long)."""
    first = str(error).splitlines()[0] if str(error) else type(error).__name__
    return (
        f"process {jax.process_index()}: lost contact with another process of the run "
        f"(it most likely died; see its log): {first[:200]}"
    )


def exit_now(code: int) -> None:
    """Leaves without `jax.distributed.shutdown`'s barrier, which waits for the dead process
    until the heartbeat times out and then aborts with a C++ stack trace."""
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
