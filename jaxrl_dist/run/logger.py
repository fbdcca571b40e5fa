"""Metric writers (JSONL + TensorBoard) and the progress display."""

from __future__ import annotations

import json
import math
import os
import sys
import threading
import time
from typing import Any

import numpy as np
from rich.console import Console

from jaxrl_dist.acting.actor import ACTOR_TIMERS


class MetricLogger:
    """Writes namespaced scalar metrics (`losses/`, `charts/`, `stats/`, `eval/`, `timers/`).

    `metrics.jsonl` gets one JSON object per call with `env_steps` and `wall_time_s`; TensorBoard
    gets each scalar against env steps. Non-finite values are written as null in JSONL (valid JSON)
    and reported by `nonfinite()`.
    """

    def __init__(
        self,
        workdir: str,
        tensorboard: bool = True,
        wall_time_offset: float = 0.0,
        sink: Any = None,
    ):
        """`sink`: another writer of every record (`log(record)`, `finish(workdir, summary,
        failed)`), e.g. `run.wandb_sink.WandbSink`."""
        os.makedirs(workdir, exist_ok=True)
        self._workdir, self._sink = workdir, sink
        self._lock = threading.Lock()  # background evaluations write too
        self._jsonl = open(os.path.join(workdir, "metrics.jsonl"), "a", buffering=1)  # noqa: SIM115
        self._tb = None
        if tensorboard:
            from tensorboardX import SummaryWriter

            self._tb = SummaryWriter(os.path.join(workdir, "tb"), flush_secs=10)
        self._start = time.monotonic() - wall_time_offset  # resumed runs continue the clock

    @staticmethod
    def nonfinite(metrics: dict[str, float]) -> list[str]:
        return [k for k, v in metrics.items() if isinstance(v, float) and not math.isfinite(v)]

    def write(self, env_steps: int, metrics: dict[str, Any]) -> None:
        record = {"env_steps": env_steps, "wall_time_s": round(time.monotonic() - self._start, 3)}
        with self._lock:
            for k, v in metrics.items():
                v = float(v)
                record[k] = v if math.isfinite(v) else None
                if self._tb is not None:
                    self._tb.add_scalar(k, v, env_steps)
            self._jsonl.write(json.dumps(record) + "\n")
            if self._sink is not None:
                self._sink.log(record)

    def close(self, failed: bool = False) -> None:
        """Closes the files. The sink stays open for `finish_sink` (after the curve is drawn),
        unless the run `failed`: then it is closed as failed too."""
        self._jsonl.close()
        if self._tb is not None:
            self._tb.close()
        if failed:
            self.finish_sink(failed=True)

    def finish_sink(self, summary: dict | None = None, failed: bool = False) -> None:
        """Hands the sink the summary and the learning curve and closes it (once)."""
        sink, self._sink = self._sink, None
        if sink is not None:
            sink.finish(self._workdir, summary, failed)


def _isatty(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # no isatty, or a closed stream
        return False


def progress_console(stream: Any) -> Console:
    """A rich console for run progress on `stream`: on a terminal, lines fit its width as rich
    wraps them; into a pipe or a file (where rich assumes 80 columns) a line is never wrapped,
    so each status line stays one line of the log."""
    return Console(file=stream, highlight=False, soft_wrap=not _isatty(stream))


class Progress:
    """One status line per log interval: steps, SPS, return, policy lag (rich-formatted)."""

    def __init__(self, total_env_steps: int, quiet: bool = False):
        self._console = progress_console(sys.stdout)
        self._total = total_env_steps
        self._quiet = quiet

    def line(self, env_steps: int, metrics: dict[str, float]) -> None:
        if self._quiet:
            return
        pct = 100.0 * env_steps / max(1, self._total)
        ev = metrics.get("eval/return")
        if ev is not None:
            std = metrics.get("eval/return_std", 0.0)
            self._console.print(
                f"[bold]{env_steps:>10,d}[/] steps ({pct:4.0f}%) | "
                f"[green]eval return {ev:8.1f}[/] (+/- {std:.1f})"
            )
            return
        ret = metrics.get("charts/episode_return")
        pct = 100.0 * env_steps / max(1, self._total)
        parts = [
            f"[bold]{env_steps:>10,d}[/] steps ({pct:4.0f}%)",
            f"SPS {metrics.get('charts/sps', 0.0):>8,.0f}",
            f"return {ret:8.1f}" if ret is not None else "return      n/a",
            f"lag {metrics.get('stats/policy_lag', 0.0):5.2f}",
        ]
        self._console.print(" | ".join(parts))

    def message(self, text: str) -> None:
        if not self._quiet:
            self._console.print(text)


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
