"""`python tests/record_updates.py OUT [train.py args]`: runs the training CLI and records what
each update learned from, so a multi-process test can see every process's data in the batch
(`run_two_processes` starts two such processes; `read_records` reads what they wrote).

After each update (of any agent), every process gathers the update's global batch
(`process_allgather`, a collective: every process updates the same agent at the same time) and
appends one JSON line to `OUT.p<process index>`: the agent, its update count before the update,
the global batch's rows, whether this process's rows are its block of the global batch (block
`p` along the batch axis, bit for bit), and digests of its rows and of the whole batch."""

import hashlib
import json
import os
import subprocess
import sys

import jax
import numpy as np
from jax.experimental import multihost_utils

from jaxrl_dist.learning.learner import Learner
from jaxrl_dist.sebulba.lane import Lane
from jaxrl_dist.tools import train_cli
from jaxrl_dist.tools.launch import free_port

TESTS = os.path.dirname(os.path.abspath(__file__))


def digest(tree) -> str:
    h = hashlib.sha256()
    for leaf in jax.tree.leaves(tree):
        h.update(np.ascontiguousarray(leaf).tobytes())
    return h.hexdigest()


def block_of(whole: np.ndarray, local: np.ndarray, process: int) -> tuple[np.ndarray, int]:
    """This process's block of a global leaf (the axis it was split along: the one where the
    global leaf is longer) and that axis's global length."""
    axes = [i for i, (g, n) in enumerate(zip(whole.shape, local.shape, strict=True)) if g != n]
    if not axes:  # a leaf every process holds whole
        return whole, whole.shape[0] if whole.ndim else 1
    (axis,) = axes
    rows = local.shape[axis]
    return np.take(whole, range(process * rows, (process + 1) * rows), axis=axis), whole.shape[axis]


def record(path: str, lane: dict, batch) -> None:
    process = jax.process_index()
    local = jax.tree.map(np.asarray, lane["local"])
    whole = jax.tree.map(np.asarray, multihost_utils.process_allgather(batch, tiled=True))
    matches, rows = [], []
    for g, n in zip(jax.tree.leaves(whole), jax.tree.leaves(local), strict=True):
        block, length = block_of(g, n, process)
        # float64 host arrays arrive as float32 (JAX without x64)
        matches.append(block.tobytes() == n.astype(block.dtype).tobytes())
        rows.append(length)
    line = {
        "process": process,
        "agent": lane["agent"],
        "updates": lane["updates"],
        "global_rows": max(rows),
        "block": all(matches),
        "local_sha": digest(local),
        "global_sha": digest(whole),
    }
    with open(f"{path}.p{process}", "a") as f:
        f.write(json.dumps(line) + "\n")


def main() -> int:
    path, argv = sys.argv[1], sys.argv[2:]
    real_advance, real_update = Lane.advance, Learner.update
    lane: dict = {}

    def advance(self):
        lane.update(agent=self.name, updates=self.updates, local=self.batch.data)
        return real_advance(self)

    def update(self, state, batch):
        out = real_update(self, state, batch)  # the state is donated, the batch is not
        record(path, lane, batch)
        return out

    Lane.advance, Learner.update = advance, update
    return train_cli.main(argv)


if __name__ == "__main__":
    sys.exit(main())


def run_two_processes(out: str, train_args: list[str], timeout_s: float = 300) -> list[str]:
    """Runs `train_args` as 2 processes x 1 fake CPU device, recording into `OUT.p0/.p1`; the
    tests' modules importable (`own_envs`). Returns each process's stderr (the test fails with
    it where a process exits non-zero)."""
    port = free_port()
    path = os.pathsep.join([TESTS, os.environ.get("PYTHONPATH", "")])
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "JAX_NUM_CPU_DEVICES": "1", "PYTHONPATH": path}
    distributed = [f"--coordinator_address=127.0.0.1:{port}", "--num_processes=2"]
    procs = [
        subprocess.Popen(
            [sys.executable, __file__, out, *train_args, *distributed, f"--process_id={i}"],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(2)
    ]
    try:
        errs = [p.communicate(timeout=timeout_s)[1] for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:  # a hung run must not outlive the test
                p.kill()
                p.communicate()
    for p, err in zip(procs, errs, strict=True):
        assert p.returncode == 0, err[-3000:]
    return errs


def read_records(out: str) -> dict[tuple[str, int], list[dict]]:
    """`{(agent, updates before): [process 0's line, process 1's line]}` of a recorded run."""
    records: dict[tuple[str, int], list[dict]] = {}
    for process in (0, 1):
        with open(f"{out}.p{process}") as f:
            for line in map(json.loads, f):
                records.setdefault((line["agent"], line["updates"]), []).append(line)
    return records
