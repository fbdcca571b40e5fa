"""Learning sweeps beside published figures: one table and one plot per task.

    python benchmarks/published.py --spec benchmarks/published_mujoco.json \
        --out benchmarks/results/cpu/published/mujoco_v4

The spec names, per task, the sweeps (`learning.py` results under
`benchmarks/results/cpu/learning/`, without `.json`) and the published figure each is set
beside: its mean and standard deviation over seeds, what it measures, and where it was
published. CleanRL's MuJoCo tables are the mean over 3 seeds of each seed's last 100 training
episodes at the end of the run (openrlbenchmark's `rlops.py`), so each sweep is scored twice:

- `train`: each seed's training return (`charts/episode_return`, one mean per log window)
  averaged over the windows of the last `train_window` env steps (100,000: 100 episodes of
  a 1,000-step task, fewer for the tasks that end early), the figure CleanRL publishes;
- `eval`: each seed's last greedy evaluation (`eval_episodes` episodes of the final params).

Each as the mean and standard deviation over seeds (as published) and as the IQM with its 95%
bootstrap interval (`seed_statistics.py`). Against the published spread, the seeds' mean
`train` is "below" the published mean less its standard deviation, "above" the mean plus it,
or "within".
Writes `OUT.json` (the rows, with each sweep's commit and the spec) and `OUT_<task>.png` (each
sweep's seeds' evaluation curves, its median bold, dashed under load, and each published
figure once, at its step count, as an error bar). A missing (unless `--partial`) or crashed
sweep: one line, exit 2.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import provenance  # noqa: E402
from seed_statistics import METHOD, iqm_summary  # noqa: E402

from jaxrl_dist.errors import OneLineArgumentParser, UsageError  # noqa: E402

RESULTS = os.path.join(HERE, "results", "cpu", "learning")


def load_sweep(name: str, root: str = RESULTS) -> dict[str, Any]:
    path = os.path.join(root, name + ".json")
    if not os.path.exists(path):
        raise UsageError(f"{path}: no such sweep; run benchmarks/learning.py for it first")
    with open(path) as f:
        result = json.load(f)
    if result["aggregate"]["crashed_seeds"]:
        raise UsageError(f"{path}: seeds {result['aggregate']['crashed_seeds']} crashed")
    return result


def final_train_return(seed: dict[str, Any], window: int) -> float | None:
    """The mean of the seed's training-return windows logged in its last `window` env steps."""
    curve = seed["train_curve"]
    if not curve:
        return None
    end = curve[-1][0]
    values = [value for steps, value in curve if steps > end - window]
    return float(np.mean(values))


def _scores(values: list[float]) -> dict[str, Any]:
    array = np.asarray(values, np.float64)
    return {
        "per_seed": [round(v, 2) for v in values],
        "mean": float(array.mean()),
        "std": float(array.std()),  # population std over seeds, as openrlbenchmark's tables
        "iqm": iqm_summary(list(values)),
    }


def row(name: str, published: dict[str, Any], window: int, root: str = RESULTS) -> dict[str, Any]:
    """One sweep beside its published figure."""
    result = load_sweep(name, root)
    seeds = result["per_seed"]
    train = [final_train_return(s, window) for s in seeds]
    if any(t is None for t in train):
        raise UsageError(f"{name}: a seed logged no training return")
    evals = [s["final_eval_return"] for s in seeds]
    if any(e is None for e in evals):
        raise UsageError(f"{name}: a seed has no evaluation (give its config eval_every_updates)")
    train_scores = _scores(train)
    return {
        "sweep": name,
        "git_commit": result["git_commit"],
        "load": result["load"],
        "env_steps": [s["env_steps"] for s in seeds],
        "seconds_per_seed": [s["command_s"] for s in seeds],
        "train": train_scores,
        "eval": _scores(evals),
        "published": published,
        "against_published": _against(train_scores["mean"], published),
    }


def _against(mean: float, published: dict[str, Any]) -> str:
    """ "below", "within" or "above" the published mean plus or minus its std."""
    if mean < published["mean"] - published["std"]:
        return "below"
    return "above" if mean > published["mean"] + published["std"] else "within"


