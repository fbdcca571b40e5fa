"""What evaluating every update costs in training SPS: no evaluation, blocking evaluation (the
old way, on the learner's thread) and evaluation beside training (a thread on a params
snapshot), measured alternately in one run of this script.

    python benchmarks/eval_beside_training.py              # ~5 min on 2 cores
    python benchmarks/eval_beside_training.py --repeat 1
    python benchmarks/eval_beside_training.py --load 1     # a busy machine: one spinning core

Config: `configs/impala_cartpole.py:quick` (Sebulba, CartPole-v1, 20 eval episodes), checkpoints
and the stop target off. Arms, run in turn `--repeat` times:

- `none`: `eval_every_updates=0` (one evaluation at the end, after the timed part);
- `blocking`: `eval_every_updates=1`, `eval_in_background=False` (fewer env steps: it is slow);
- `background`: `eval_every_updates=1`, `eval_in_background=True` (the default share, 1: an
  evaluation starts as soon as the last one ended);
- `background_share0.1`: the same with `eval_background_share=0.1` (the thread rests 9x as
  long as each evaluation took).

SPS is timed from the first update's end to the last's (the `on_iteration` hook), so compilation
and the final evaluation are outside it. Each arm's ratio to `none` is the median over the
rounds of (arm SPS / that round's `none` SPS). `--load N` keeps N pure-Python spinners running
for the whole measurement (`learning.py`'s background load). Written to
`benchmarks/results/<device>/eval_beside_training.json` and `.md` (`_load<N>` under load).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, ROOT)

import numpy as np  # noqa: E402
import provenance  # noqa: E402
from learning_seeds import BackgroundLoad  # noqa: E402
from throughput import environment, write_result  # noqa: E402

from jaxrl_dist.config.cli import load_config  # noqa: E402
from jaxrl_dist.run.hooks import Hooks  # noqa: E402
from jaxrl_dist.tools.train_cli import make_trainer  # noqa: E402

CONFIG = os.path.join(ROOT, "configs", "impala_cartpole.py") + ":quick"
BASE = {"stop_at_eval_return": None, "checkpoint_every_updates": 0, "learning_curve": False}
ARMS = {
    "none": {"eval_every_updates": 0},
    "blocking": {"eval_every_updates": 1, "eval_in_background": False},
    "background": {"eval_every_updates": 1, "eval_in_background": True},
    "background_share0.1": {
        "eval_every_updates": 1,
        "eval_in_background": True,
        "eval_background_share": 0.1,
    },
}


def timed_run(steps: int, overrides: dict) -> dict:
    """One run: SPS between the first and the last update, and the evaluations it recorded."""
    marks, evals = [], []
    hooks = Hooks(
        on_iteration=lambda episodes, env_steps: marks.append((time.perf_counter(), env_steps)),
        on_eval=lambda report: evals.append(report.env_steps),
    )
    config = arm_config(steps, overrides)
    with tempfile.TemporaryDirectory() as workdir:
        make_trainer(config, workdir, quiet=True, hooks=hooks).run()
    (t_first, s_first), (t_last, s_last) = marks[0], marks[-1]
    in_loop = [s for s in evals if s <= s_last]  # the final evaluation is after the timing
    return {
        "sps": round((s_last - s_first) / (t_last - t_first), 1),
        "updates": len(marks),
        "evaluations_during_training": len(in_loop),
    }


def arm_config(steps: int, overrides: dict):
    """The config an arm's run trains (`timed_run`)."""
    return load_config(CONFIG, total_env_steps=steps, **{**BASE, **overrides})


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200_000, help="env steps, none/background")
    parser.add_argument("--blocking-steps", type=int, default=30_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--load", type=int, default=0, help="busy background processes")
    parser.add_argument("--out-dir", default=None)
    provenance.add_argument(parser)
    args = parser.parse_args(argv)
    steps = {arm: args.blocking_steps if arm == "blocking" else args.steps for arm in ARMS}
    origin = provenance.capture(
        args.allow_dirty, {arm: arm_config(steps[arm], o) for arm, o in ARMS.items()}
    )
    runs = {arm: [] for arm in ARMS}
    with BackgroundLoad(args.load):
        for _ in range(args.repeat):
            for arm, overrides in ARMS.items():
                runs[arm].append(timed_run(steps[arm], overrides))
                print(arm, runs[arm][-1], flush=True)
    ratios = {
        arm: [r["sps"] / n["sps"] for r, n in zip(runs[arm], runs["none"], strict=True)]
        for arm in ARMS
        if arm != "none"
    }
    result = {
        "environment": environment(),
        "provenance": origin,
        "config": CONFIG,
        "steps": args.steps,
        "blocking_steps": args.blocking_steps,
        "load": args.load,
        "runs": runs,
        "ratios": {a: [round(r, 3) for r in rs] for a, rs in ratios.items()},
        "median_ratio": {a: round(float(np.median(rs)), 3) for a, rs in ratios.items()},
    }
    name = "eval_beside_training" + (f"_load{args.load}" if args.load else "")
    write_result(args.out_dir, name, result, markdown(result))


def markdown(result: dict) -> str:
    env = result["environment"]
    lines = [
        "# Evaluation every update: SPS against no evaluation (CartPole-v1, IMPALA quick)",
        "",
        f"{env['device']}, {env['cpu_count']} CPUs, jax {env['versions']['jax']}, {env['date']}, "
        f"{result['load']} background spinner(s)",
        "",
        "| arm | median SPS | evaluations during training (median) | SPS / none (median) "
        "| per round |",
        "|---|---:|---:|---:|---|",
    ]
    for arm, runs in result["runs"].items():
        sps = float(np.median([r["sps"] for r in runs]))
        evals = float(np.median([r["evaluations_during_training"] for r in runs]))
        ratio = result["median_ratio"].get(arm, 1.0)
        rounds = ", ".join(f"{r:.2f}" for r in result["ratios"].get(arm, []))
        lines.append(f"| {arm} | {sps:,.0f} | {evals:.0f} | {ratio:.2f} | {rounds} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
