"""Every run field has one owner: the run shell honours `SHELL_FIELDS` alike on every engine;
each engine lists what it does with the rest (`Engine.uses`) and what it cannot honour
(`Engine.refuses`). A refused field set to anything but its default stops the run before
anything is written, in one line (`refusal`); a test holds every field of the config to exactly
one list per engine, so no field is accepted and silently ignored."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from jaxrl_dist.config.sections import field_value

# Run fields some data flows read and others do not (`DataFlow.run_reads`).
FLOW_FIELDS = ("queue_size", "max_policy_lag")

# What the shell honours for every engine, and how (`Engine.uses` / `refuses`: the rest).
SHELL_FIELDS: Mapping[str, str] = {
    "algorithm": "the registered agent (and its data flow)",
    "algo": "the agent's own config",
    "network": "the agent's network",
    "intrinsic": "an intrinsic reward in the agent's learner (its state, its value head)",
    "runtime": "the engine",
    "seed": "every random stream",
    "env_id": "the env, built by the engine",
    "env_kwargs": "the env's arguments, given by the engine",
    "eval_env_id": "evaluation's own env, built by the engine",
    "eval_env_kwargs": "evaluation's own env's arguments",
    "total_env_steps": "stop",
    "total_episodes": "stop",
    "max_wall_time_s": "stop",
    "stop_at_eval_return": "stop after an evaluation",
    "schedules": "run-time hyperparameters over the run's updates",
    "eval_every_updates": "evaluation cadence",
    "eval_every_episodes": "evaluation cadence in training episodes",
    "eval_episodes": "episodes per evaluation",
    "eval_envs": "the envs that play them",
    "eval_mode": "greedy, sampled or both",
    "eval_metric": "what ranks evaluations: reward_metric, or a statistic",
    "eval_in_background": "evaluation beside training, on a params snapshot",
    "eval_background_share": "the evaluation thread's share of wall time",
    "checkpoint_every_updates": "saves",
    "checkpoint_every_env_steps": "saves",
    "checkpoint_every_s": "saves (process 0's clock)",
    "keep_checkpoints": "retention",
    "keep_best_checkpoints": "the best evaluations' params, in checkpoints/best/",
    "log_every_updates": "log lines",
    "learning_curve": "learning_curve.png at the end",
    "warm_start": "params of another run at the start",
    "switch_interval_s": "CPython's GIL switch interval during the run",
    "wandb": "the W&B sink of every log record",
}


def refusal(config: Any, engine: Any) -> str | None:
    """One line naming the first field `engine` refuses that `config` sets to other than its
    default, and the fix for every such field (their defaults), or None."""
    refused = [
        (field, why, field_value(config, field), field_default(config, field))
        for field, why in engine.refuses.items()
    ]
    refused = [
        (field, why, value, default) for field, why, value, default in refused if value != default
    ]
    if not refused:
        return None
    field, why, value, _ = refused[0]
    fixes = ", ".join(f"config.{f}={default!r}" for f, _, _, default in refused)
    defaults = "the default" if len(refused) == 1 else "the defaults"
    return (
        f"config.{field}={value!r} is not used by config.runtime={engine.name!r} ({why}); set "
        f"{fixes} ({defaults}), or use another runtime"
    )


def field_default(config: Any, path: str) -> Any:
    """The default of field `path` (`"replay.tolerance"`) of `config`'s dataclasses."""
    *parents, last = path.split(".")
    for name in parents:
        config = getattr(config, name)
    field = {f.name: f for f in dataclasses.fields(config)}[last]
    if field.default_factory is not dataclasses.MISSING:
        return field.default_factory()
    return field.default


def unread_problem(config: Any, flows: Sequence[Any]) -> str | None:
    """One line naming a field `config` sets that nothing in this run reads (none of its
    agents' data `flows` reads a queue field; env epochs outside deterministic mode), with the
    fix; None when every set field is read. (Fields an engine refuses: `refusal`.)"""
    for name in FLOW_FIELDS:
        value, default = field_value(config, name), field_default(config, name)
        if value != default and not any(name in flow.run_reads for flow in flows):
            return (
                f"config.{name}={value!r} is not used by config.algorithm={config.algorithm!r} "
                f"(its data flow replays: no queue between actors and learner); leave it at "
                f"{default!r}"
            )
    value, default = config.env_epoch_updates, field_default(config, "env_epoch_updates")
    if value != default and not config.deterministic:
        return (
            f"config.env_epoch_updates={value!r} is read in deterministic mode only (lockstep "
            f"env epochs); set config.deterministic=True, or leave it at {default!r}"
        )
    return None
