"""Learning results over many seeds, quiet or on a busy machine: does a config learn, every time?

    python benchmarks/learning.py --config configs/impala_cartpole.py --seeds 0-19
    python benchmarks/learning.py --config configs/impala_cartpole.py --seeds 0-19 --load 1
    python benchmarks/learning.py --config configs/ppo_pendulum.py --seeds 0-4 --target -300
    python benchmarks/learning.py --config configs/ppo_cartpole.py --seeds 0,3,7 \
        --config.algo.learning_rate=5e-4 --name ppo_lr5e-4

Each seed is its own `scripts/train.py` process (`--config.seed=N`, then any `--config.field=value`
overrides given here, `{seed}` in them replaced by N: `--config.warm_start=runs/seed_{seed}`
fine-tunes each seed from its own pre-training), run one after another so seeds do not compete
with each other for cores.
`--load N` keeps N busy background processes (a pure-Python spin each, one core's worth) running
for the whole sweep: the condition of a researcher's laptop doing other work, where thread
timing in an asynchronous pipeline differs from a quiet machine.

A seed *crosses* the target (`success`) when one greedy evaluation returns at least `--target`
(default: the config's `stop_at_eval_return`) within the budget (default: the config's
`total_env_steps`), and *holds* it when its last evaluation (the run's final one) is still at
or above it: one good evaluation on the way is not a policy that stays good. Reported: how many
seeds cross and how many hold; env steps and seconds (the run's own clock, compilation
included) to the first crossing, median and interquartile range over the seeds that crossed;
each seed's best and last evaluation, stop reason and whole command time; the load average
during the sweep; and each seed's evaluation and training-return curves.

Aggregated over seeds as Agarwal et al. 2021 advise (`seed_statistics.py`, rliable's method):
the interquartile mean (IQM) with a 95% stratified bootstrap interval of two per-seed scores,
(1) each seed's last evaluation (every seed that evaluated: the policy the run ends with) and
(2) the env steps to the first crossing (the seeds that crossed; how many is beside it). Two
sweeps compare seed against seed with `compare_learning.py A.json B.json` (the probability
that a seed of A scores above a seed of B, with its interval).

The result records where it came from (`provenance.py`): the commit, the resolved config
(`--config` and the overrides, as train.py builds it) and the machine. A tree with uncommitted
changes is refused (exit 2) unless `--allow-dirty`, and then the result keeps the diff's
SHA-256. Written to
`benchmarks/results/<device>/learning/<name>.json` and `.png` (or `--out-dir`); `<name>` is the
config's file name, with `_load<N>` under load. A run that crashed or timed out leaves the
existing `<name>.json` and `.png` as they were: the sweep goes to `<name>.crashed.json` and exits
1. Exits 1 also with `--min-success K` if fewer than K seeds succeeded; 2 on a bad argument (one
line, nothing written). With `--keep-runs DIR`, a seed that finished under DIR for the same
sweep (its `seed_result.json`) is taken back instead of run again, marked `reused_from` with
the commit it ran at, and a seed stopped before it finished (a sitting ended, `--timeout-s`)
resumes from its last checkpoint when run again at the same commit: the same command run again
goes on where a sweep longer than a sitting stopped. One seed's process and what its work dir
says: `learning_seeds.py`; the aggregate, table and plot: `learning_report.py`.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import sys
import tempfile
import time
from typing import Any, NoReturn

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)
sys.path.insert(0, HERE)

import provenance  # noqa: E402
from learning_report import aggregate, plot, table  # noqa: E402
from learning_seeds import BackgroundLoad, reused_seed, run_seed  # noqa: E402

from jaxrl_dist.config import ConfigError  # noqa: E402
from jaxrl_dist.config.cli import parse_args  # noqa: E402
from jaxrl_dist.errors import OneLineArgumentParser, UsageError  # noqa: E402


def _fail(message: str) -> NoReturn:
    print(f"error: {message}", file=sys.stderr)
    sys.exit(2)


def parse_seeds(text: str) -> list[int]:
    """`0-19`, `0,3,7` or `0-4,10` -> sorted unique seeds."""
    seeds: set[int] = set()
    try:
        for part in text.split(","):
            lo, _, hi = part.strip().partition("-")
            first, last = int(lo), int(hi) if hi else int(lo)
            if first < 0 or last < first:
                raise ValueError
            seeds.update(range(first, last + 1))
    except ValueError:
        _fail(f"--seeds {text!r}: give seeds like 0-19, 0,3,7 or 0-4,10 (non-negative)")
    return sorted(seeds)


def _parser() -> argparse.ArgumentParser:
    parser = OneLineArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", required=True, help="FILE[:variant], as for train.py")
    parser.add_argument("--seeds", default="0-9", help="e.g. 0-19, 0,3,7 (default 0-9)")
    parser.add_argument("--load", type=int, default=0, help="busy background processes")
    parser.add_argument(
        "--target",
        type=float,
        default=None,
        help="greedy eval return to reach (default: stop_at_eval_return)",
    )
    parser.add_argument(
        "--budget",
        type=int,
        default=None,
        help="env steps within which to reach it (default: total_env_steps)",
    )
    parser.add_argument("--name", default=None, help="result file name (default: from config)")
    parser.add_argument(
        "--out-dir", default=None, help="default: benchmarks/results/<device>/learning"
    )
    parser.add_argument(
        "--keep-runs",
        default=None,
        help="keep each seed's work dir under this directory (default: a tmp); a seed that "
        "finished there for the same sweep is taken back, not run again",
    )
    parser.add_argument(
        "--min-success", type=int, default=None, help="exit 1 if fewer seeds than this succeed"
    )
    parser.add_argument(
        "--metrics",
        default="",
        help="logged metrics to summarise per seed, e.g. "
        "losses/advantage_mean,stats/policy_lag (10th/50th/90th percentiles)",
    )
    parser.add_argument("--timeout-s", type=float, default=1800.0, help="per seed")
    parser.add_argument(
        "--eval-key",
        default="return",
        help="which evaluation statistic must reach --target, "
        "e.g. return_worst_seat (a turn-based game: the learner's weaker seat)",
    )
    parser.add_argument(
        "--also-eval",
        default=None,
        metavar="OPPONENT",
        help="turn-based games: after each run, "
        "evaluate its final checkpoint against OPPONENT (random, heuristic, perfect)",
    )
    parser.add_argument("--also-eval-episodes", type=int, default=200, help="games for it")
    provenance.add_argument(parser)
    return parser


def _check(args: argparse.Namespace, extra: list[str]) -> dict[str, Any]:
    """Refuses bad arguments (one line, exit 2); fills in the target and budget from the config
    as train.py builds it, overrides included, so a bad override fails here, not in every seed;
    returns the sweep's provenance (a dirty tree without --allow-dirty: refused, exit 2)."""
    bad = [a for a in extra if not a.startswith("--config.")]
    if bad:
        _fail(f"unrecognized arguments: {' '.join(bad)} (overrides are --config.field=value)")
    if any(a.startswith("--config.seed=") for a in extra):
        _fail("--config.seed is set per run; choose the seeds with --seeds")
    if not 0 <= args.load <= 64:
        _fail(f"--load {args.load} must be between 0 and 64")
    if args.timeout_s <= 0:
        _fail("--timeout-s must be > 0")
    try:
        config, _ = parse_args(["--config", args.config, "--workdir", "unused", *extra])
    except ConfigError as e:
        _fail(str(e))
    if args.target is None:
        args.target = config.stop_at_eval_return
        if args.target is None:
            _fail(f"{args.config} has no stop_at_eval_return: give --target RETURN")
    if args.budget is None:
        args.budget = config.total_env_steps
    if not math.isfinite(args.target) or args.budget <= 0:
        _fail("--target must be finite and --budget > 0")
    if args.out_dir and os.path.isfile(args.out_dir):
        _fail(f"--out-dir {args.out_dir} is a file; give a directory")
    return provenance.capture(args.allow_dirty, config)


