"""Learning curves from a run's `metrics.jsonl`: `read_curves` parses, `plot_learning_curves` draws.

The training return (`charts/episode_return`, one mean per log window) is drawn as a line and
the evaluation return (`eval/return`, with `eval/return_std` as error bars) as markers, one
colour per run. matplotlib is imported only when drawing: the trainer imports this module.
The command line of `scripts/plot.py` is `tools/plotting.py`; the run draws
`learning_curve.png` at its end (`draw_learning_curve`), and a many-seed Anakin run each seed's
curves (`draw_seed_curves`).
"""

from __future__ import annotations

import json
import math
import os
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np

METRICS_FILE = "metrics.jsonl"
TRAIN_RETURN, TRAIN_EPISODES = "charts/episode_return", "charts/episodes"
EVAL_RETURN, EVAL_STD = "eval/return", "eval/return_std"
X_AXES = ("env_steps", "wall_time_s")


@dataclass(frozen=True)
class Curves:
    """One run's curves; each series sorted by env steps, points without a finite return left out.

    `*_wall_time` is the run's wall-clock seconds at each point (NaN where not logged);
    `eval_std` is NaN where the standard deviation was not finite.
    """

    train_steps: np.ndarray
    train_wall_time: np.ndarray
    train_return: np.ndarray
    eval_steps: np.ndarray
    eval_wall_time: np.ndarray
    eval_return: np.ndarray
    eval_std: np.ndarray

    @property
    def empty(self) -> bool:
        return self.train_steps.size == 0 and self.eval_steps.size == 0


class _Series:
    """Points kept monotone in env steps: a record at or before the last step replaces the tail.

    A resumed run restarts from its last checkpoint and appends to the same file, so the points
    it logs again supersede those the earlier attempt logged from that step on.
    """

    def __init__(self) -> None:
        self.points: list[tuple[float, float, float, float]] = []

    def add(self, steps: float, wall: float, value: float | None, std: float = math.nan) -> None:
        while self.points and self.points[-1][0] >= steps:
            self.points.pop()
        if value is not None:  # a window without a (finite) return still truncates above
            self.points.append((steps, wall, value, std))

    def columns(self) -> np.ndarray:
        """`[4, n]`: steps, wall time, value, std."""
        return np.asarray(self.points, dtype=np.float64).reshape(-1, 4).T


