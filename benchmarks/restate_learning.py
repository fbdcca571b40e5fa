"""Adds the statistics `learning.py` reports since issue 55 to results measured before them.

    python benchmarks/restate_learning.py                       # every learning result
    python benchmarks/restate_learning.py benchmarks/results/cpu/learning/r2d2_memory_load1.json \
        --at-target 475
    python benchmarks/restate_learning.py --check               # exit 1 if any is out of date

From each file's per-seed results (each seed's last evaluation, first crossing and evaluation
curve), `learning_report.added_statistics` computes how many seeds hold the target at their
last evaluation and the IQM with its 95% bootstrap interval of the last evaluations and of the
env steps to the first crossing; those keys (`learning_report.ADDED_KEYS`) are written into the
file's `aggregate` and nothing else is touched: the per-seed data and every other figure stay
as measured. `--at-target T` also judges the sweep again at T from the seeds' evaluation curves
(the first evaluation at or above T within the budget; seconds unknown), under
`aggregate_at["T"]`: a sweep judged at 400 can then be stated beside others judged at 475.
`restated` records the script, the keys and its provenance. Files without per-seed results
(a single run's summary, a larger-grid probe) are skipped. Bad arguments: one line, exit 2.
"""

from __future__ import annotations

import copy
import glob
import json
import os
import sys
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import provenance  # noqa: E402
from learning_report import (  # noqa: E402
    ADDED_KEYS,
    added_statistics,
    aggregate,
    at_target,
    iqm_text,
    is_small,
)

from jaxrl_dist.errors import OneLineArgumentParser, UsageError  # noqa: E402

RESULTS = os.path.join(HERE, "results")


def learning_files(root: str = RESULTS) -> list[str]:
    """Every learning sweep's JSON under `root/<device>/learning/` (subfolders too)."""
    found = glob.glob(os.path.join(root, "*", "learning", "**", "*.json"), recursive=True)
    return sorted(p for p in found if _is_sweep(_load(p)))


def restate(result: dict[str, Any], at_targets: tuple[float, ...] = ()) -> dict[str, Any]:
    """A copy of `result` with the added statistics in its `aggregate` (and, for each of
    `at_targets`, the whole aggregate judged at it under `aggregate_at`)."""
    restated = copy.deepcopy(result)
    seeds, target = restated["per_seed"], restated["target"]
    restated["aggregate"].update(added_statistics(seeds, target))
    for t in at_targets:
        judged = at_target(seeds, t, restated["budget"])
        restated.setdefault("aggregate_at", {})[f"{t:g}"] = aggregate(judged, t)
    return restated


def stale_keys(result: dict[str, Any]) -> list[str]:
    """The added statistics a file lacks or states otherwise than its per-seed data give."""
    expected = restate(result, tuple(float(t) for t in result.get("aggregate_at", {})))
    keys = [k for k in ADDED_KEYS if result["aggregate"].get(k) != expected["aggregate"][k]]
    keys += [
        f"aggregate_at[{t}]"
        for t, agg in expected.get("aggregate_at", {}).items()
        if result["aggregate_at"].get(t) != agg
    ]
    return keys


def main(argv: list[str] | None = None) -> int:
    parser = OneLineArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="*", help="default: every learning result")
    parser.add_argument(
        "--at-target", type=float, action="append", default=[], help="also judge at this target"
    )
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if stale")
    provenance.add_argument(parser)
    try:
        args = parser.parse_args(argv)
    except UsageError as e:
        return _usage(str(e))
    paths = args.files or learning_files()
    for path in paths:
        if not os.path.isfile(path) or not _is_sweep(_load(path)):
            return _usage(f"{path} is not a learning.py result (a JSON with per_seed and target)")
    if args.check:
        stale = {p: stale_keys(_load(p)) for p in paths}
        for path, keys in stale.items():
            if keys:
                print(f"{os.path.relpath(path)}: out of date: {', '.join(keys)}")
        return 1 if any(stale.values()) else 0
    origin = provenance.capture(args.allow_dirty, devices=False)
    for path in paths:
        original = _load(path)
        at = tuple(args.at_target) + tuple(float(t) for t in original.get("aggregate_at", {}))
        result = restate(original, tuple(dict.fromkeys(at)))
        result["restated"] = {
            "by": "benchmarks/restate_learning.py",
            "keys": list(ADDED_KEYS) + (["aggregate_at"] if "aggregate_at" in result else []),
            "provenance": origin,
        }
        _write(path, result, _indent(path))
        agg = result["aggregate"]
        print(
            f"{os.path.relpath(path)}: crossed {agg['successes']}/{agg['seeds']}, held "
            f"{agg['held']}/{agg['seeds']}, last evaluation IQM "
            f"{iqm_text(agg['final_eval_iqm'], is_small(result['target']))}"
        )
    return 0


def _usage(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return 2


def _is_sweep(result: Any) -> bool:
    return isinstance(result, dict) and "per_seed" in result and "target" in result


def _load(path: str) -> Any:
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def _indent(path: str) -> int:
    """The indent the file was written with (learning.py's 1, a few hand-made files 2)."""
    with open(path) as f:
        raw = f.read()
    return 2 if raw.startswith('{\n  "') else 1


def _write(path: str, result: dict[str, Any], indent: int) -> None:
    with open(path + ".tmp", "w") as f:
        json.dump(result, f, indent=indent)
    os.replace(path + ".tmp", path)


if __name__ == "__main__":
    sys.exit(main())
