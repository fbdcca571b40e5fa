"""End-to-end SPS of two source trees (before and after a change) in interleaved pairs.

    python benchmarks/sps_pairs.py --old /tmp/old --new /tmp/new --what impala_xla --pairs 10
    python benchmarks/sps_pairs.py --old /tmp/old --new /tmp/new --what anakin_ppo --pairs 10

Each measurement is a fresh process in its tree (`PYTHONPATH=<tree>`), so both run their own
code on the same machine, alternately: pair i runs the old tree first when i is odd, the new one
first when it is even (ABBA), so a drift of the machine's speed falls on both. `--what`:

- `impala_xla`: `throughput.py --config configs/impala_cartpole.py --stages end_to_end` (the
  default CartPole config: the XLA actor loop), SPS of its measured window;
- `anakin_ppo`: `anakin_throughput.library_sps` on `configs/anakin_ppo_cartpole.py` (evaluation
  off), SPS from the first chunk's end to the last;
- `impala_cartpole_eval`, `impala_atari_eval`: whole `scripts/train.py` runs with evaluation
  beside training on (`TRAIN_RUNS`), SPS between the first training log line after the
  compilation and the last: what evaluation snapshots and best saves cost. `--keep-best 0,1`
  gives each tree its `keep_best_checkpoints` (0 was the old default, 1 the new one);
  `--env-steps` a longer run (a steadier window). Where a tree's summary records what its best
  writes took the learner's thread (`best_saves`), each pair keeps its share of the window:
  the cost measured inside the run, free of the machine's noise between runs.

The ratio of a pair is new SPS over old; the result is the median ratio with a bootstrap 95%
interval, written to `benchmarks/results/<device>/sps_pairs_<what>.json` and `.md` with the
provenance of this checkout (the harness: commit, dirty flag, machine; refused when dirty unless
`--allow-dirty`). The two trees, `git archive` copies without `.git`, are named by their paths.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from typing import NamedTuple

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import provenance  # noqa: E402
from seed_statistics import median_ci  # noqa: E402
from throughput import environment, write_result  # noqa: E402

ANAKIN_CODE = (
    "import json, sys; sys.path.insert(0, 'benchmarks'); import anakin_throughput as a; "
    "print(json.dumps(a.library_sps(a.ANAKIN, {steps})))"
)


# Whole training runs as a user starts them, evaluation beside training on (what issue 55's
# snapshots and best saves may cost): `scripts/train.py` with these overrides; the SPS of the
# training log lines after the first (compilation) to the last, evaluations included.
TRAIN_RUNS = {
    # The default run, evaluating every 25 updates, not stopping at its target.
    "impala_cartpole_eval": (
        "configs/impala_cartpole.py",
        ["--config.stop_at_eval_return=none", "--config.total_env_steps=200000"],
    ),
    # The Atari default (IMPALA's ResNet, the XLA loop in two env groups), evaluated beside
    # training every 8 updates on 2 short greedy episodes (the config's every 2,000 updates
    # of 10 full episodes never comes within a CPU window), checkpoints every 20 updates, a
    # log line every 4 (24 updates of 1,280 env steps).
    "impala_atari_eval": (
        "configs/impala_atari.py",
        [
            "--config.total_env_steps=30720",
            "--config.log_every_updates=4",
            "--config.eval_every_updates=8",
            "--config.eval_episodes=2",
            "--config.eval_env_kwargs.max_episode_steps=300",
            "--config.checkpoint_every_updates=20",
            "--config.eval_in_background=true",
            "--config.keep_best_checkpoints=0",
        ],
    ),
}


class Measurement(NamedTuple):
    """One run's SPS, and for a training run that writes best params, the share of its
    measured window the learner's thread spent writing them (its summary's `best_saves`)."""

    sps: float
    best_saves_share: float | None = None


def measure(
    tree: str,
    what: str,
    seconds: float,
    steps: int,
    keep_best: int | None = None,
    env_steps: int | None = None,
) -> Measurement:
    """One measurement in a fresh process of `tree` (`env_steps`: a training run's budget,
    else its `TRAIN_RUNS` one)."""
    env = {**os.environ, "PYTHONPATH": tree}
    if what in TRAIN_RUNS:
        config, overrides = TRAIN_RUNS[what]
        if env_steps:
            overrides = _overridden(overrides, "total_env_steps", env_steps)
        return _train_sps(tree, env, config, overrides, keep_best)
    if what == "impala_xla":
        with tempfile.TemporaryDirectory() as out:
            command = [
                sys.executable,
                "benchmarks/throughput.py",
                "--config",
                "configs/impala_cartpole.py",
                "--stages",
                "end_to_end",
                "--seconds",
                str(seconds),
                "--no-plot",
                "--out-dir",
                out,
                "--name",
                "pair",
                *_measure_anyway(tree),
            ]
            subprocess.run(command, cwd=tree, env=env, check=True, capture_output=True)
            with open(os.path.join(out, "pair.json")) as f:
                return Measurement(float(json.load(f)["stages"]["end_to_end"]["sps"]))
    code = ANAKIN_CODE.format(steps=steps)
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=tree, env=env, check=True, capture_output=True, text=True
    )
    return Measurement(float(json.loads(out.stdout.strip().splitlines()[-1])["sps"]))


def _train_sps(
    tree: str, env: dict, config: str, overrides: list[str], keep_best: int | None
) -> Measurement:
    """SPS of a `scripts/train.py` run of `tree` between its first and last training log line
    (`keep_best`: `keep_best_checkpoints` for this tree, else the overrides' or the default),
    and the share of that window its best writes took (a tree that records them)."""
    if keep_best is not None:
        overrides = _overridden(overrides, "keep_best_checkpoints", keep_best)
    with tempfile.TemporaryDirectory() as out:
        workdir = os.path.join(out, "run")
        command = [sys.executable, "scripts/train.py", "--config", config, "--workdir", workdir]
        command += ["--quiet", "--config.learning_curve=false", *overrides]
        subprocess.run(command, cwd=tree, env=env, check=True, capture_output=True)
        with open(os.path.join(workdir, "metrics.jsonl")) as f:
            lines = [r for r in map(json.loads, f) if "charts/sps" in r]
        with open(os.path.join(workdir, "summary.json")) as f:
            saves = json.load(f).get("best_saves")
    first, last = lines[1], lines[-1]  # the first line's window holds the compilation
    window_s = last["wall_time_s"] - first["wall_time_s"]
    # The writes of the whole run over the window: an upper bound on the window's share.
    share = round(saves["learner_s"] / window_s, 5) if saves else None
    return Measurement((last["env_steps"] - first["env_steps"]) / window_s, share)


def _overridden(overrides: list[str], field: str, value: int) -> list[str]:
    """`overrides` with `--config.FIELD=VALUE` in place of any value they gave `field`."""
    flag = f"--config.{field}"
    return [*(o for o in overrides if not o.startswith(flag)), f"{flag}={value}"]


def _measure_anyway(tree: str) -> list[str]:
    """A tree from `git archive` has no .git: a throughput.py that records its provenance
    must be told to measure it anyway (this harness records its own)."""
    return (
        ["--allow-dirty"]
        if os.path.exists(os.path.join(tree, "benchmarks", "provenance.py"))
        else []
    )


def bootstrap_median(ratios: list[float], draws: int = 10_000) -> list[float]:
    return median_ci(ratios, draws)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--old", required=True, help="the tree before the change")
    parser.add_argument("--new", required=True, help="the tree after the change")
    parser.add_argument("--what", choices=("impala_xla", "anakin_ppo", *TRAIN_RUNS), required=True)
    parser.add_argument(
        "--keep-best",
        default=None,
        help="OLD,NEW: keep_best_checkpoints for each tree's train runs (e.g. 0,1: the old "
        "tree's default against the new one's), else the run's own",
    )
    parser.add_argument("--pairs", type=int, default=10)
    parser.add_argument("--seconds", type=float, default=10.0, help="impala_xla's window")
    parser.add_argument("--steps", type=int, default=262_144, help="anakin_ppo's env steps")
    parser.add_argument(
        "--env-steps",
        type=int,
        default=None,
        help="a training run's budget (longer runs: a steadier window), else TRAIN_RUNS's",
    )
    parser.add_argument("--out-dir", default=None)
    parser.add_argument("--name", default=None, help="the results file (default sps_pairs_WHAT)")
    parser.add_argument(
        "--commits", default=None, help="OLD,NEW: the commits the two trees were archived from"
    )
    provenance.add_argument(parser)
    args = parser.parse_args(argv)
    origin = provenance.capture(args.allow_dirty)
    keep = (
        dict(zip(("old", "new"), map(int, args.keep_best.split(",")), strict=True))
        if (args.keep_best)
        else {}
    )
    pairs = []
    for i in range(1, args.pairs + 1):
        order = ("old", "new") if i % 2 else ("new", "old")
        sps, shares = {}, {}
        for side in order:
            tree = args.old if side == "old" else args.new
            got = measure(tree, args.what, args.seconds, args.steps, keep.get(side), args.env_steps)
            sps[side] = got.sps
            if got.best_saves_share is not None:
                shares[f"{side}_best_saves_share"] = got.best_saves_share
        pairs.append(
            {**sps, "ratio": round(sps["new"] / sps["old"], 4), "first": order[0], **shares}
        )
        print(f"pair {i}: old {sps['old']:,.0f} new {sps['new']:,.0f} ratio {pairs[-1]['ratio']}")
    ratios = [p["ratio"] for p in pairs]
    median = round(float(np.median(ratios)), 4)
    result = {
        "what": args.what,
        "train_run": TRAIN_RUNS.get(args.what),
        "keep_best_checkpoints": keep or None,
        "old": args.old,
        "new": args.new,
        "commits": dict(zip(("old", "new"), args.commits.split(","), strict=True))
        if args.commits
        else None,
        "environment": environment(),
        "provenance": origin,
        "pairs": pairs,
        "median_ratio": median,
        "ratio_ci95": bootstrap_median(ratios),
        "old_median_sps": round(float(np.median([p["old"] for p in pairs])), 1),
        "new_median_sps": round(float(np.median([p["new"] for p in pairs])), 1),
        "env_steps": args.env_steps,
        # The new tree's best writes over each run's window (where its summary records them).
        "new_best_saves_share_max": max(
            (p["new_best_saves_share"] for p in pairs if "new_best_saves_share" in p),
            default=None,
        ),
    }
    table = (
        f"{args.what}: new / old end-to-end SPS over {len(pairs)} interleaved pairs: median "
        f"{median} (95% CI {result['ratio_ci95']}); old median {result['old_median_sps']:,.0f}, "
        f"new median {result['new_median_sps']:,.0f}\n"
    )
    write_result(args.out_dir, args.name or f"sps_pairs_{args.what}", result, table)


if __name__ == "__main__":
    main()
