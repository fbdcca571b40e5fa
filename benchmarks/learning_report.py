"""What `benchmarks/learning.py` makes of a sweep: per-seed reductions, the aggregate (success
rate, median and interquartile range of steps and seconds to the first crossing of the target,
how many seeds hold the target at their last evaluation, the interquartile mean with its 95%
bootstrap interval of the last evaluation and of the steps to the first crossing, metric
medians), the Markdown table and the PNG of every seed's curves. Pure functions of the per-seed
results."""

from __future__ import annotations

import os
from typing import Any

import numpy as np
from seed_statistics import METHOD, iqm_summary

# What `aggregate` added to the sweep's statistics on 2026-11-29 (issue 55): the keys
# `restate_learning.py` writes into a results file measured before them, and nothing else.
ADDED_KEYS = ("held", "held_seeds", "final_eval_iqm", "env_steps_to_target_iqm", "statistics")


def _at(values: list[float], points: dict[str, float]) -> dict[str, float] | None:
    """`{name: the values' percentile q}` for each `name: q` of `points`; None for no values."""
    if not values:
        return None
    found = np.percentile(np.asarray(values, np.float64), list(points.values()))
    return {name: float(v) for name, v in zip(points, found, strict=True)}


def quartiles(values: list[float]) -> dict[str, float] | None:
    """Median and interquartile range (25th, 75th percentiles), or None for no values."""
    return _at(values, {"median": 50, "q25": 25, "q75": 75})


def percentiles(values: list[float]) -> dict[str, float] | None:
    """10th, 50th and 90th percentiles of a logged metric over a run, or None if never logged."""
    return _at(values, {"p10": 10, "p50": 50, "p90": 90})


def aggregate(seeds: list[dict[str, Any]], target: float) -> dict[str, Any]:
    """The sweep's statistics from its per-seed results. A seed *crosses* the target at its first
    evaluation at or above it within the budget (`success`, `env_steps_to_target`); it *holds*
    the target when its last evaluation is at or above it (`held`)."""
    ok = [s for s in seeds if s["success"]]
    finals = [s["final_eval_return"] for s in seeds if s["final_eval_return"] is not None]
    names = {name for s in seeds for name in s.get("metrics", {})}
    medians = {  # per metric: the median over seeds of each seed's run median
        name: float(np.median([s["metrics"][name]["p50"] for s in seeds if s["metrics"][name]]))
        for name in sorted(names)
        if any(s["metrics"][name] for s in seeds)
    }
    return {
        "seeds": len(seeds),
        "successes": len(ok),
        "success_rate": len(ok) / len(seeds) if seeds else 0.0,
        "failed_seeds": [s["seed"] for s in seeds if not s["success"]],
        "crashed_seeds": [s["seed"] for s in seeds if s["error"]],
        "env_steps_to_target": quartiles([s["env_steps_to_target"] for s in ok]),
        "seconds_to_target": quartiles(  # unknown for a sweep judged again (`at_target`)
            [s["seconds_to_target"] for s in ok if s["seconds_to_target"] is not None]
        ),
        "command_s": quartiles([s["command_s"] for s in seeds]),
        "final_eval_return": quartiles(finals),
        "metric_medians": medians,
        **added_statistics(seeds, target),
        **_also_eval(seeds),
    }


def added_statistics(seeds: list[dict[str, Any]], target: float) -> dict[str, Any]:
    """The `ADDED_KEYS` of the aggregate: how many seeds hold the target at their last
    evaluation (and which), and the IQM with its 95% interval of (1) every seed's last
    evaluation and (2) the env steps to the first crossing over the seeds that crossed."""
    finals = [s["final_eval_return"] for s in seeds if s["final_eval_return"] is not None]
    crossed = [s["env_steps_to_target"] for s in seeds if s["success"]]
    return {
        "held": sum(f >= target for f in finals),
        "held_seeds": [s["seed"] for s in seeds if _holds(s, target)],
        "final_eval_iqm": iqm_summary(finals),
        "env_steps_to_target_iqm": iqm_summary(crossed),
        "statistics": METHOD,
    }


def _holds(seed: dict[str, Any], target: float) -> bool:
    return seed["final_eval_return"] is not None and seed["final_eval_return"] >= target


def at_target(seeds: list[dict[str, Any]], target: float, budget: int) -> list[dict[str, Any]]:
    """The per-seed results judged again at another `target`, from each seed's evaluation
    curve: the first evaluation at or above it within `budget`. Seconds to it are unknown (the
    curve keeps env steps only): None."""
    judged = []
    for s in seeds:
        reached = [steps for steps, value in s["eval_curve"] if value >= target and steps <= budget]
        judged.append(
            {
                **s,
                "success": bool(reached),
                "env_steps_to_target": reached[0] if reached else None,
                "seconds_to_target": None,
            }
        )
    return judged


