"""Metric writers (JSONL + TensorBoard) and the progress display."""

from __future__ import annotations

import json
import math
import os
import sys
import time
from typing import Any

from rich.console import Console


class MetricLogger:
    """Writes namespaced scalar metrics (`losses/`, `charts/`, `stats/`, `eval/`, `timers/`).

    `metrics.jsonl` gets one JSON object per call with `env_steps` and `wall_time_s`; TensorBoard
    gets each scalar against env steps. Non-finite values are written as null in JSONL (valid JSON)
    and reported by `nonfinite()`.
    """

    def __init__(self, workdir: str, tensorboard: bool = True, wall_time_offset: float = 0.0):
        os.makedirs(workdir, exist_ok=True)
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
        for k, v in metrics.items():
            v = float(v)
            record[k] = v if math.isfinite(v) else None
            if self._tb is not None:
                self._tb.add_scalar(k, v, env_steps)
        self._jsonl.write(json.dumps(record) + "\n")

    def close(self) -> None:
        self._jsonl.close()
        if self._tb is not None:
            self._tb.close()


class Progress:
    """One status line per log interval: steps, SPS, return, policy lag (rich-formatted)."""

    def __init__(self, total_env_steps: int, quiet: bool = False):
        self._console = Console(file=sys.stdout, highlight=False)
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


class LogWindow:
    """Accumulates learner timers and policy lags between log lines; builds the log record."""

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

    def record(
        self, metrics: dict[str, float], counters: dict, actor: dict, queue_size: int
    ) -> dict[str, float]:
        """One log line from the update's metrics, the run counters and the drained actor stats."""
        now, env_steps = time.monotonic(), counters["env_steps"]
        interval = now - self._time
        record = {f"losses/{k}": v for k, v in metrics.items()}
        record["charts/sps"] = (env_steps - self._steps) / interval
        record["charts/actor_sps"] = actor["env_steps"] / interval
        record["charts/updates"] = counters["updates"]
        if actor["episode_returns"]:
            record["charts/episode_return"] = _mean(actor["episode_returns"])
            record["charts/episode_length"] = _mean(actor["episode_lengths"])
        record["stats/policy_lag"] = _mean(self.lags)
        record["stats/queue_size"] = queue_size
        record["stats/dropped_rollouts"] = counters["dropped_rollouts"]  # since the run began
        for k, v in {**actor["timers"], **self.timers}.items():
            record[f"timers/{k}"] = v / interval  # seconds per second (summed over threads)
        self._reset(env_steps)
        return record


def _mean(xs) -> float:
    return float(sum(xs) / len(xs)) if len(xs) else 0.0
