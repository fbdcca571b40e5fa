"""The run summary (`summary.json`): what a run reached, from its counters."""

from __future__ import annotations

import dataclasses
import os
from typing import Any

from jaxrl_dist.run.checkpoint import Checkpointer
from jaxrl_dist.run.counters import Counters


def run_summary(
    counters: Counters,
    evals: list[dict[str, Any]],
    target: float | None,
    stop_reason: str,
    ckpt: Checkpointer,
) -> dict[str, Any]:
    """Env steps, updates, wall time, SPS, final and best evaluation (`evals`: the run's
    history), when `target` (the evaluation return to reach) was first reached, why the run
    stopped, the checkpoints."""
    reached = [e for e in evals if target is not None and e["return"] >= target]
    wall = counters.wall_time_s
    return {
        "env_steps": counters.env_steps,
        "updates": counters.updates,
        "wall_time_s": round(wall, 3),
        "sps": round(counters.env_steps / wall, 1) if wall else 0.0,
        "episodes": counters.episodes,
        "final_eval_return": evals[-1]["return"] if evals else None,
        "best_eval_return": max(e["return"] for e in evals) if evals else None,
        "final_eval_metric": evals[-1]["metric"] if evals else None,
        "best_eval": counters.best_eval,
        "env_steps_to_target": reached[0]["env_steps"] if reached else None,
        "wall_time_s_to_target": reached[0]["wall_time_s"] if reached else None,
        "dropped_rollouts": counters.dropped_rollouts,
        "actor_restarts": counters.actor_restarts,
        "stop_reason": stop_reason or "finished",
        "checkpoint_dir": ckpt.directory,
        "latest_checkpoint_step": ckpt.latest_step(),
        "best_checkpoint_step": ckpt.best_step(),
        "checkpoint_steps": ckpt.all_steps(),
        "hparam_changes": counters.hparam_changes,
        "evals": evals,
    }


@dataclasses.dataclass(frozen=True)
class RunResult:
    """What `Trainer.run` returns: the run's statistics, and where its checkpoints are.

    Attributes:
      env_steps, episodes, updates, wall_time_s, sps: totals over the whole run (resumes
        included); `episodes` are training episodes the actors finished.
      final_eval_return, best_eval_return: mean evaluation returns (None without evaluations).
      best_eval_metric: the best monitored metric (`Hooks.reward_metric`), or None.
      stop_reason: why the run stopped ("total_env_steps reached", "the stop hook ...", ...).
      workdir, checkpoint_dir: the run's directories.
      latest_checkpoint, best_checkpoint: paths of those steps (None if there is none).
      summary: everything in `summary.json` (every evaluation, digests, ...).
    """

    env_steps: int
    episodes: int
    updates: int
    wall_time_s: float
    sps: float
    final_eval_return: float | None
    best_eval_return: float | None
    best_eval_metric: float | None
    stop_reason: str
    workdir: str
    checkpoint_dir: str
    latest_checkpoint: str | None
    best_checkpoint: str | None
    summary: dict[str, Any]

    @classmethod
    def from_summary(cls, summary: dict[str, Any], workdir: str) -> RunResult:
        def step_path(step: int | None) -> str | None:
            return None if step is None else os.path.join(summary["checkpoint_dir"], str(step))

        best = summary["best_eval"]
        return cls(
            env_steps=summary["env_steps"],
            episodes=summary["episodes"],
            updates=summary["updates"],
            wall_time_s=summary["wall_time_s"],
            sps=summary["sps"],
            final_eval_return=summary["final_eval_return"],
            best_eval_return=summary["best_eval_return"],
            best_eval_metric=best["metric"] if best else None,
            stop_reason=summary["stop_reason"],
            workdir=workdir,
            checkpoint_dir=summary["checkpoint_dir"],
            latest_checkpoint=step_path(summary["latest_checkpoint_step"]),
            best_checkpoint=step_path(summary["best_checkpoint_step"]),
            summary=summary,
        )