def _also_eval(seeds: list[dict[str, Any]]) -> dict[str, Any]:
    """Quartiles and the worst of the after-run evaluation's return and loss rate, if any."""
    done = [s["also_eval"] for s in seeds if "return" in s.get("also_eval", {})]
    if not done:
        return {}
    losses = [e.get("loss_rate", 0.0) for e in done]
    summary = {
        "opponent": done[0]["opponent"],
        "seeds": len(done),
        "return": quartiles([e["return"] for e in done]),
        "loss_rate": quartiles(losses),
        "loss_rate_max": max(losses),
    }
    exact = [e["exact_loss_rate"] for e in done if "exact_loss_rate" in e]
    if len(exact) == len(done):  # tic-tac-toe against perfect play: no sampling error
        summary.update(exact_loss_rate=quartiles(exact), exact_loss_rate_max=max(exact))
    return {"also_eval": summary}


def number(value: float | None, small: bool = False) -> str:
    """A figure as the tables print it: thousands with separators, returns to one decimal,
    `small` ones (a sweep whose target is under 2: win rates, DeepSea's 0.99) to three; None
    as a dash."""
    if value is None:
        return "—"
    if small:
        return f"{value:.3f}"
    return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.1f}"


def is_small(target: float) -> bool:
    """Whether a sweep's returns print to three decimals (`number`'s `small`)."""
    return abs(target) < 2


def iqm_text(summary: dict[str, Any] | None, small: bool = False) -> str:
    """`472.3 (95% CI 455.1 to 488.0)`, or a dash for no values."""
    if not summary:
        return "—"
    low, high = (number(v, small) for v in summary["ci95"])
    return f"{number(summary['iqm'], small)} (95% CI {low} to {high})"


def table(result: dict[str, Any]) -> str:
    """A Markdown table of the sweep, one row per seed, and a closing summary line."""
    columns = (
        "seed",
        "first crossing, env steps",
        "seconds to it",
        "best eval",
        "last eval",
        "holds the target",
        "command s",
    )
    rows = ["| " + " | ".join(columns) + " |", "|" + " --- |" * len(columns)]
    fmt = lambda v, spec: "—" if v is None else format(v, spec)  # noqa: E731
    for s in result["per_seed"]:
        rows.append(
            f"| {s['seed']} | {fmt(s['env_steps_to_target'], ',')} | "
            f"{fmt(s['seconds_to_target'], '.1f')} | {fmt(s['best_eval_return'], '.1f')} | "
            f"{fmt(s['final_eval_return'], '.1f')} | "
            f"{'yes' if _holds(s, result['target']) else 'no'} | {s['command_s']:.1f} |"
        )
    return "\n".join(rows) + "\n\n" + headline(result)


def headline(result: dict[str, Any]) -> str:
    agg = result["aggregate"]
    line = (
        f"{agg['successes']}/{agg['seeds']} seeds reach {result['target']:g} within "
        f"{result['budget']:,} env steps (load {result['load']}); {agg['held']}/{agg['seeds']} "
        f"hold it at their last evaluation, whose IQM is "
        f"{iqm_text(agg['final_eval_iqm'], is_small(result['target']))}"
    )
    steps, secs = agg["env_steps_to_target"], agg["seconds_to_target"]
    if steps:
        line += (
            f"; env steps to the first crossing median {steps['median']:,.0f} "
            f"(IQR {steps['q25']:,.0f}-{steps['q75']:,.0f}), IQM "
            f"{iqm_text(agg['env_steps_to_target_iqm'])}"
        )
    if steps and secs:
        line += f"; seconds median {secs['median']:.1f} (IQR {secs['q25']:.1f}-{secs['q75']:.1f})"
    also = agg.get("also_eval")
    if also:
        line += (
            f"; against {also['opponent']} after the run: return median "
            f"{also['return']['median']:.2f}, loss rate median "
            f"{also['loss_rate']['median']:.3f}, "
            f"worst {also['loss_rate_max']:.3f}"
        )
        if "exact_loss_rate" in also:
            line += (
                f" (exact: median {also['exact_loss_rate']['median']:.3f}, worst "
                f"{also['exact_loss_rate_max']:.3f})"
            )
    return line


def plot(result: dict[str, Any], path: str) -> None:
    """Each seed's evaluations (left) and training return (right) against env steps."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5), sharey=True)
    cmap = plt.get_cmap("viridis")
    n = max(1, len(result["per_seed"]) - 1)
    for i, s in enumerate(result["per_seed"]):
        style = {"color": cmap(i / n), "lw": 1.0, "alpha": 0.8}
        if not s["success"]:
            style.update(color="crimson", lw=1.6, alpha=1.0)
        for ax, curve in zip(axes, (s["eval_curve"], s["train_curve"]), strict=True):
            if curve:
                x, y = zip(*curve, strict=True)
                ax.plot(x, y, label=f"seed {s['seed']}", **style)
    for ax, title in zip(axes, ("greedy evaluation return", "training return"), strict=True):
        ax.axhline(result["target"], color="k", ls="--", lw=0.8)
        ax.axvline(result["budget"], color="grey", ls=":", lw=0.8)
        ax.set_xlabel("env steps")
        ax.set_title(title)
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("return")
    fig.suptitle(f"{result['name']}: {headline(result)}\n(failed seeds in red)", fontsize=9)
    fig.tight_layout()
    tmp = path + ".tmp.png"
    fig.savefig(tmp, dpi=90)
    plt.close(fig)
    os.replace(tmp, path)
