"""What the Sebulba engine does with the shared run fields the shell leaves to it
(`run/fields.py`: `SHELL_FIELDS` are honoured alike by every engine), and the ones it refuses.
Its own section, `config.sebulba` (`config/engine_sections.py`), is read by it alone."""

from typing import Any

SECTION = "sebulba"

USES = {
    "sebulba": "actors, EnvPools, the actor loop, queue, restarts, collection, inference",
    "unroll_length": "T, steps per segment",
    "batch_size": "segments (or transitions) per update, over all processes",
    "max_updates_per_s": "each agent's learner waits its turn",
    "learner_device_ids": "the learner mesh",
    "deterministic": "lockstep actors, actor-ordered batches, the GPU XLA flags",
    # The replay fields as the agent's data flow reads them (a flow refuses the ones it does
    # not read: `DataFlow.reads`).
    "replay.capacity": "the replay's size",
    "replay.min_size": "learning starts",
    "replay.samples_per_insert": "the rate limiter",
    "replay.tolerance": "the rate limiter's slack",
    "replay.n_step": "prioritized windows",
    "replay.priority_exponent": "priorities",
    "replay.priority_epsilon": "priorities",
    "replay.save": "the replay's contents in checkpoints",
    "seats": "turn-based games: roles, masks, the opponent pool, openings, evaluation",
    "agents": "several learning agents, a lane each (learner, data, params, pool, actors)",
    "learning_mask": "agents that play without learning",
    "exploration_mask": "agents that act greedily",
}

REFUSES = {
    "replay.batch_size": "the learner samples config.batch_size",
}


def lockstep_problem(config: Any) -> str | None:
    """What deterministic mode's lockstep actors cannot do (Anakin's program is deterministic
    by construction: it takes self-play too)."""
    if not config.deterministic:
        return None
    if config.sebulba.async_envs:
        return "config.sebulba.async_envs=True must be False when deterministic=True"
    game = config.seats.self_play_game() if config.seats.enabled else None
    if game:
        return (
            f"config.deterministic=True cannot take a game that seats one learner twice on "
            f"Sebulba, {game}: unroll v is acted with params v, and one seat's unroll ends "
            "moves before the other's, which cannot end until the first moves again (with "
            "params v+1, which wait for it); drop self-play from config.seats.games (Anakin's "
            "program takes it: both seats step in one jitted update)"
        )
    return None