def _finite(value: object) -> float | None:
    """The value as a float, or None for null, NaN, infinities and non-numbers."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def _records(path: str) -> Iterator[dict]:
    """The file's well-formed records; others are skipped rather than fatal.

    A line can be cut short by a write in progress (the run is still going) or by a crash (a
    resumed run then appends after the fragment), so one bad line must not hide the rest.
    """
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if isinstance(record, dict) and _finite(record.get("env_steps")) is not None:
                yield record


def kept_series(path: str, keys: Sequence[str]) -> dict[str, list[tuple[float, float]]]:
    """Each key's `(env_steps, value)` points in the file, kept as the run's history keeps them
    (`_Series`: the points a resumed run logs again supersede an earlier attempt's)."""
    series = {key: _Series() for key in keys}
    for record in _records(path):
        for key, points in series.items():
            if key in record:
                points.add(record["env_steps"], math.nan, _finite(record[key]))
    return {key: [(p[0], p[2]) for p in points.points] for key, points in series.items()}


def metrics_path(workdir: str) -> str:
    """`<workdir>/metrics.jsonl`; FileNotFoundError (one line) when there is none."""
    path = os.path.join(workdir, METRICS_FILE)
    if not os.path.isfile(path):
        raise FileNotFoundError(
            f"{path}: no such file; {workdir!r} is not a run's work dir "
            "(give the --workdir that scripts/train.py wrote to)"
        )
    return path


def read_curves(workdir: str) -> Curves:
    """Parses `<workdir>/metrics.jsonl` into training and evaluation series.

    Raises FileNotFoundError (a one-line message) when the directory holds no metrics file.
    """
    path = metrics_path(workdir)
    train, evaluation = _Series(), _Series()
    for record in _records(path):
        steps = float(record["env_steps"])
        wall = _finite(record.get("wall_time_s"))
        wall = math.nan if wall is None else wall
        if TRAIN_RETURN in record or TRAIN_EPISODES in record:
            train.add(steps, wall, _finite(record.get(TRAIN_RETURN)))
        if EVAL_RETURN in record:
            std = _finite(record.get(EVAL_STD))
            evaluation.add(
                steps, wall, _finite(record[EVAL_RETURN]), math.nan if std is None else std
            )
    t_steps, t_wall, t_return, _ = train.columns()
    e_steps, e_wall, e_return, e_std = evaluation.columns()
    return Curves(
        train_steps=t_steps,
        train_wall_time=t_wall,
        train_return=t_return,
        eval_steps=e_steps,
        eval_wall_time=e_wall,
        eval_return=e_return,
        eval_std=e_std,
    )


def default_labels(workdirs: Sequence[str]) -> list[str]:
    """Each run's directory name; the path as given where two runs share a name."""
    names = [os.path.basename(os.path.normpath(w)) for w in workdirs]
    return [
        n if names.count(n) == 1 else os.path.normpath(w)
        for n, w in zip(names, workdirs, strict=True)
    ]


def _run_config(workdir: str) -> dict:
    """The run's `config.json`, or {} when absent or unreadable (it is only for the title)."""
    try:
        with open(os.path.join(workdir, "config.json"), encoding="utf-8") as f:
            config = json.load(f)
    except (OSError, ValueError):
        return {}
    return config if isinstance(config, dict) else {}


def default_title(workdirs: Sequence[str]) -> str:
    """`env_id algorithm` when every run shares them (from config.json), else what they share."""
    configs = [_run_config(w) for w in workdirs]
    parts = []
    for key in ("env_id", "algorithm"):
        values = {str(c[key]) for c in configs if key in c}
        if len(values) == 1 and all(key in c for c in configs):
            parts.append(values.pop())
    return " ".join(parts) or ("learning curve" if len(workdirs) == 1 else "learning curves")


def _time_unit(max_seconds: float) -> tuple[float, str]:
    """A divisor and unit name that keep wall-clock ticks short (not 36000 s for 10 hours)."""
    if max_seconds >= 2 * 3600:
        return 3600.0, "h"
    if max_seconds >= 2 * 60:
        return 60.0, "min"
    return 1.0, "s"


def plot_learning_curves(
    workdirs: Sequence[str],
    out_path: str,
    labels: Sequence[str] | None = None,
    title: str | None = None,
    x: str = "env_steps",
) -> str:
    """Draws the runs' learning curves into one PNG at `out_path` and returns the path.

    `x` is "env_steps" or "wall_time_s". Every input is read and checked before anything is
    written; the PNG is written to a temporary file beside `out_path` and renamed into place,
    so a reader (a browser refreshing it during training) never sees half a file.
    Raises FileNotFoundError for a directory without metrics, ValueError for bad arguments.
    """
    if not workdirs:
        raise ValueError("no run directories given")
    if x not in X_AXES:
        raise ValueError(f"x={x!r}: choose one of {', '.join(X_AXES)}")
    if labels is not None and len(labels) != len(workdirs):
        raise ValueError(
            f"{len(labels)} label(s) for {len(workdirs)} run(s); give one label per run"
        )
    curves = [read_curves(w) for w in workdirs]
    labels = list(labels) if labels is not None else default_labels(workdirs)
    figure = _draw(curves, labels, title or default_title(workdirs), x)
    _save_atomically(figure, out_path)
    return out_path


def _draw(curves: list[Curves], labels: list[str], title: str, x: str):
    """A matplotlib Figure (no pyplot: no global state, safe from a background thread)."""
    import matplotlib
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(8, 5), dpi=120, layout="constrained")
    FigureCanvasAgg(figure)
    ax = figure.add_subplot()
    colours = [matplotlib.colormaps["tab10"].colors[i % 10] for i in range(len(curves))]
    scale, unit = 1.0, "s"
    if x == "wall_time_s":
        walls = np.concatenate([np.r_[c.train_wall_time, c.eval_wall_time] for c in curves])
        finite = walls[np.isfinite(walls)]
        scale, unit = _time_unit(float(finite.max()) if finite.size else 0.0)
    for run, colour in zip(curves, colours, strict=True):
        _draw_run(ax, run, colour, x, scale)
    _decorate(ax, curves, labels, colours, x, unit)
    ax.set_title(title)
    return figure


def _decorate(ax, curves: list[Curves], labels: list[str], colours: list, x: str, unit: str):
    """Axis labels, ticks and the legend (one entry per run, plus the line and marker styles)."""
    from matplotlib.lines import Line2D
    from matplotlib.ticker import EngFormatter

    handles = [
        Line2D(
            [],
            [],
            color=colour,
            linewidth=2,
            label=f"{label} (no data yet)" if run.empty else label,
        )
        for run, label, colour in zip(curves, labels, colours, strict=True)
    ]
    # Styles explained once, in grey, rather than two entries per run.
    if any(c.train_steps.size for c in curves):
        handles.append(Line2D([], [], color="grey", label="training episodes (window mean)"))
    if any(c.eval_steps.size for c in curves):
        handles.append(
            Line2D([], [], color="grey", marker="o", linestyle="none", label="evaluation ± std")
        )
    ax.legend(handles=handles, loc="best", fontsize="small")
    ax.set_xlabel("environment steps" if x == "env_steps" else f"wall-clock time ({unit})")
    ax.set_ylabel("episode return")
    ax.grid(True, alpha=0.3)
    if all(c.empty for c in curves):
        ax.text(
            0.5,
            0.5,
            "no data yet",
            transform=ax.transAxes,
            ha="center",
            va="center",
            fontsize=14,
            color="grey",
        )
        ax.set_xticks([])  # the default 0..1 ticks would read as data
        ax.set_yticks([])
    elif x == "env_steps":
        ax.xaxis.set_major_formatter(EngFormatter(sep=""))  # 1.5M, not 1500000 or 1e6


