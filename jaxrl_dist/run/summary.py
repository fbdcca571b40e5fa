"""The run summary (`summary.json`): what a run reached, from its counters."""

from __future__ import annotations

import dataclasses
import os
from typing import Any

from jaxrl_dist.checkpoints.store import Checkpointer, best_dir
from jaxrl_dist.run.best import BestPolicies
from jaxrl_dist.run.counters import Counters


def run_summary(
    counters: Counters,
    evals: list[dict[str, Any]],
    target: float | None,
    stop_reason: str,
    ckpt: Checkpointer,
    best: BestPolicies | None = None,
    params_update: int | None = None,
) -> dict[str, Any]:
    """Env steps, updates, wall time, SPS, final and best evaluation (`evals`: the run's
    history), when `target` (the evaluation return to reach) was first reached, why the run
    stopped, the checkpoints and the best params saved (`best`: None where best saves are off,
    or on another process than 0). `params_update`: the update whose params the run ends with,
    where they were taken back at a stop (else its last update's)."""
    reached = [e for e in evals if target is not None and e["return"] >= target]
    wall = counters.wall_time_s
    summary = {
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
        "final_params_update": counters.updates if params_update is None else params_update,
        **_best_checkpoints(ckpt, best),
        "checkpoint_steps": ckpt.all_steps(),
        "hparam_changes": counters.hparam_changes,
        "evals": evals,
    }
    note = final_eval_note(summary, target, reached[0] if reached else None)
    if note:
        summary["final_eval_note"] = note
    return summary


def _best_checkpoints(ckpt: Checkpointer, best: BestPolicies | None) -> dict[str, Any]:
    """Where the best params are: `best_checkpoint_step` and `best_checkpoint_dir`, each a
    value for a one-agent run or `{NAME: value}` for several (None: best saves are off), and
    what writing them cost: `best_saves` (how many were written, and the seconds the learner's
    thread spent writing them; process 0's, where the bests are written)."""
    if best is None:
        return {"best_checkpoint_step": None, "best_checkpoint_dir": None, "best_saves": None}
    saves = {"written": best.written, "learner_s": round(best.write_s, 4)}
    steps = best.steps()
    dirs = {name: best_dir(ckpt.directory, name if len(steps) > 1 else None) for name in steps}
    if len(steps) == 1:
        (steps,), (dirs,) = steps.values(), dirs.values()
    return {"best_checkpoint_step": steps, "best_checkpoint_dir": dirs, "best_saves": saves}


def final_eval_note(
    summary: dict[str, Any], target: float | None, first: dict[str, Any] | None
) -> str:
    """Why a final evaluation is below the stop line `target` ("" when it is not, or there is
    none): the target was never reached, or which update reached it first and where its params
    are."""
    final = summary["final_eval_return"]
    if target is None or final is None or final >= target:
        return ""
    if first is None:
        return f"below the target {target:g}, which no evaluation reached"
    update, best = first["updates"], summary["best_checkpoint_step"]
    if summary["best_checkpoint_dir"] is None:
        where = "were not saved (config.keep_best_checkpoints=0)"
    elif best == update or (isinstance(best, dict) and update in best.values()):
        where = f"are checkpoints/best/ step {update}"
    else:
        where = "are not among the best kept (checkpoints/best/)"
    return (
        f"below the target {target:g}: the evaluation of update {update} reached "
        f"{first['return']:.1f}; its params {where}"
    )


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
      latest_checkpoint: the path of the latest step (None if there is none).
      best_checkpoint: the path of the best evaluation's params (`checkpoints/best/STEP`;
        several agents: `{NAME: path}`; None where best saves are off or nothing was
        evaluated).
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
    best_checkpoint: str | dict[str, str | None] | None
    summary: dict[str, Any]

    @classmethod
    def from_summary(cls, summary: dict[str, Any], workdir: str) -> RunResult:
        def step_path(step: int | None, directory: str | None = None) -> str | None:
            directory = directory or summary["checkpoint_dir"]
            return None if step is None else os.path.join(directory, str(step))

        best_step, best_dir = summary["best_checkpoint_step"], summary["best_checkpoint_dir"]
        if isinstance(best_step, dict):
            best_path = {n: step_path(best_step[n], best_dir[n]) for n in best_step}
        else:
            best_path = None if best_dir is None else step_path(best_step, best_dir)
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
            best_checkpoint=best_path,
            summary=summary,
        )


def done_line(summary: dict[str, Any], seeds: int) -> str:
    """The run's last progress line, from its summary."""
    steps = f"{summary['env_steps']:,} env steps" + (
        f" per seed x {seeds} seeds" if seeds > 1 else ""
    )
    why = summary.get("final_eval_note")
    return (
        f"done ({summary['stop_reason']}): {steps}, {summary['updates']:,} updates in "
        f"{summary['wall_time_s']:.1f}s, final eval return {summary['final_eval_return']}"
        + (f" ({why})" if why else "")
    )
