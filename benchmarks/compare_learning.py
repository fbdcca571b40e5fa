"""Two learning sweeps seed against seed: how likely is a seed of A to do better than one of B?

    python benchmarks/compare_learning.py A.json B.json
    python benchmarks/compare_learning.py A.json B.json --score steps --json out.json

A and B are `benchmarks/learning.py` results (before and after a change, two configs, quiet and
under load). The probability of improvement P(A > B) (Agarwal et al. 2021, rliable's
`probability_of_improvement`): over every pair of a seed of A and a seed of B, the share where
A's seed scores better, ties counting half; 0.5 is no difference, and its 95% interval comes
from resampling each sweep's seeds on their own (`seed_statistics.improvement_ci`). Beside it,
each sweep's IQM with its interval. `--score`:

- `last` (default): each seed's last evaluation, higher is better;
- `steps`: env steps to the first crossing of the target, fewer is better; a seed that never
  crossed within the budget ranks below every seed that did (and ties with the others).

The sweeps must be judged alike: the same evaluation statistic (`eval_key`), and for `steps` the
same target and budget; a crashed sweep is refused. Mismatched inputs: one line, exit 2. (A run
that stops at its config's `stop_at_eval_return` ends on the evaluation that crossed it: compare
last evaluations of sweeps whose runs stop alike.)
`--json OUT` writes the comparison with its provenance.
"""

from __future__ import annotations

import json
import math
import os
import sys
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import provenance  # noqa: E402
from learning_report import iqm_text, is_small  # noqa: E402
from seed_statistics import REPS, improvement_ci, iqm_summary, probability_of_improvement  # noqa: E402

from jaxrl_dist.errors import OneLineArgumentParser, UsageError  # noqa: E402

SCORES = {
    "last": "the last evaluation (higher is better)",
    "steps": "env steps to the first crossing (fewer is better; never crossed: worst)",
}


class Mismatch(ValueError):
    """Two sweeps that cannot be compared, or a file that is not a sweep."""


def load_sweep(path: str) -> dict[str, Any]:
    try:
        with open(path) as f:
            result = json.load(f)
    except OSError as e:
        raise Mismatch(f"{path}: {e.strerror}") from None
    except ValueError:
        raise Mismatch(f"{path} is not JSON") from None
    if not isinstance(result, dict) or not {"per_seed", "target"} <= set(result):
        raise Mismatch(f"{path} is not a learning.py result (no per_seed or target)")
    result["name"] = os.path.splitext(os.path.basename(path))[0]  # as the file is cited
    crashed = [s["seed"] for s in result["per_seed"] if s.get("error")]
    if crashed:
        raise Mismatch(f"{path}: seeds {crashed} crashed; compare sweeps that finished")
    return result


def check_alike(a: dict[str, Any], b: dict[str, Any], score: str) -> None:
    """Raises `Mismatch` (one line) when `a` and `b` were judged differently."""
    keys = ("eval_key",) + (("target", "budget") if score == "steps" else ())
    judged = lambda r, key: r.get(key, "return" if key == "eval_key" else None)  # noqa: E731
    for key in keys:
        if judged(a, key) != judged(b, key):
            raise Mismatch(
                f"{a['name']} has {key} {judged(a, key)!r} and {b['name']} {judged(b, key)!r}: "
                "compare sweeps judged alike"
            )


def scores(result: dict[str, Any], score: str) -> list[float]:
    """Per-seed scores, higher is better: the last evaluation, or minus the env steps to the
    first crossing (-inf for a seed that never crossed)."""
    if score == "last":
        return [
            s["final_eval_return"] for s in result["per_seed"] if s["final_eval_return"] is not None
        ]
    return [-s["env_steps_to_target"] if s["success"] else -math.inf for s in result["per_seed"]]


def compare(a: dict[str, Any], b: dict[str, Any], score: str, reps: int = REPS) -> dict[str, Any]:
    """P(A > B) on `score` with its interval, and each sweep's IQM (of the seeds that crossed,
    for `steps`)."""
    check_alike(a, b, score)
    xs, ys = scores(a, score), scores(b, score)
    if not xs or not ys:
        empty = a["name"] if not xs else b["name"]
        raise Mismatch(f"{empty} has no seed with a {score} score to compare")
    low, high = improvement_ci(xs, ys, reps=reps)

    def iqm(values: list[float]) -> dict[str, Any] | None:
        finite = [v for v in values if math.isfinite(v)]
        summary = iqm_summary([-v for v in finite] if score == "steps" else finite, reps=reps)
        return summary and {**summary, "of_seeds": len(values)}

    return {
        "a": a["name"],
        "b": b["name"],
        "score": score,
        "score_means": SCORES[score],
        "probability_a_better": probability_of_improvement(xs, ys),
        "ci95": [low, high],
        "iqm_a": iqm(xs),
        "iqm_b": iqm(ys),
        "seeds": [len(xs), len(ys)],
        "reps": reps,
    }


def text(comparison: dict[str, Any], small: bool) -> str:
    c = comparison
    small = small and c["score"] == "last"
    low, high = c["ci95"]
    lines = [
        f"score: {c['score_means']}",
        f"A {c['a']} ({c['seeds'][0]} seeds): IQM {iqm_text(c['iqm_a'], small)}",
        f"B {c['b']} ({c['seeds'][1]} seeds): IQM {iqm_text(c['iqm_b'], small)}",
        f"P(A > B) = {c['probability_a_better']:.3f} (95% CI {low:.3f} to {high:.3f}): the chance "
        "that a seed of A scores better than a seed of B, ties counting half",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = OneLineArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("a", help="a learning.py result (JSON)")
    parser.add_argument("b", help="the result to compare it with")
    parser.add_argument("--score", choices=tuple(SCORES), default="last")
    parser.add_argument("--reps", type=int, default=REPS, help="bootstrap resamples")
    parser.add_argument("--json", default=None, metavar="OUT", help="write the comparison here")
    provenance.add_argument(parser)
    try:
        args = parser.parse_args(argv)
        if args.reps < 100:
            raise UsageError(f"--reps {args.reps}: give at least 100 resamples")
        a, b = load_sweep(args.a), load_sweep(args.b)
        comparison = compare(a, b, args.score, args.reps)
    except (UsageError, Mismatch) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    origin = provenance.capture(args.allow_dirty, devices=False) if args.json else None
    print(text(comparison, is_small(a["target"])))
    if args.json:
        comparison.update(files=[args.a, args.b], provenance=origin)
        with open(args.json, "w") as f:
            json.dump(comparison, f, indent=1)
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
