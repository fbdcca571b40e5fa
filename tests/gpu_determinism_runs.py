"""Two deterministic IMPALA CartPole runs (on whatever device JAX picks): their final params
digests. `tests/test_run_control.py` compares them on a GPU, where the deterministic XLA flags
matter. Run in a fresh process so the flags are set before JAX starts:

    python tests/gpu_determinism_runs.py OUT_DIR     # prints both digests, exits 1 if they differ
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
    "--config.async_envs=False",
    "--config.batch_size=16",
    "--config.total_env_steps=64000",
    "--config.eval_every_updates=0",
    "--config.checkpoint_every_updates=0",
    "--config.stop_at_eval_return=None",
    "--quiet",
]


def two_runs(out_dir: str) -> tuple[str, str]:
    """Each run is `scripts/train.py` in its own process (flags before JAX starts)."""
    digests = []
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
            digests.append(json.load(f)["params_sha256"])
    return digests[0], digests[1]


if __name__ == "__main__":
    a, b = two_runs(sys.argv[1])
    print(json.dumps({"a": a, "b": b, "identical": a == b}))
    sys.exit(0 if a == b else 1)