def _plot(task: str, rows: list[dict[str, Any]], path: str, root: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    figures: list[tuple] = []  # one colour per published figure: its sweeps quiet and loaded
    for r in rows:
        pub = r["published"]
        key = (pub.get("source"), pub["mean"], pub["std"])
        drawn = key in figures
        if not drawn:
            figures.append(key)
        i = figures.index(key)
        colour, style = f"C{i}", "--" if r["load"] else "-"
        curves = [s["eval_curve"] for s in load_sweep(r["sweep"], root)["per_seed"]]
        curves = [c for c in curves if c]  # `row` refused seeds without any evaluation
        for curve in curves:
            xs, ys = zip(*curve, strict=True)
            ax.plot(xs, ys, color=colour, alpha=0.25, linewidth=0.8, linestyle=style)
        grid = np.asarray([c[0] for c in curves[0]], np.float64)
        median = np.median([np.interp(grid, *zip(*c, strict=True)) for c in curves], axis=0)
        label = f"{r['label']} (median)" if len(curves) > 1 else r["label"]
        ax.plot(grid, median, color=colour, linewidth=2, linestyle=style, label=label)
        if not drawn:
            ax.errorbar(
                pub["env_steps"] * (1 + 0.01 * i),
                pub["mean"],
                yerr=pub["std"],
                color=colour,
                marker="s",
                capsize=4,
                label=f"{pub['source_short']} {r['label']}",
            )
    ax.set_xlabel("env steps")
    ax.set_ylabel("return (greedy evaluation; published: training)")
    ax.set_title(task)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path + ".tmp.png", dpi=110)
    plt.close(fig)
    os.replace(path + ".tmp.png", path)


def report(
    spec: dict[str, Any],
    out: str,
    allow_dirty: bool = False,
    partial: bool = False,
    root: str = RESULTS,
) -> dict[str, Any]:
    """The rows of every task (with `partial`, a sweep not run yet is a row without scores)
    and their plots."""
    origin = provenance.capture(allow_dirty, devices=False)
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    window = int(spec.get("train_window", 100_000))
    tasks = {}
    for task, entries in spec["tasks"].items():
        rows = []
        for entry in entries:
            label, published = entry["label"], entry["published"]
            if partial and not os.path.exists(os.path.join(root, entry["sweep"] + ".json")):
                rows.append({"label": label, "sweep": entry["sweep"], "published": published})
                continue
            rows.append({"label": label, **row(entry["sweep"], published, window, root)})
        tasks[task] = rows
    result = {
        "spec": spec,
        "statistics": METHOD,
        "tasks": tasks,
        "provenance": origin,
    }
    for task, rows in tasks.items():
        if any("train" in r for r in rows):
            _plot(task, [r for r in rows if "train" in r], f"{out}_{task}.png", root)
    with open(out + ".json.tmp", "w") as f:
        json.dump(result, f, indent=1)
    os.replace(out + ".json.tmp", out + ".json")
    return result


def table(result: dict[str, Any]) -> str:
    lines = [
        "| task | algorithm | seeds | training return, last 100k steps: mean +/- std | "
        "IQM (95% CI) | greedy evaluation at the end: IQM (95% CI) | published (mean +/- std) "
        "| against the published spread |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for task, rows in result["tasks"].items():
        for r in rows:
            p = r["published"]
            if "train" not in r:
                lines.append(
                    f"| {task} | {r['label']} | - | not run yet | | | {p['mean']:,.2f} +/- "
                    f"{p['std']:,.2f} | |"
                )
                continue
            t, e = r["train"], r["eval"]
            lines.append(
                f"| {task} | {r['label']} | {len(t['per_seed'])} | {t['mean']:,.0f} +/- "
                f"{t['std']:,.0f} | {_iqm(t['iqm'])} | {_iqm(e['iqm'])} | {p['mean']:,.2f} +/- "
                f"{p['std']:,.2f} | {r['against_published']} |"
            )
    return "\n".join(lines)


def _iqm(summary: dict[str, Any]) -> str:
    low, high = summary["ci95"]
    return f"{summary['iqm']:,.0f} ({low:,.0f} to {high:,.0f})"


def main(argv: list[str] | None = None) -> int:
    parser = OneLineArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--spec", required=True, help="the tasks, sweeps and published figures")
    parser.add_argument("--out", required=True, help="OUT.json and OUT_<task>.png")
    parser.add_argument(
        "--partial", action="store_true", help="list a sweep not run yet instead of refusing"
    )
    provenance.add_argument(parser)
    try:
        args = parser.parse_args(argv)
        with open(args.spec) as f:
            spec = json.load(f)
        result = report(spec, args.out, args.allow_dirty, args.partial)
    except (UsageError, OSError) as e:
        print(f"published.py: {e}", file=sys.stderr)
        return 2
    print(table(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
