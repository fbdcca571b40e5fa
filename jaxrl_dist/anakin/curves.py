"""`learning_curves_seeds.png`: every seed's curves of a many-seed Anakin run, one line each."""

from __future__ import annotations

import json
import os
from collections.abc import Callable


def draw_seed_curves(workdir: str, num_seeds: int, warn: Callable[[str], None]) -> None:
    """Each seed's training return (`charts/seed<i>_episode_return` in `metrics.jsonl`) and
    evaluation return (`seed<i>_return` in `evals.jsonl`) against env steps, side by side; a
    failure to draw is passed to `warn`, never raised."""
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure

        train = _series(os.path.join(workdir, "metrics.jsonl"), "charts/seed{}_episode_return",
                        num_seeds)  # fmt: skip
        evals = _series(os.path.join(workdir, "evals.jsonl"), "seed{}_return", num_seeds)
        figure = Figure(figsize=(11, 4.5), dpi=110, layout="constrained")
        FigureCanvasAgg(figure)
        for col, (series, name) in enumerate(((train, "training"), (evals, "evaluation"))):
            ax = figure.add_subplot(1, 2, col + 1)
            for seed, points in enumerate(series):
                if points:
                    ax.plot(*zip(*points, strict=True), lw=1, label=f"seed {seed}")
            ax.set_xlabel("env steps (per seed)")
            ax.set_ylabel(f"{name} return")
            ax.grid(alpha=0.3)
        figure.axes[0].legend(fontsize="small", ncol=2)
        path = os.path.join(workdir, "learning_curves_seeds.png")
        figure.savefig(path + ".tmp.png")
        os.replace(path + ".tmp.png", path)
    except Exception as e:  # noqa: BLE001  a plot must not fail a finished run
        warn(f"warning: learning_curves_seeds.png not drawn ({type(e).__name__}: {e})")


def _series(path: str, key: str, num_seeds: int) -> list[list[tuple[float, float]]]:
    out: list[list[tuple[float, float]]] = [[] for _ in range(num_seeds)]
    if not os.path.exists(path):
        return out
    with open(path) as f:
        for line in f:
            record = json.loads(line)
            steps = record.get("env_steps", record.get("step"))
            for i in range(num_seeds):
                value = record.get(key.format(i))
                if value is not None and steps is not None:
                    out[i].append((float(steps), float(value)))
    return out
