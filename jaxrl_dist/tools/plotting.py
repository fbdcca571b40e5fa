"""`scripts/plot.py`: learning curves of one or more runs in a PNG (`run/curves.py` draws them).

Bad input prints one `error:` line and exits 2 with nothing written.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

from jaxrl_dist.errors import OneLineArgumentParser
from jaxrl_dist.run.curves import X_AXES, metrics_path, plot_learning_curves

EXIT_USAGE = 2


def _output_path(runs: Sequence[str], out: str | None) -> str:
    """`--out`, else `<run>/learning_curve.png` for one run, `./learning_curves.png` for more."""
    if out is not None:
        return out
    if len(runs) == 1:
        return os.path.join(runs[0], "learning_curve.png")
    return "learning_curves.png"


def _output_problem(out: str) -> str | None:
    """Why `out` cannot be written to, or None."""
    if not out.lower().endswith(".png"):
        return f"--out {out!r}: give a file name ending in .png"
    directory = os.path.dirname(os.path.abspath(out))
    if not os.path.isdir(directory):
        return f"--out {out!r}: directory {directory!r} does not exist; create it first"
    return None


def _parse_args(argv: list[str]):
    parser = OneLineArgumentParser(
        prog="plot.py", description="Plot learning curves of training runs."
    )
    parser.add_argument("runs", nargs="+", metavar="RUN_DIR", help="a run's --workdir")
    parser.add_argument("--out", help="PNG to write (default: see scripts/plot.py)")
    parser.add_argument("--labels", help="comma-separated legend labels, one per run")
    parser.add_argument("--title", help="figure title (default: env_id and algorithm)")
    parser.add_argument("--x", default="env_steps", choices=X_AXES, help="x axis")
    args = parser.parse_args(argv)
    for run in args.runs:  # before the output checks: a typo in RUN_DIR is the likelier cause
        metrics_path(run)
    args.labels = args.labels.split(",") if args.labels is not None else None
    if args.labels is not None and len(args.labels) != len(args.runs):
        raise ValueError(
            f"--labels: {len(args.labels)} label(s) for {len(args.runs)} run(s); "
            "give one comma-separated label per run, in order"
        )
    args.out = _output_path(args.runs, args.out)
    problem = _output_problem(args.out)
    if problem:
        raise ValueError(problem)
    return args


def main(argv: list[str] | None = None) -> int:
    """`scripts/plot.py`: bad input prints one `error:` line and exits 2 with nothing written."""
    try:
        args = _parse_args(sys.argv[1:] if argv is None else argv)
        plot_learning_curves(args.runs, args.out, args.labels, args.title, args.x)
    except (FileNotFoundError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_USAGE
    print(args.out)
    return 0
