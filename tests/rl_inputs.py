"""Random inputs shared by the op parity tests (imported by test_vtrace.py and test_gae.py)."""

import numpy as np


def lambda_values(kind, shape, seed=1):
    """`lambda_` for an op test: a scalar (`kind` is a number), one per step, or per entry."""
    rng = np.random.default_rng(seed)
    if kind == "per_step":
        return rng.uniform(0.3, 1.0, size=shape[:1]).astype(np.float32)
    if kind == "full":
        return rng.uniform(0.3, 1.0, size=shape).astype(np.float32)
    return float(kind)
