"""Every run field has one owner. The run shell honours `SHELL_FIELDS` alike on every engine;
each engine reads its own section (`config.sebulba`, `config.anakin`: `Engine.section`) and
lists what it does with the shared fields (`Engine.uses`) and which it cannot honour
(`Engine.refuses`). One rule refuses what a run would not read: another engine's section set
away from its defaults, or a field the engine refuses, stops the run before anything is
written, in one line (`refusal`); a field the run's agents, flows or modes do not read, the same
way (`unread_problem`). A test walks every field against every engine and algorithm, so no
field is accepted and silently ignored."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from jaxrl_dist.config.engine_sections import ENGINE_SECTIONS
from jaxrl_dist.config.sections import field_value, leaf_paths
from jaxrl_dist.defaults import field_default as default_of

# Run fields some data flows read and others do not (`DataFlow.run_reads`).
FLOW_FIELDS = ("sebulba.queue_size", "sebulba.max_policy_lag")

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
    """One line naming the first field `engine` would not read that `config` sets to other than
    its default (a field of another engine's section, or one it refuses), and the fix for every
    such field (their defaults), or None."""
    refused = [
        (path, f"config.{section} is read by config.runtime={section!r} only")
        for section, cls in ENGINE_SECTIONS.items()
        if section != engine.section
        for path in leaf_paths(cls, f"{section}.")
    ]
    refused += list(engine.refuses.items())
    refused = [
        (field, why, field_value(config, field), field_default(config, field))
        for field, why in refused
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
    return default_of(config, last)


def unread_problem(config: Any, flows: Sequence[Any], background: bool) -> str | None:
    """One line naming a field `config` sets that nothing in this run reads (none of its
    agents' data `flows` reads a queue field; env epochs outside deterministic mode; the
    evaluation thread's share when evaluation is not `background`), with the fix; None when
    every set field is read. (Fields an engine refuses: `refusal`.)"""
    for name in FLOW_FIELDS:
        value, default = field_value(config, name), field_default(config, name)
        if value != default and not any(name in flow.run_reads for flow in flows):
            return (
                f"config.{name}={value!r} is not used by config.algorithm={config.algorithm!r} "
                f"(its data flow replays: no queue between actors and learner); leave it at "
                f"{default!r}"
            )
    share, default = config.eval_background_share, field_default(config, "eval_background_share")
    if share != default and not background:
        return (
            f"config.eval_background_share={share!r} is read only when evaluation runs in the "
            "background (here it blocks the learner); set config.eval_in_background=True, or "
            f"leave it at {default!r}"
        )
    value = config.sebulba.env_epoch_updates
    default = field_default(config, "sebulba.env_epoch_updates")
    if value != default and not config.deterministic:
        return (
            f"config.sebulba.env_epoch_updates={value!r} is read in deterministic mode only "
            f"(lockstep env epochs); set config.deterministic=True, or leave it at {default!r}"
        )
    return None