def _default_out_dir() -> str:
    from throughput import device_dir

    return os.path.join(HERE, "results", device_dir(), "learning")


def _environment() -> dict[str, Any]:
    from throughput import environment

    return {**environment(), "cpu_model": provenance.cpu_model()}


def main(argv: list[str] | None = None) -> int:
    try:
        args, extra = _parser().parse_known_args(argv)
    except UsageError as e:
        _fail(str(e))
    seeds = parse_seeds(args.seeds)
    origin = _check(args, extra)  # the provenance last: a bad argument is named first
    config_name = os.path.splitext(os.path.basename(args.config.partition(":")[0]))[0]
    variant = args.config.partition(":")[2]
    name = args.name or config_name + (f"_{variant}" if variant else "")
    name += f"_load{args.load}" if args.load and not args.name else ""
    out_dir = args.out_dir or _default_out_dir()
    runs_root = args.keep_runs or tempfile.mkdtemp(prefix="learning_")
    result: dict[str, Any] = {
        "name": name,
        "config": args.config,
        "overrides": extra,
        "seeds": seeds,
        "load": args.load,
        "target": args.target,
        "eval_key": args.eval_key,
        "budget": args.budget,
        "command": " ".join([os.path.relpath(__file__, ROOT), *(argv or sys.argv[1:])]),
        "git_commit": (origin["source"]["git_commit"] or "")[:7] or None,
        "environment": _environment(),
        "provenance": origin,
        "per_seed": [],
    }
    load_before = os.getloadavg()[0]
    start = time.monotonic()
    try:
        with BackgroundLoad(args.load):
            for seed in seeds:
                workdir = os.path.join(runs_root, f"seed_{seed}")
                outcome = reused_seed(args, extra, seed, workdir) if args.keep_runs else None
                outcome = outcome or run_seed(args, extra, seed, workdir)
                result["per_seed"].append(outcome)
                _progress(outcome)
                result["load_average_1min"] = os.getloadavg()[0]
    finally:
        if not args.keep_runs:
            shutil.rmtree(runs_root, ignore_errors=True)
    result["sweep_s"] = round(time.monotonic() - start, 1)
    result["load_average_1min_before"] = load_before
    result["aggregate"] = aggregate(result["per_seed"], args.target)
    os.makedirs(out_dir, exist_ok=True)
    crashed = result["aggregate"]["crashed_seeds"]
    if crashed:
        # A crashed or timed-out seed says nothing about learning: keep the result this sweep
        # would have replaced, and put this one beside it for the errors.
        json_path = os.path.join(out_dir, name + ".crashed.json")
        _write_json(result, json_path)
        print(table(result))
        print(
            f"seeds {crashed} crashed or timed out (errors above): wrote {json_path}; "
            f"{name}.json and {name}.png left as they were"
        )
        return 1
    json_path, png_path = (os.path.join(out_dir, name + ext) for ext in (".json", ".png"))
    _write_json(result, json_path)
    plot(result, png_path)
    print(table(result))
    print(f"wrote {json_path} and {png_path}")
    if args.min_success is not None and result["aggregate"]["successes"] < args.min_success:
        return 1
    return 0


def _write_json(result: dict[str, Any], path: str) -> None:
    with open(path + ".tmp", "w") as f:
        json.dump(result, f, indent=1)
    os.replace(path + ".tmp", path)


def _progress(s: dict[str, Any]) -> None:
    reached = (
        f"target at {s['env_steps_to_target']:,} steps ({s['seconds_to_target']:.1f} s)"
        if s["success"]
        else "target NOT reached"
    )
    best, last = (
        "—" if v is None else f"{v:.1f}" for v in (s["best_eval_return"], s["final_eval_return"])
    )
    error = f"; {s['error']}" if s["error"] else ""
    error += f" (taken back: ran at {s['reused_from']})" if "reused_from" in s else ""
    print(
        f"seed {s['seed']}: {reached}, best eval {best}, last eval {last}, "
        f"{s['command_s']:.1f} s{error}",
        flush=True,
    )


if __name__ == "__main__":
    sys.exit(main())