def _draw_run(ax, run: Curves, colour, x: str, scale: float) -> None:
    """The training return as a line, the evaluations as markers with std error bars."""
    by_steps = x == "env_steps"
    train_x = run.train_steps if by_steps else run.train_wall_time / scale
    eval_x = run.eval_steps if by_steps else run.eval_wall_time / scale
    if run.train_steps.size:
        ax.plot(train_x, run.train_return, color=colour, linewidth=1.3, alpha=0.85)
    if run.eval_steps.size:
        ax.errorbar(
            eval_x,
            run.eval_return,
            yerr=run.eval_std,
            color=colour,
            fmt="o",
            markersize=4,
            elinewidth=1,
            capsize=2,
            alpha=0.9,
        )


def _save_atomically(figure, out_path: str) -> None:
    # A unique name beside the target (same file system: os.replace is atomic) that open()
    # creates with the usual umask permissions, unlike mkstemp's 0600.
    directory, name = os.path.split(os.path.abspath(out_path))
    tmp = os.path.join(directory, f".{name}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        with open(tmp, "wb") as f:
            figure.savefig(f, format="png")
        os.replace(tmp, out_path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise


def draw_learning_curve(workdir: str, warn: Callable[[str], None]) -> None:
    """`learning_curve.png` in a run's work dir, at the end of the run; a failure to draw is
    passed to `warn`, never raised (a plot must not fail a finished run)."""
    try:
        plot_learning_curves([workdir], os.path.join(workdir, "learning_curve.png"))
    except Exception as e:  # noqa: BLE001
        warn(f"warning: learning_curve.png not drawn ({type(e).__name__}: {e})")


def draw_seed_curves(workdir: str, num_seeds: int, warn: Callable[[str], None]) -> None:
    """Each seed's training return (`charts/seed<i>_episode_return` in `metrics.jsonl`) and
    evaluation return (`seed<i>_return` in `evals.jsonl`) against env steps, side by side, in
    `learning_curves_seeds.png`; a failure to draw is passed to `warn`, never raised."""
    seeds = range(num_seeds)
    draw_keyed_curves(
        workdir,
        [f"seed {i}" for i in seeds],
        ([f"charts/seed{i}_episode_return" for i in seeds], [f"seed{i}_return" for i in seeds]),
        ("learning_curves_seeds.png", "env steps (per seed)"),
        warn,
    )


def draw_agent_curves(workdir: str, names: Sequence[str], warn: Callable[[str], None]) -> None:
    """Each agent's training return (`NAME/charts/episode_return`) and evaluation return
    (`NAME/return`) of a run of several (`config.agents`), in `learning_curves_agents.png`."""
    draw_keyed_curves(
        workdir,
        list(names),
        ([f"{n}/{TRAIN_RETURN}" for n in names], [f"{n}/return" for n in names]),
        ("learning_curves_agents.png", "env steps (all agents)"),
        warn,
    )


def draw_keyed_curves(
    workdir: str,
    labels: list[str],
    keys: tuple[list[str], list[str]],
    out: tuple[str, str],
    warn: Callable[[str], None],
) -> None:
    """One line per label: its training key (`metrics.jsonl`) and evaluation key
    (`evals.jsonl`) against env steps, side by side; `out`: (file name, x label). A failure to
    draw is passed to `warn`, never raised."""
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure

        train = _series(os.path.join(workdir, "metrics.jsonl"), keys[0])
        evals = _series(os.path.join(workdir, "evals.jsonl"), keys[1])
        figure = Figure(figsize=(11, 4.5), dpi=110, layout="constrained")
        FigureCanvasAgg(figure)
        for col, (series, name) in enumerate(((train, "training"), (evals, "evaluation"))):
            ax = figure.add_subplot(1, 2, col + 1)
            for label, points in zip(labels, series, strict=True):
                if points:
                    ax.plot(*zip(*points, strict=True), lw=1, label=label)
            ax.set_xlabel(out[1])
            ax.set_ylabel(f"{name} return")
            ax.grid(alpha=0.3)
        figure.axes[0].legend(fontsize="small", ncol=2)
        path = os.path.join(workdir, out[0])
        figure.savefig(path + ".tmp.png")
        os.replace(path + ".tmp.png", path)
    except Exception as e:  # noqa: BLE001  a plot must not fail a finished run
        warn(f"warning: {out[0]} not drawn ({type(e).__name__}: {e})")


def _series(path: str, keys: list[str]) -> list[list[tuple[float, float]]]:
    out: list[list[tuple[float, float]]] = [[] for _ in keys]
    if not os.path.exists(path):
        return out
    with open(path) as f:
        for line in f:
            record = json.loads(line)
            steps = record.get("env_steps", record.get("step"))
            for i, key in enumerate(keys):
                value = record.get(key)
                if value is not None and steps is not None:
                    out[i].append((float(steps), float(value)))
    return out
