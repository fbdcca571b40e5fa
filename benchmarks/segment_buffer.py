"""`SegmentBuffer` alone, one thread: env steps per second through it for Atari frames and for
CartPole's vector, on random async `recv()` batches.

    python benchmarks/segment_buffer.py
    python benchmarks/segment_buffer.py --module OTHER_CHECKOUT/jaxrl_dist/data/segments.py

Per `recv()`: `add_observation`, `add_action`, then every rollout that is ready is popped, as
the Python actor loop does. `--module` loads another version of the file (to compare
checkouts); the best of 3 runs of 600 `recv()`s each is printed.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT = os.path.join(os.path.dirname(HERE), "jaxrl_dist", "data", "segments.py")
# (label, obs shape, dtype, envs, envs per recv, segments per rollout)
CASES = (
    ("atari 4x84x84 uint8", (4, 84, 84), np.uint8, 128, 64, 64),
    ("cartpole 4 float32", (4,), np.float32, 32, 16, 16),
)


def load(path: str):
    spec = importlib.util.spec_from_file_location("segments_under_test", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def steps_per_s(module, obs_shape, dtype, envs, batch, width, recvs=600, repeats=3) -> float:
    rng = np.random.default_rng(0)
    buffer = module.SegmentBuffer(envs, 20, width)
    obs, flags = np.zeros((batch, *obs_shape), dtype), np.zeros(batch, bool)
    reward, action = np.zeros(batch, np.float32), np.zeros(batch, np.int32)
    best = 0.0
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(recvs):
            ids = np.sort(rng.choice(envs, batch, replace=False))  # any envs may finish first
            buffer.add_observation(ids, obs, reward, flags, flags)
            buffer.add_action(ids, action, {"log_prob": reward}, 0)
            while buffer.pop_rollout() is not None:
                pass
        best = max(best, recvs * batch / (time.perf_counter() - start))
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--module", default=DEFAULT, help="the segments.py to time")
    args = parser.parse_args()
    module = load(args.module)
    for label, *case in CASES:
        print(f"{label}: {steps_per_s(module, *case):,.0f} env steps/s through the buffer")


if __name__ == "__main__":
    main()
