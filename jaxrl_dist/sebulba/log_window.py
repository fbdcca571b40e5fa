"""The Sebulba runtime's log window: learner timers, policy lags and the actors' statistics
between two log lines, summed over every process (`LogWindow`)."""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from jaxrl_dist.acting.actor import ACTOR_TIMERS

LEARNER_TIMERS = ("queue_get_s", "batch_s", "transfer_s", "update_s", "publish_s")
# One process's sums over a log window, in the order `LogWindow.totals` writes them.
_SUMS = ("actor_env_steps", "episodes", "return_sum", "length_sum", "lag_sum", "lag_count")
_PER_PROCESS = ("queue_size", *LEARNER_TIMERS)  # one learner loop per process: averaged
WINDOW_FIELDS = (*_SUMS, *ACTOR_TIMERS, *_PER_PROCESS)


class LogWindow:
    """Accumulates learner timers and policy lags between log lines; builds the log record.

    Each process reduces its window to a vector of sums (`totals`); process 0 turns the
    vectors of all processes (`[num_processes, len(WINDOW_FIELDS)]`) into one record (`record`):
    counts and actor timers are summed over every actor thread of every process, episode
    statistics are weighted by episodes (allenact's sum over workers, not a mean of means),
    learner timers and queue sizes are averaged over processes.
    """

    def __init__(self, env_steps: int):
        self._reset(env_steps)

    def _reset(self, env_steps: int) -> None:
        # queue_get_s: waiting for actor rollouts; batch_s: joining them on the host;
        # transfer_s: host -> learner devices; update_s: the update, metrics fetched (a sync);
        # publish_s: copying the new params to the actor devices.
        self.timers = dict.fromkeys(LEARNER_TIMERS, 0.0)
        self.lags: list[float] = []
        self._time, self._steps = time.monotonic(), env_steps

    def add_timers(self, **seconds: float) -> None:
        for k, v in seconds.items():
            self.timers[k] += v

    def totals(self, actor: dict, queue_size: int) -> np.ndarray:
        """This process's window (`actor`: drained `ActorStats`) as a `WINDOW_FIELDS` vector."""
        values = {
            "actor_env_steps": actor["env_steps"],
            "episodes": len(actor["episode_returns"]),
            "return_sum": sum(actor["episode_returns"]),
            "length_sum": sum(actor["episode_lengths"]),
            "lag_sum": sum(self.lags),
            "lag_count": len(self.lags),
            "queue_size": queue_size,
            **actor["timers"],
            **self.timers,
        }
        return np.array([values[k] for k in WINDOW_FIELDS], np.float64)

    def record(self, metrics: dict[str, float], counters: Any, rows: np.ndarray) -> dict:
        """One log line from the update's metrics, the run counters and every process's
        `totals` (`rows`); starts the next window."""
        now, env_steps = time.monotonic(), counters.env_steps
        interval = now - self._time
        rows = np.atleast_2d(rows)
        total = dict(zip(WINDOW_FIELDS, rows.sum(axis=0), strict=True))
        mean = dict(zip(WINDOW_FIELDS, rows.mean(axis=0), strict=True))
        record = {f"losses/{k}": v for k, v in metrics.items()}
        record["charts/sps"] = (env_steps - self._steps) / interval
        record["charts/actor_sps"] = total["actor_env_steps"] / interval
        record["charts/updates"] = counters.updates
        record["charts/episodes"] = total["episodes"]
        if total["episodes"]:
            record["charts/episode_return"] = total["return_sum"] / total["episodes"]
            record["charts/episode_length"] = total["length_sum"] / total["episodes"]
        record["stats/policy_lag"] = total["lag_sum"] / max(1.0, total["lag_count"])
        record["stats/queue_size"] = mean["queue_size"]
        record["stats/dropped_rollouts"] = counters.dropped_rollouts  # since the run began
        record["stats/actor_restarts"] = counters.actor_restarts  # since the run began
        record["stats/processes"] = len(rows)
        for k in ACTOR_TIMERS:  # seconds per second, summed over all actor threads
            record[f"timers/{k}"] = total[k] / interval
        for k in LEARNER_TIMERS:  # seconds per second of one learner loop
            record[f"timers/{k}"] = mean[k] / interval
        self._reset(env_steps)
        return record
