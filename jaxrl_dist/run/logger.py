"""Metric writers (JSONL + TensorBoard) and the progress display."""

from __future__ import annotations

import json
import math
import os
import sys
import threading
import time
from typing import Any

from rich.console import Console

RETURN = "charts/episode_return"


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
        """One progress line: env steps, SPS, the training return and policy lag (or the
        evaluation's return)."""
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
        parts = [
            f"[bold]{env_steps:>10,d}[/] steps ({pct:4.0f}%)",
            f"SPS {metrics.get('charts/sps', 0.0):>8,.0f}",
        ]
        agents = [k[: -len(RETURN)] for k in metrics if k.endswith("/" + RETURN)]
        for prefix in agents or [""]:  # several agents (`config.agents`): each one's
            ret = metrics.get(prefix + RETURN)
            ret = f"{ret:8.1f}" if ret is not None else "     n/a"
            lag = metrics.get(f"{prefix}stats/policy_lag", 0.0)
            parts += [f"{prefix}return {ret}", f"{prefix}lag {lag:5.2f}"]
        self._console.print(" | ".join(parts))

    def message(self, text: str) -> None:
        if not self._quiet:
            self._console.print(text)
