"""Test helper: one `scripts/train.py` run in a subprocess, as a user starts it."""

import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def train_run(config: str, workdir: str, *flags: str) -> dict:
    """Runs `scripts/train.py --config CONFIG --workdir WORKDIR FLAGS...` from the checkout;
    returns its `summary.json` (the test fails with the run's stderr if it exits non-zero)."""
    out = subprocess.run(
        [sys.executable, os.path.join(ROOT, "scripts", "train.py"), "--config", config,
         "--workdir", workdir, *flags],
        capture_output=True, text=True, timeout=300, cwd=ROOT,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    with open(os.path.join(workdir, "summary.json")) as f:
        return json.load(f)
