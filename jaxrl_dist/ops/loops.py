"""How far a scan over time is unrolled, per backend: the one rule the time recursions share.

On a GPU every iteration of an XLA while loop copies its condition to the host and waits for
it, and a loop body of a few kernels (a GAE or V-trace step: one fused kernel and a slice
update) is too small for XLA to capture as a CUDA graph, so each of its kernels is launched
from the host too. Unrolled by 16, the 128 steps of a PPO rollout are 8 iterations of a body
large enough to capture. XLA:CPU has no such cost, and unrolling a recurrent cell's scan there
makes it slower (Anakin PPO with an LSTM 64: 8,900 against 20,100 SPS unrolled by 8, 2 cores,
jax 0.10.2), so the CPU keeps the rolled loop. Unrolled, GAE and V-trace give the same bits;
a recurrent core's parameter gradients (a sum over the steps, which XLA may add in another
order) agree to float32's last bits (`tests/test_time_unroll.py`).
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
