"""Start-up with and without the compilation cache: a run's time to its first step, cold and warm.

    python benchmarks/startup.py                                   # CartPole and Breakout (~4 min)
    python benchmarks/startup.py --configs configs/impala_cartpole.py --warm 1

Each config runs `scripts/train.py` (a fresh process: imports, envs, compiles, one step and a
final evaluation) with the cache off, then cold (an empty cache directory of its own), then
`--warm` times on that cache. Read from each run's `summary.json`: `startup_s` (from the
Trainer's start to its first step's end) and `compile` (compiles, seconds in XLA, tracing and
lowering, cache hits); the process's whole wall time beside them. Written to
`benchmarks/results/<device>/startup.json` and `.md`.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import provenance  # noqa: E402
from throughput import environment, write_result  # noqa: E402

from jaxrl_dist.config import ConfigError  # noqa: E402

CONFIGS = ("configs/impala_cartpole.py", "configs/impala_atari.py")
ONE_STEP = [  # one update (Breakout's batch is 64 x 20 = 1,280 env steps), a short evaluation
    "--config.total_env_steps=1280",
    "--config.eval_every_updates=0",
    "--config.eval_episodes=2",
    "--config.eval_mode=sampled",
    "--config.checkpoint_every_updates=0",
    "--config.learning_curve=False",
    "--quiet",
]


def one_run(config: str, cache: str) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("JAX_")}
    env["JAXRL_DIST_COMPILATION_CACHE"] = cache
    with tempfile.TemporaryDirectory() as workdir:
        t0 = time.perf_counter()
        subprocess.run(
            [sys.executable, os.path.join(ROOT, "scripts", "train.py"), "--config", config]
            + ["--workdir", workdir, *ONE_STEP],
            check=True,
            env=env,
            cwd=ROOT,
        )
        wall = time.perf_counter() - t0
        with open(os.path.join(workdir, "summary.json")) as f:
            summary = json.load(f)
    compiled = {k: v for k, v in summary["compile"].items() if k != "cache_dir"}
    return {"process_s": round(wall, 2), "startup_s": summary["startup_s"], **compiled}


def resolved(configs: list[str]) -> dict:
    """Each config as train.py builds it for these runs (the one-step flags included)."""
    from jaxrl_dist.config.cli import parse_args

    flags = [f for f in ONE_STEP if f.startswith("--config.")]
    return {c: parse_args(["--config", c, "--workdir", "unused", *flags])[0] for c in configs}


def markdown(result: dict) -> str:
    lines = [
        f"Start-up, {result['environment']['device']}, {result['environment']['cpu_count']} "
        "cores: a run's time to its first step",
        "",
        "| config | cache | process s | start-up s | compiles | XLA s | trace + lower s | hits |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for config, runs in result["configs"].items():
        for r in runs:
            lines.append(
                f"| {os.path.basename(config)} | {r['cache']} | {r['process_s']} | "
                f"{r['startup_s']} | {r['compiles']:.0f} | {r['backend_s']:.2f} | "
                f"{r['trace_s'] + r['lower_s']:.2f} | {r['cache_hits']:.0f} |"
            )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--configs", default=",".join(CONFIGS), help="comma list of configs")
    parser.add_argument("--warm", type=int, default=2, help="warm runs after the cold one")
    parser.add_argument("--out-dir", default=None)
    provenance.add_argument(parser)
    args = parser.parse_args(argv)
    configs = args.configs.split(",")
    try:
        built = resolved(configs)
    except ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    # devices=False: JAX starts here only after the runs (below).
    origin = provenance.capture(args.allow_dirty, built, devices=False)
    result = {"flags": ONE_STEP, "configs": {}, "provenance": origin}
    for config in configs:
        runs = result["configs"][config] = []
        with tempfile.TemporaryDirectory() as cache:
            for label in ["off", "cold"] + ["warm"] * args.warm:
                run = one_run(config, "off" if label == "off" else cache)
                runs.append({"cache": label, **run})
                print(config, runs[-1], flush=True)
    # JAX starts here only after the runs: on a GPU it would take memory from the children.
    result["environment"] = environment()
    write_result(args.out_dir, "startup", result, markdown(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
