"""Aggregate statistics over seeds (Agarwal et al. 2021, "Deep Reinforcement Learning at the Edge
of the Statistical Precipice"): the interquartile mean (IQM), its stratified bootstrap confidence
interval, and the probability of improvement of one set of runs over another.

The same method as `rliable` 1.2.0 (`metrics.aggregate_iqm`, `metrics.probability_of_improvement`,
`library.get_interval_estimates` with its defaults: percentile intervals, runs resampled within
each task, two score sets resampled independently), written here because rliable does not
install cleanly: it ships as a source archive only, and pulls arch (whose 7.x breaks on pandas
3), pandas, statsmodels and seaborn, none of which the GPU machine's offline Python 3.12 has.
rliable draws its resamples from NumPy's global `RandomState`; these functions draw the same
calls from `RandomState(seed)`, so with `np.random.seed(seed)` before rliable's call both give
the same interval to the last bit (`tests/test_learning_statistics.py` holds numbers rliable
printed).

Scores are `[runs, tasks]` (a sweep of one config on one task is `[seeds, 1]`); a 1-D array is
one task.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import scipy.stats

REPS = 50_000  # rliable's default for get_interval_estimates
SEED = 0
CONFIDENCE = 0.95
METHOD = (
    "interquartile mean; 95% stratified bootstrap interval (percentile, 50,000 resamples, "
    "seed 0); Agarwal et al. 2021, as rliable 1.2.0 computes it"
)


def as_runs_by_tasks(scores: np.ndarray | list) -> np.ndarray:
    """`[runs]` or `[runs, tasks]` -> `[runs, tasks]` floats."""
    array = np.asarray(scores, dtype=np.float64)
    if array.ndim == 1:
        array = array[:, None]
    if array.ndim != 2 or array.shape[0] == 0:
        raise ValueError(f"scores must be [runs] or [runs, tasks] with runs > 0, got {array.shape}")
    return array


def iqm(scores: np.ndarray | list) -> float:
    """The mean of the middle half of all scores (`scipy.stats.trim_mean`, 25% off each end of
    the pooled runs and tasks: rliable's `aggregate_iqm`)."""
    return float(scipy.stats.trim_mean(as_runs_by_tasks(scores), 0.25, axis=None))


def _iqm_of_resamples(resamples: np.ndarray) -> np.ndarray:
    """`[reps, runs, tasks]` -> `[reps]`: the IQM of each resample."""
    return scipy.stats.trim_mean(resamples.reshape(len(resamples), -1), 0.25, axis=1)


def _percentile_interval(estimates: np.ndarray, confidence: float) -> tuple[float, float]:
    tail = 100 * (1 - confidence) / 2
    low, high = np.percentile(estimates, [tail, 100 - tail])
    return float(low), float(high)


def _stratified_indices(rng: np.random.RandomState, shape: tuple[int, int], reps: int):
    """Run indices `[reps, runs, tasks]`: each task's runs resampled on their own (the strata),
    drawn as rliable draws them, one `choice(runs, [runs, tasks])` per resample."""
    return rng.choice(shape[0], (reps, *shape), replace=True)


def stratified_bootstrap_ci(
    scores: np.ndarray | list,
    statistic: Callable[[np.ndarray], np.ndarray] = _iqm_of_resamples,
    reps: int = REPS,
    seed: int = SEED,
    confidence: float = CONFIDENCE,
) -> tuple[float, float]:
    """The percentile interval of `statistic` (`[reps, runs, tasks]` -> `[reps]`; default the
    IQM) over `reps` stratified resamples of `scores` `[runs, tasks]`."""
    array = as_runs_by_tasks(scores)
    rng = np.random.RandomState(seed)
    rows = _stratified_indices(rng, array.shape, reps)
    resamples = array[rows, np.arange(array.shape[1])]
    return _percentile_interval(statistic(resamples), confidence)


def probability_of_improvement(x: np.ndarray | list, y: np.ndarray | list) -> float:
    """P(X > Y): the chance that a run of X scores above a run of Y on the same task, ties
    counting half (the Mann-Whitney U statistic over the run pairs), averaged over tasks.
    `x` `[runs_x, tasks]`, `y` `[runs_y, tasks]`."""
    return float(_improvement(as_runs_by_tasks(x)[None], as_runs_by_tasks(y)[None])[0])


def _improvement(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """`[reps, runs_x, tasks]` and `[reps, runs_y, tasks]` -> `[reps]`."""
    above = (x[:, :, None, :] > y[:, None, :, :]).sum(axis=(1, 2))
    tied = (x[:, :, None, :] == y[:, None, :, :]).sum(axis=(1, 2))
    pairs = x.shape[1] * y.shape[1]
    return ((above + 0.5 * tied) / pairs).mean(axis=-1)  # U / (n m), rliable's division


def improvement_ci(
    x: np.ndarray | list,
    y: np.ndarray | list,
    reps: int = REPS,
    seed: int = SEED,
    confidence: float = CONFIDENCE,
) -> tuple[float, float]:
    """The percentile interval of P(X > Y) over `reps` resamples, X's and Y's runs resampled
    independently within each task (rliable's `StratifiedIndependentBootstrap`, whose draws
    alternate: X's indices, then Y's, per resample)."""
    xs, ys = as_runs_by_tasks(x), as_runs_by_tasks(y)
    if xs.shape[1] != ys.shape[1]:
        raise ValueError(f"x has {xs.shape[1]} tasks and y {ys.shape[1]}: give the same tasks")
    rng = np.random.RandomState(seed)
    x_rows = np.empty((reps, *xs.shape), np.int64)
    y_rows = np.empty((reps, *ys.shape), np.int64)
    for i in range(reps):
        x_rows[i] = rng.choice(xs.shape[0], xs.shape, replace=True)
        y_rows[i] = rng.choice(ys.shape[0], ys.shape, replace=True)
    estimates = np.concatenate(
        [  # in chunks: the pairwise comparison is [chunk, runs_x, runs_y, tasks]
            _improvement(
                xs[x_rows[i : i + 2048], np.arange(xs.shape[1])],
                ys[y_rows[i : i + 2048], np.arange(ys.shape[1])],
            )
            for i in range(0, reps, 2048)
        ]
    )
    return _percentile_interval(estimates, confidence)


def median_ci(values: list[float], draws: int = 10_000, seed: int = 0) -> list[float]:
    """A 95% percentile bootstrap interval of the median of `values` (per-pair speed ratios),
    rounded to 4 places."""
    rng = np.random.default_rng(seed)
    samples = rng.choice(values, size=(draws, len(values)), replace=True)
    medians = np.median(samples, axis=1)
    return [round(float(np.percentile(medians, q)), 4) for q in (2.5, 97.5)]


def iqm_summary(values: list[float], reps: int = REPS, seed: int = SEED) -> dict | None:
    """`{"iqm", "ci95": [low, high], "runs"}` of one sweep's per-seed values; None for none."""
    if not values:
        return None
    low, high = stratified_bootstrap_ci(values, reps=reps, seed=seed)
    return {"iqm": iqm(values), "ci95": [low, high], "runs": len(values)}
