"""Runs a check script in its own process on fake CPU devices (imported by the sharding tests:
JAX fixes its device count when it starts, so each count needs a fresh process)."""

import json
import os
import subprocess
import sys

HERE = os.path.dirname(__file__)


def run_check(script: str, devices: int = 4, args: tuple[str, ...] = ()) -> dict:
    """`tests/<script> ARGS...` on `devices` fake CPU devices; its last stdout line, parsed as
    JSON."""
    env = {**os.environ, "JAX_NUM_CPU_DEVICES": str(devices), "JAX_PLATFORMS": "cpu"}
    out = subprocess.run(
        [sys.executable, os.path.join(HERE, script), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])
