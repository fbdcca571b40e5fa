"""Starts a multi-process run on one machine: N copies of `scripts/train.py` joined by
`jax.distributed` (CPU collectives over gloo), for tests and for trying multi-host on a laptop.

Each process gets `--coordinator_address`, `--num_processes` and `--process_id`, and, with
`devices_per_process`, that many fake CPU devices. Their output is prefixed with `[pN]`.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TRAIN = os.path.join(ROOT, "scripts", "train.py")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_processes(
    train_args: list[str],
    num_processes: int,
    devices_per_process: int = 0,
    port: int = 0,
    stdout=None,
    stderr=None,
) -> list[subprocess.Popen]:
    """Starts the processes; `stdout`/`stderr` as for `subprocess.Popen` (default: ours)."""
    port = port or free_port()
    env = dict(os.environ)
    if devices_per_process:
        env.update(JAX_PLATFORMS="cpu", JAX_NUM_CPU_DEVICES=str(devices_per_process))
    procs = []
    for i in range(num_processes):
        args = [
            sys.executable,
            "-u",
            TRAIN,
            *train_args,
            f"--coordinator_address=127.0.0.1:{port}",
            f"--num_processes={num_processes}",
            f"--process_id={i}",
        ]
        procs.append(subprocess.Popen(args, env=env, stdout=stdout, stderr=stderr, text=True))
    return procs


def _relay(proc: subprocess.Popen, index: int) -> threading.Thread:
    def copy():
        for line in proc.stdout:
            sys.stdout.write(f"[p{index}] {line}")
            sys.stdout.flush()

    thread = threading.Thread(target=copy, daemon=True)
    thread.start()
    return thread


def run(
    train_args: list[str], num_processes: int, devices_per_process: int = 0, grace_s: float = 120.0
) -> int:
    """Runs the processes to the end; returns 0, or the first non-zero exit code.

    A process that fails makes the others stop on their own (within the heartbeat timeout); any
    still running `grace_s` later are killed.
    """
    procs = start_processes(
        train_args,
        num_processes,
        devices_per_process,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    relays = [_relay(p, i) for i, p in enumerate(procs)]
    first_failure_at, code = None, 0
    while any(p.poll() is None for p in procs):
        try:
            time.sleep(0.2)
        except KeyboardInterrupt:  # Ctrl-C reached the children too: let them save and exit
            continue
        codes = [p.returncode for p in procs if p.returncode not in (None, 0)]
        if codes and first_failure_at is None:
            first_failure_at, code = time.monotonic(), codes[0]
        if first_failure_at is not None and time.monotonic() - first_failure_at > grace_s:
            for p in procs:
                if p.poll() is None:
                    p.kill()
    for r in relays:
        r.join(timeout=5)
    code = code or next((p.returncode for p in procs if p.returncode), 0)
    return 128 - code if code < 0 else code  # killed by signal s: 128 + s, as shells report
