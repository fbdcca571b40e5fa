"""Replay throughput: inserts and samples per second of the data seam's replays, pure NumPy.

For vector observations (8 float32, LunarLander's) at capacity 1M transitions and Atari frames
(4 x 84 x 84 uint8) at `--atari-capacity` transitions (the default 100k holds ~3 GB; 1M would
be ~28 GB), it times:

- inserts: actor items of 16 segments x T=16 transitions into a full ring (filled once untimed
  first, so the timing is a long run's steady state, not the OS faulting in fresh pages)
  (transitions per second);
- samples: reads of a batch (256 transitions for vectors, 32 for frames) from the full ring,
  for the uniform replay (whole segments: counted as batch / T segments, so the same
  transitions per read) and the prioritized one (n=3 windows, each read followed by
  `update_priorities` with new random priorities, as a learner does) (transitions per second).

No rate limiting (tolerance inf). Each figure is the median of `--repeats` timed blocks.

Usage:
    python benchmarks/replay_throughput.py [--atari-capacity 100000] [--out PATH]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import statistics
import sys
import threading
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import provenance  # noqa: E402

from jaxrl_dist.data.base import QueueItem
from jaxrl_dist.data.prioritized import PrioritizedReplay
from jaxrl_dist.data.replay import UniformReplay
from jaxrl_dist.types import Rollout

T, WIDTH, N_STEP = 16, 16, 3
DEFAULT_OUT = os.path.join(os.path.dirname(__file__), "results", "cpu", "replay_throughput.json")
KINDS = {  # name: (obs shape, dtype, capacity flag, batch in transitions)
    "vector": ((8,), np.float32, "vector_capacity", 256),
    "atari": ((4, 84, 84), np.uint8, "atari_capacity", 32),
}


def _item(shape, dtype, rng) -> QueueItem:
    obs = rng.integers(0, 255, size=(T + 1, WIDTH, *shape)).astype(dtype)
    ends = rng.uniform(size=(T + 1, WIDTH)) < 0.01
    return QueueItem(
        0,
        Rollout(
            obs=obs,
            reward=rng.normal(size=(T + 1, WIDTH)).astype(np.float32),
            terminated=ends,
            truncated=np.zeros_like(ends),
            action=rng.integers(0, 4, size=(T, WIDTH)).astype(np.int32),
            agent_extras={},
            policy_version=np.zeros((T, WIDTH), np.int32),
        ),
    )


def _replay(prioritized: bool, capacity: int, batch: int):
    common = dict(
        min_size=1, samples_per_insert=1.0, tolerance=math.inf, seed=0, stop=threading.Event()
    )
    if prioritized:
        return PrioritizedReplay(
            capacity=capacity,
            batch_size=batch,
            unroll_length=T,
            n_step=N_STEP,
            priority_exponent=0.6,
            **common,
        )
    return UniformReplay(capacity=capacity // T, batch_size=max(1, batch // T), **common)


def _median_rate(count: int, repeats: int, block) -> float:
    rates = []
    for _ in range(repeats):
        start = time.perf_counter()
        block()
        rates.append(count / (time.perf_counter() - start))
    return statistics.median(rates)


def measure(kind: str, prioritized: bool, capacity: int, repeats: int) -> dict:
    shape, dtype, _, batch = KINDS[kind]
    rng = np.random.default_rng(0)
    items = [_item(shape, dtype, rng) for _ in range(8)]
    replay = _replay(prioritized, capacity, batch)
    per_item = T * WIDTH
    fills = math.ceil(capacity / per_item)
    writes = iter(range(10**12))

    def insert_block():
        for _ in range(max(1, fills // repeats)):
            replay.write(items[next(writes) % len(items)])

    for _ in range(fills):  # untimed: fill the ring once, so its pages are touched as in a run
        replay.write(items[next(writes) % len(items)])

    insert_rate = _median_rate(max(1, fills // repeats) * per_item, repeats, insert_block)
    reads = 200 if kind == "vector" else 100

    def sample_block():
        for _ in range(reads):
            batch_ = replay.read(0)
            if prioritized:
                replay.update_priorities(batch_.sample_ids, rng.uniform(size=batch))

    sample_rate = _median_rate(reads * batch, repeats, sample_block)
    return {
        "kind": kind,
        "prioritized": prioritized,
        "capacity_transitions": capacity,
        "batch_transitions": batch,
        "held_transitions": replay.size * T,
        "inserts_per_s": round(insert_rate),
        "samples_per_s": round(sample_rate),
    }


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--vector-capacity", type=int, default=1_000_000)
    p.add_argument("--atari-capacity", type=int, default=100_000)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--out", default=DEFAULT_OUT)
    provenance.add_argument(p)
    args = p.parse_args(argv)
    origin = provenance.capture(args.allow_dirty, devices=False)  # NumPy only: JAX unstarted
    rows = []
    for kind, (_, _, flag, _) in KINDS.items():
        for prioritized in (False, True):
            row = measure(kind, prioritized, getattr(args, flag), args.repeats)
            print(json.dumps(row), flush=True)
            rows.append(row)
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(
            {
                "rows": rows,
                "machine": platform.platform(),
                "cpus": os.cpu_count(),
                "python": sys.version.split()[0],
                "numpy": np.__version__,
                "command": " ".join(sys.argv),
                "provenance": origin,
            },
            f,
            indent=2,
        )
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
