"""Process 0's evaluations: the monitored metric, the best so far, the best params saved, and
the evaluation hooks.

The metric is `hooks.reward_metric(returns [episodes, agents])` of the main mode, or the
evaluation statistic `config.eval_metric` names (a seated game's `return_worst_seat`, ...);
"best" means better than every earlier evaluation of the run (resumes included), never just the
previous one. Each policy a checkpoint holds (the run's, or each agent's of several; an Anakin
run's first seed) is ranked by its own metric (`policy_metrics`), and its best params are
written when an evaluation beats its best so far (`best.py`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from jaxrl_dist.config import TrainConfig
from jaxrl_dist.envs.seats import LEARNER
from jaxrl_dist.errors import RunError
from jaxrl_dist.evaluation.base import EvalResult, finishing_order
from jaxrl_dist.run.best import BestPolicies
from jaxrl_dist.run.counters import Counters, EvalHistory
from jaxrl_dist.run.hooks import EvalEpisode, EvalReport, Hooks
from jaxrl_dist.run.layout import Layout
from jaxrl_dist.run.logger import MetricLogger, Progress


class EvalPoint(NamedTuple):
    """Where the run was when the evaluated params were taken."""

    env_steps: int
    updates: int
    wall_time_s: float


class EvalMonitor:
    """Runs an evaluation of every configured mode, notes it in the counters (best, last) and
    the run's `EvalHistory`, logs it and calls the evaluation hooks."""

    def __init__(
        self,
        config: TrainConfig,
        evaluator: Any,
        *,
        hooks: Hooks,
        logger: MetricLogger,
        progress: Progress,
        history: EvalHistory,
        videos: Any = None,
        best: BestPolicies | None = None,
    ):
        """`evaluator`: `run(params, greedy, abort, at_update)` (`evaluation/base.py`).
        `videos`: records a GIF every `config.sebulba.video_every_evals` evaluations
        (`evaluation.video.EvalVideos`), or None. `best`: where the best params are written
        (None: best saves are off)."""
        self.history = history
        self._best = best
        self._stat = config.eval_metric
        # The run's agents, as the layout writes their evaluations (`NAME/<stat>` among several).
        self._layout = Layout([agent.name for agent in config.agents] or [LEARNER])
        self._seeds = config.anakin.num_seeds
        self._modes = ("greedy", "sampled") if config.eval_mode == "both" else (config.eval_mode,)
        self._target = config.stop_at_eval_return
        self._evaluator = evaluator
        self._hooks = hooks
        self._logger, self._progress = logger, progress
        self._videos, self._video_every = videos, config.sebulba.video_every_evals
        self._episodes, self._envs = config.eval_episodes, config.num_eval_envs
        self._measured = 0  # evaluations played (the GIF cadence)
        self._left_open = False

    def measure(
        self, params: Any, point: EvalPoint, abort: Callable[[], bool]
    ) -> dict[str, EvalResult] | None:
        """Plays every configured mode's episodes with `params` (and records a GIF when one is
        due); None if `abort()` turned true first. Touches nothing but the evaluator and the
        work dir's `videos/`, so it may run on another thread than `record`."""
        results = {}
        for mode in self._modes:
            result = self._evaluator.run(
                params, mode == "greedy", abort=abort, at_update=point.updates
            )
            if result is None:
                return None
            results[mode] = result
        self._measured += 1
        due = self._videos is not None and self._measured % self._video_every == 0
        if due and not abort():  # a GIF does not check `abort`: none once the run ends
            self._videos.record(params, point.updates, greedy=self._modes[0] == "greedy")
        return results

    def record(
        self, results: dict[str, EvalResult], point: EvalPoint, params: Any, counters: Counters
    ) -> tuple[EvalReport, str]:
        """Notes `results` (of params at `point`) in the counters and history, logs them at
        `point.env_steps`, calls `on_eval`, `save_best` (on a new best) and `stop`. Returns the
        report and why the run should stop ("" if it should not)."""
        report = self._report(results, point, counters)
        self._logger.write(report.env_steps, report.record)
        self._progress.line(report.env_steps, report.record)
        hooks = self._hooks
        if hooks.on_eval_episode is not None:
            for mode, result in results.items():
                for episode in self._episodes_of(result, mode, point.env_steps):
                    hooks.on_eval_episode(episode)
        if hooks.on_eval is not None:
            hooks.on_eval(report)
        if self._best is not None:
            entry = self.history.entries[-1]
            metrics = self.policy_metrics(results, report.metric)
            self._best.offer(metrics, params, entry, counters.updates)
        if report.best and hooks.save_best is not None:
            hooks.save_best(params, report.metric, report.env_steps)
        stop = ""
        if self._target is not None and report.record["eval/return"] >= self._target:
            stop = f"eval return {report.record['eval/return']:.1f} >= {self._target}"
        if hooks.stop is not None and hooks.stop(report.metric, report.env_steps):
            stop = stop or f"the stop hook (metric {report.metric:g})"
        return report, stop

    def _episodes_of(self, result: EvalResult, mode: str, env_steps: int) -> list[EvalEpisode]:
        """`result`'s episodes in the order they finished."""
        order = finishing_order(result.lengths, self._episodes, self._envs)
        steps = np.cumsum(result.lengths[order])
        return [
            EvalEpisode(
                mode=mode,
                index=int(i),
                returns=result.returns[i],
                length=int(result.lengths[i]),
                num_env_steps=env_steps,
                num_collected_episodes=n + 1,
                num_collected_steps=int(steps[n]),
            )
            for n, i in enumerate(order)
        ]

    def _report(
        self, results: dict[str, EvalResult], point: EvalPoint, counters: Counters
    ) -> EvalReport:
        record = {}
        for mode, result in results.items():
            record.update({f"eval/{mode}_{k}": v for k, v in result.stats().items()})
        main: EvalResult = results[self._modes[0]]
        metric = self._metric(main.returns, main.stats())
        record["eval/return"] = record[f"eval/{self._modes[0]}_return"]
        record["eval/return_std"] = record[f"eval/{self._modes[0]}_return_std"]
        record["eval/metric"] = metric
        entry = {
            "env_steps": point.env_steps,
            "updates": point.updates,
            "wall_time_s": round(point.wall_time_s, 3),
            "return": record["eval/return"],
            "return_std": record["eval/return_std"],
            "metric": metric,
            "mode": self._modes[0],
            "episodes": len(main.lengths),
            "length": float(main.lengths.mean()),
            **main.extra,
        }
        if counters.updates != point.updates:  # a background evaluation: where it landed
            entry["landed_at_updates"] = counters.updates
        best = counters.record_eval(entry)
        self.history.append(entry)
        return EvalReport(
            env_steps=point.env_steps,
            updates=point.updates,
            wall_time_s=entry["wall_time_s"],
            metric=metric,
            best=best,
            returns=main.returns,
            lengths=main.lengths,
            record=record,
        )

    def policy_metrics(self, results: dict[str, EvalResult], metric: float) -> dict[str, float]:
        """Each policy's metric in an evaluation whose metric is `metric`, by agent name
        ("learner": a one-agent run, whose metric it is): the main mode's `reward_metric` of
        that agent's column of returns (the first seed's episodes, for an Anakin run of
        several seeds), or its `config.eval_metric` statistic (`NAME/...`, `seed0_...`)."""
        alone = self._layout.alone(self._layout.names)
        if alone is not None and self._seeds == 1:
            return {alone: metric}
        main = results[self._modes[0]]
        stats = main.stats()
        first = slice(None) if self._seeds == 1 else slice(0, len(main.lengths) // self._seeds)
        seed = "" if self._seeds == 1 else "seed0_"
        if alone is not None:  # one agent: every column of its returns (its env's agents)
            return {alone: self._metric(main.returns[first], stats, seed)}
        return {
            name: self._metric(
                main.returns[first, i : i + 1], stats, self._layout.prefix(name) + seed
            )
            for i, name in enumerate(self._layout.names)
        }

    def _metric(self, returns: np.ndarray, stats: dict[str, float], prefix: str = "") -> float:
        """`reward_metric(returns)` (`config.eval_metric="return"`), else the statistic
        `prefix + config.eval_metric`; RunError (one line) if it is not finite or missing."""
        if self._stat == "return":
            metric, what = float(self._hooks.reward_metric(returns)), "reward_metric"
        elif prefix + self._stat in stats:
            metric, what = float(stats[prefix + self._stat]), f"the statistic {self._stat}"
        else:
            have = ", ".join(sorted({re.sub(r"^(\w+/)?(seed\d+_)?", "", k) for k in stats}))
            raise RunError(
                f"config.eval_metric={self._stat!r} is not a statistic of this run's "
                f"evaluations; choose one of: {have}"
            )
        if not math.isfinite(metric):  # it would never be beaten, nor be valid JSON
            raise RunError(f"{what} returned {metric}; it must return a finite number")
        return metric

    def warm_up(self, params: Any) -> None:
        """Compiles the evaluator's policies, where it can (its `warm_up`, if it has one)."""
        warm_up = getattr(self._evaluator, "warm_up", None)
        for mode in self._modes if warm_up is not None else ():
            warm_up(params, mode == "greedy")

    def leave_open(self) -> None:
        """The evaluation thread may still use the evaluator: `close` leaves it to the
        process's exit."""
        self._left_open = True

    def close(self) -> None:
        if not self._left_open:
            self._evaluator.close()
