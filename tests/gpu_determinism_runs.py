"""Two deterministic IMPALA CartPole runs (on whatever device JAX picks): their summaries, final
params digests included. `tests/test_run_control.py` compares them on every backend (on a GPU
the deterministic XLA flags are what makes them agree; on a CPU the same check keeps this
helper from rotting), and `benchmarks/gpu_check.py` runs it on the GPU. Each run is a fresh
process, so the flags are set before JAX starts:

    python tests/gpu_determinism_runs.py OUT_DIR   # both digests, also in OUT_DIR/determinism.json

It exits 1 if they differ.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONFIG = os.path.join(ROOT, "configs", "impala_cartpole.py") + ":quick"
FLAGS = [
    "--config.deterministic=True",
    "--config.sebulba.async_envs=False",
    "--config.batch_size=32",  # one unroll of every actor per update: 1 thread x 32 envs
    "--config.total_env_steps=6400",
    "--config.eval_every_updates=0",
    "--config.checkpoint_every_updates=0",
    "--config.stop_at_eval_return=None",
    "--quiet",
]


def two_runs(out_dir: str) -> tuple[dict, dict]:
    """Each run is `scripts/train.py` in its own process (flags before JAX starts)."""
    summaries = []
    for name in ("a", "b"):
        workdir = os.path.join(out_dir, name)
        subprocess.run(
            [
                sys.executable,
                os.path.join(ROOT, "scripts", "train.py"),
                "--config",
                CONFIG,
                "--workdir",
                workdir,
                *FLAGS,
            ],
            check=True,
        )
        with open(os.path.join(workdir, "summary.json")) as f:
            summaries.append(json.load(f))
    return summaries[0], summaries[1]


if __name__ == "__main__":
    runs = two_runs(sys.argv[1])
    a, b = (s["params_sha256"] for s in runs)
    result = {"a": a, "b": b, "identical": a == b, "updates": runs[0]["updates"], "flags": FLAGS}
    with open(os.path.join(sys.argv[1], "determinism.json"), "w") as f:
        json.dump(result, f, indent=2)
    print(json.dumps(result))
    sys.exit(0 if a == b else 1)
