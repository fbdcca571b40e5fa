"""Pure pieces of multi-process runs: metrics summed across processes, process-count checks."""

import dataclasses
import io
import sys

import numpy as np
import pytest

from jaxrl_dist.acting.actor import ACTOR_TIMERS
from jaxrl_dist.config import ConfigError, TrainConfig
from jaxrl_dist.config.cli import command_line_message
from jaxrl_dist.config.engine_sections import SebulbaConfig
from jaxrl_dist.run.counters import Counters
from jaxrl_dist.run.logger import Progress
from jaxrl_dist.sebulba.log_window import WINDOW_FIELDS, LogWindow


def _actor(steps, returns, timers):
    return {
        "env_steps": steps,
        "episode_returns": returns,
        "episode_lengths": [int(r) for r in returns],
        "timers": timers,
    }


def test_log_record_weights_episodes_across_processes():
    """Process 0 saw 1 episode of return 10, process 1 three of 30: the mean is 25 (weighted by
    episodes, as allenact sums over workers), not 20 (a mean of the per-process means)."""
    timers = {
        "env_s": 1.0,
        "rollout_s": 0.5,
        "inference_s": 2.0,
        "unroll_s": 0.0,
        "queue_put_s": 0.0,
    }
    w0, w1 = LogWindow(0), LogWindow(0)
    w0.lags, w1.lags = [1.0, 3.0], [2.0]
    w0.add_timers(update_s=0.4)
    w1.add_timers(update_s=0.8)
    rows = np.stack(
        [
            w0.totals(_actor(100, [10.0], timers), queue_size=2),
            w1.totals(_actor(300, [30.0, 30.0, 30.0], timers), queue_size=4),
        ]
    )
    assert rows.shape == (2, len(WINDOW_FIELDS))
    w0._time -= 2.0  # a 2 s window
    counters = Counters(env_steps=640, updates=2, dropped_rollouts=5, actor_restarts=1)
    record = w0.record({"loss": 1.5}, counters, rows)
    assert record["charts/episodes"] == 4
    assert record["charts/episode_return"] == pytest.approx(25.0)
    assert record["charts/actor_sps"] == pytest.approx(400 / 2.0, rel=0.01)
    assert record["charts/sps"] == pytest.approx(640 / 2.0, rel=0.01)
    assert record["stats/policy_lag"] == pytest.approx(2.0)  # (1 + 3 + 2) / 3 updates
    assert record["stats/queue_size"] == 3  # a mean: one queue per process
    assert record["stats/processes"] == 2
    assert record["timers/inference_s"] == pytest.approx(4.0 / 2.0, rel=0.01)  # summed
    assert record["timers/update_s"] == pytest.approx(0.6 / 2.0, rel=0.01)  # averaged
    assert record["losses/loss"] == 1.5 and record["stats/dropped_rollouts"] == 5
    assert record["stats/actor_restarts"] == 1


def test_one_process_record_is_its_own_window():
    w = LogWindow(0)
    timers = dict.fromkeys(ACTOR_TIMERS, 0.0)
    counters = Counters(env_steps=0, updates=1, dropped_rollouts=0, actor_restarts=0)
    record = w.record({}, counters, w.totals(_actor(50, [], timers), queue_size=1))
    assert record["stats/processes"] == 1 and "charts/episode_return" not in record


def test_process_count_checks():
    assert TrainConfig(batch_size=32).process_problem(2) is None
    assert "does not split over 3 processes" in TrainConfig(batch_size=32).process_problem(3)
    lockstep = SebulbaConfig(async_envs=False, envs_per_actor=8, num_actor_threads=1)
    det = TrainConfig(deterministic=True, batch_size=16, sebulba=lockstep)
    assert det.process_problem(2) is None and det.collected_batch_problem(2) is None
    one_actor_short = dataclasses.replace(det, batch_size=8)
    problem = one_actor_short.collected_batch_problem(2)  # the on-policy flow's rule
    assert "one unroll of every actor" in problem
    assert "fix it with config.batch_size=16" in problem
    # On the command line (train.py) the fix names the override flag.
    assert "--config.batch_size=16" in command_line_message(ConfigError(problem))
    wide = SebulbaConfig(envs_per_actor=32)
    assert TrainConfig(batch_size=48, sebulba=wide).rollout_segments(2) == 8  # gcd(24, 16)


class _Terminal(io.StringIO):
    def isatty(self):
        return True


def _progress_output(monkeypatch, stream, columns):
    """What Progress writes to `stream` (as sys.stdout) at a width of `columns`: an eval line,
    a training line and a trainer-style final message over 200 characters."""
    for name in ("FORCE_COLOR", "TTY_COMPATIBLE", "NO_COLOR", "TERM"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("COLUMNS", str(columns))
    monkeypatch.setattr(sys, "stdout", stream)
    progress = Progress(total_env_steps=1_000_000)
    progress.line(500_000, {"eval/return": 175.9, "eval/return_std": 12.3})
    progress.line(600_000, {"charts/sps": 12_345.0, "charts/episode_return": 88.0})
    final = (
        "done (total_env_steps): 1,000,000 env steps, 12,345 updates in 123.4s, final eval "
        "return 175.9 " + "x" * 150
    )
    progress.message(final)
    return stream.getvalue(), final


def test_progress_lines_never_wrap_into_a_pipe_or_file(monkeypatch):
    """Piped (`train.py ... | cat`, a log file), rich assumes 80 columns; a line must still be
    one line, not cut in two mid-sentence ("final" / "eval return 175.9")."""
    out, final = _progress_output(monkeypatch, io.StringIO(), columns=40)
    lines = out.splitlines()
    assert len(lines) == 3, out
    assert "eval return    175.9" in lines[0] and "(+/- 12.3)" in lines[0]
    assert "SPS" in lines[1] and "lag" in lines[1]
    assert lines[2] == final and len(final) > 200


def test_progress_lines_wrap_at_a_terminals_width(monkeypatch):
    """On a terminal rich still fits lines to its width, as before."""
    out, _ = _progress_output(monkeypatch, _Terminal(), columns=60)
    assert len(out.splitlines()) > 3
