"""Hooks: plain Python callables a research script hands the trainer.

Every hook is optional and is called on the main thread of process 0 (the process that
evaluates and logs), between updates: while a hook runs, the actors keep acting and no update
happens. An exception in a hook ends the run with its traceback; the last checkpoint is kept.

    on_iteration(num_episodes, num_env_steps)   after every update: training episodes finished
                                                and env steps taken so far (all processes)
    on_eval_episode(episode: EvalEpisode)       for every episode of an evaluation, in the order
                                                they finished, right before its `on_eval`
    on_eval(report: EvalReport)                 after every evaluation (one beside training: at the
                                                first update after it finished; `report` says
                                                where its params were taken)
    save_best(params, metric, num_env_steps)    when an evaluation's metric beats the best so far
                                                (the first evaluation always does)
    save_last(params, metric, num_env_steps)    once, at the end (metric: the last evaluation's,
                                                or None)
    stop(metric, num_env_steps) -> bool         after every evaluation; True ends the run
    reward_metric(returns) -> float             the monitored metric from `returns`
                                                `[episodes, agents]`; default: the mean. Also
                                                called on each agent's column (several agents)
                                                and on the first seed's episodes (Anakin seeds):
                                                each saved policy's best is ranked by its own

`params` are the learner's params (device arrays; `jax.device_get` them to keep a copy).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np


def mean_return(returns: np.ndarray) -> float:
    """The default monitored metric: the mean return over episodes and agents."""
    return float(np.mean(returns))


@dataclasses.dataclass(frozen=True)
class EvalReport:
    """One evaluation, as `on_eval` receives it.

    Attributes:
      env_steps, updates, wall_time_s: where the run was when it evaluated.
      metric: `reward_metric(returns)` of the main mode (`config.eval_mode`, greedy for "both").
      best: whether `metric` beat every earlier evaluation of the run.
      returns: `[episodes, agents]` returns of the main mode.
      lengths: `[episodes]` episode lengths of the main mode.
      record: everything logged for this evaluation (`eval/...` scalars, every mode).
    """

    env_steps: int
    updates: int
    wall_time_s: float
    metric: float
    best: bool
    returns: np.ndarray
    lengths: np.ndarray
    record: dict[str, float]


class EvalEpisode(NamedTuple):
    """One evaluation episode, as `on_eval_episode` receives it (rbgame's `test_fn` gets the
    last two counts).

    Attributes:
      mode: "greedy" or "sampled".
      index: the episode's index in the evaluation (the rows of `EvalReport.returns`).
      returns: `[agents]` its returns.
      length: its length (agent steps; a game's moves).
      num_env_steps: the run's env steps when the evaluated params were taken.
      num_collected_episodes: the evaluation's episodes finished so far, this one included.
      num_collected_steps: their lengths summed.
    """

    mode: str
    index: int
    returns: np.ndarray
    length: int
    num_env_steps: int
    num_collected_episodes: int
    num_collected_steps: int


@dataclasses.dataclass
class Hooks:
    """The trainer's hooks (see the module docstring for when each is called)."""

    on_iteration: Callable[[int, int], None] | None = None
    on_eval_episode: Callable[[EvalEpisode], None] | None = None
    on_eval: Callable[[EvalReport], None] | None = None
    save_best: Callable[[Any, float, int], None] | None = None
    save_last: Callable[[Any, float | None, int], None] | None = None
    stop: Callable[[float, int], bool] | None = None
    reward_metric: Callable[[np.ndarray], float] = mean_return
