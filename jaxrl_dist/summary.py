"""The run summary (`summary.json`): what a run reached, from its counters."""

from __future__ import annotations

from typing import Any

from jaxrl_dist.checkpoint import Checkpointer


def run_summary(
    counters: dict, target: float | None, stop_reason: str, ckpt: Checkpointer
) -> dict[str, Any]:
    """Env steps, updates, wall time, SPS, final and best evaluation, when `target` (the
    evaluation return to reach) was first reached, why the run stopped, the checkpoints."""
    evals = counters["evals"]
    reached = [e for e in evals if target is not None and e["return"] >= target]
    wall = counters["wall_time_s"]
    return {
        "env_steps": counters["env_steps"],
        "updates": counters["updates"],
        "wall_time_s": round(wall, 3),
        "sps": round(counters["env_steps"] / wall, 1) if wall else 0.0,
        "final_eval_return": evals[-1]["return"] if evals else None,
        "best_eval_return": max(e["return"] for e in evals) if evals else None,
        "env_steps_to_target": reached[0]["env_steps"] if reached else None,
        "wall_time_s_to_target": reached[0]["wall_time_s"] if reached else None,
        "dropped_rollouts": counters["dropped_rollouts"],
        "actor_restarts": counters["actor_restarts"],
        "stop_reason": stop_reason or "finished",
        "checkpoint_dir": ckpt.directory,
        "latest_checkpoint_step": ckpt.latest_step(),
        "evals": evals,
    }
