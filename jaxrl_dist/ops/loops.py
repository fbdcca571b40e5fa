"""How far a scan over time is unrolled, per backend: the one rule the time recursions share.

On a GPU a scan is an XLA while loop, and each iteration's kernels are launched apart: a body
of a few kernels (a GAE or V-trace step: one fused kernel and a slice update) is even too
small for XLA to capture as a CUDA graph, so its kernels are launched from the host one by one
(the thunk sequences in `benchmarks/results/nvidia-h200/gpu_check_20261127/`). Unrolled by 16,
the 128 steps of a PPO rollout are 8 iterations of a body large enough to capture: on an H200
Anakin PPO went from 83,377 to 94,415 SPS, and with an LSTM core from 3,587 to 9,792
(`benchmarks/time_unroll.py`); the price is compile time (an IMPALA LSTM's first update 9 s
-> 46 s, cold). XLA:CPU has no such cost, and unrolling a recurrent cell's scan there makes it
slower, so the CPU keeps the rolled loop. Unrolled, GAE and V-trace give the same bits on
XLA:CPU, and a recurrent core's parameter gradients (a sum over the steps, which XLA may add
in another order) agree to float32's last bits (`tests/test_time_unroll.py`).
"""

import jax

GPU_TIME_UNROLL = 16
UNROLLED_BACKENDS = ("gpu",)  # `benchmarks/time_unroll.py --force-gpu-rule` adds the CPU


def time_unroll(length: int) -> int:
    """`lax.scan`'s `unroll` for a scan of `length` time steps on the current backend: up to
    `GPU_TIME_UNROLL` on a GPU, else 1. Call it while tracing: it reads the backend."""
    if jax.default_backend() not in UNROLLED_BACKENDS:
        return 1
    return max(1, min(length, GPU_TIME_UNROLL))
