"""Deterministic XLA on GPUs: the flags deterministic mode sets before JAX starts its backends.

XLA:GPU's reductions, scatters and autotuned kernels may differ from run to run (atomics, and
autotuning that picks among kernels by timing). `--xla_gpu_deterministic_ops` makes them
deterministic (and turns autotuning off); `--xla_gpu_exclude_nondeterministic_ops` is its
narrower half, kept explicitly in case a later XLA drops the wider flag's implication. XLA reads
`XLA_FLAGS` once, when the first backend starts: `scripts/train.py` sets them before that; a
script that builds a `Trainer` after running JAX code gets a warning and should export them.
CPU and TPU ignore them (their reductions are already deterministic).
"""

from __future__ import annotations

import os
import sys

DETERMINISTIC_XLA_FLAGS = (
    "--xla_gpu_deterministic_ops=true",
    "--xla_gpu_exclude_nondeterministic_ops=true",
)


GPU_PLATFORMS = ("cuda", "rocm", "gpu")


def _gpu_backend_started() -> bool:
    """Whether a GPU backend has started (read its flags already); CPU ones need none."""
    try:
        from jax._src import xla_bridge

        return any(name in GPU_PLATFORMS for name in xla_bridge._backends)
    except (ImportError, AttributeError):  # a JAX without them: assume not started
        return False


def set_deterministic_xla_flags() -> bool:
    """Adds the flags to `XLA_FLAGS` (flags already there, set by the user, win). Returns
    whether they take effect: False, with a warning on stderr, if a GPU backend started
    before (XLA read its flags then; CPU backends need none)."""
    current = os.environ.get("XLA_FLAGS", "")
    names = {flag.split("=")[0] for flag in current.split()}
    missing = [flag for flag in DETERMINISTIC_XLA_FLAGS if flag.split("=")[0] not in names]
    if not missing:
        return True
    os.environ["XLA_FLAGS"] = " ".join([current, *missing]).strip()
    if _gpu_backend_started():
        print(
            "warning: deterministic=True: JAX started before the deterministic XLA flags were "
            f"set; on a GPU, export XLA_FLAGS='{' '.join(DETERMINISTIC_XLA_FLAGS)}' first",
            file=sys.stderr,
        )
        return False
    return True
