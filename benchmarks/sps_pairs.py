"""End-to-end SPS of two source trees (before and after a change) in interleaved pairs.

    python benchmarks/sps_pairs.py --old /tmp/old --new /tmp/new --what impala_xla --pairs 10
    python benchmarks/sps_pairs.py --old /tmp/old --new /tmp/new --what anakin_ppo --pairs 10

Each measurement is a fresh process in its tree (`PYTHONPATH=<tree>`), so both run their own
code on the same machine, alternately: pair i runs the old tree first when i is odd, the new one
first when it is even (ABBA), so a drift of the machine's speed falls on both. `--what`:

- `impala_xla`: `throughput.py --config configs/impala_cartpole.py --stages end_to_end` (the
  default CartPole config: the XLA actor loop), SPS of its measured window;
- `anakin_ppo`: `anakin_throughput.library_sps` on `configs/anakin_ppo_cartpole.py` (evaluation
  off), SPS from the first chunk's end to the last.

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


def measure(tree: str, what: str, seconds: float, steps: int) -> float:
    """One measurement in a fresh process of `tree`; its SPS."""
    env = {**os.environ, "PYTHONPATH": tree}
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
                return float(json.load(f)["stages"]["end_to_end"]["sps"])
    code = ANAKIN_CODE.format(steps=steps)
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=tree, env=env, check=True, capture_output=True, text=True
    )
    return float(json.loads(out.stdout.strip().splitlines()[-1])["sps"])


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
    parser.add_argument("--what", choices=("impala_xla", "anakin_ppo"), required=True)
    parser.add_argument("--pairs", type=int, default=10)
    parser.add_argument("--seconds", type=float, default=10.0, help="impala_xla's window")
    parser.add_argument("--steps", type=int, default=262_144, help="anakin_ppo's env steps")
    parser.add_argument("--out-dir", default=None)
    provenance.add_argument(parser)
    args = parser.parse_args(argv)
    origin = provenance.capture(args.allow_dirty)
    pairs = []
    for i in range(1, args.pairs + 1):
        order = ("old", "new") if i % 2 else ("new", "old")
        sps = {}
        for side in order:
            tree = args.old if side == "old" else args.new
            sps[side] = measure(tree, args.what, args.seconds, args.steps)
        pairs.append({**sps, "ratio": round(sps["new"] / sps["old"], 4), "first": order[0]})
        print(f"pair {i}: old {sps['old']:,.0f} new {sps['new']:,.0f} ratio {pairs[-1]['ratio']}")
    ratios = [p["ratio"] for p in pairs]
    median = round(float(np.median(ratios)), 4)
    result = {
        "what": args.what,
        "old": args.old,
        "new": args.new,
        "environment": environment(),
        "provenance": origin,
        "pairs": pairs,
        "median_ratio": median,
        "ratio_ci95": bootstrap_median(ratios),
        "old_median_sps": round(float(np.median([p["old"] for p in pairs])), 1),
        "new_median_sps": round(float(np.median([p["new"] for p in pairs])), 1),
    }
    table = (
        f"{args.what}: new / old end-to-end SPS over {len(pairs)} interleaved pairs: median "
        f"{median} (95% CI {result['ratio_ci95']}); old median {result['old_median_sps']:,.0f}, "
        f"new median {result['new_median_sps']:,.0f}\n"
    )
    write_result(args.out_dir, f"sps_pairs_{args.what}", result, table)


if __name__ == "__main__":
    main()
