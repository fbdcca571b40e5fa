"""`TrainConfig`'s checks across fields (`TrainConfig.__post_init__` calls them): actor loops,
recurrent cores, synchronous collection and evaluation. Each raises `ConfigError` with one line
naming the field and the fix."""

from __future__ import annotations

import re
from typing import Any

from jaxrl_dist.config.errors import ConfigError, fail

ACTOR_LOOPS = ("python", "xla")  # acting/actor.py, acting/xla_actor.py


def check_actor_loop(c: Any) -> None:
    s = c.sebulba
    if s.actor_loop not in ACTOR_LOOPS:
        fail("sebulba.actor_loop", s.actor_loop, f"must be one of {ACTOR_LOOPS}")
    groups = s.env_groups_per_actor
    if groups > 1 and s.actor_loop != "xla":
        fail("sebulba.env_groups_per_actor", groups, "> 1 needs config.sebulba.actor_loop='xla'")
    if s.envs_per_actor % groups:
        why = f"must divide config.sebulba.envs_per_actor={s.envs_per_actor}"
        fail("sebulba.env_groups_per_actor", groups, why)
    if s.actor_loop != "xla":
        return
    fix = {  # what the jitted loop does not do, and the fix
        "sebulba.async_envs": (s.async_envs, "False (it steps a sync EnvPool)"),
        "deterministic": (c.deterministic, "False (lockstep actors are Python loops)"),
        "seats.enabled": (c.seats.enabled, "False (seats are played in Python)"),
        "sebulba.agents_per_env": (s.agents_per_env > 1, "1 (agent streams are split in Python)"),
        "sebulba.inference.client": (
            s.inference.client != "local",
            "'local' (inference runs inside the unroll)",
        ),
    }
    for field, (bad, want) in fix.items():
        if bad:
            raise ConfigError(
                f"config.sebulba.actor_loop='xla' needs config.{field}={want}; set it, or use "
                "config.sebulba.actor_loop='python' with config.sebulba.env_groups_per_actor=1"
            )


def check_collection(c: Any) -> None:
    s = c.sebulba
    if not 0 < s.fraction_samples <= 1:
        fail("sebulba.fraction_samples", s.fraction_samples, "must be in (0, 1]")
    if s.fraction_samples < 1 and not s.sync_collection:
        fail(
            "sebulba.fraction_samples",
            s.fraction_samples,
            "< 1 drops stragglers of synchronous collection; set "
            "config.sebulba.sync_collection=True",
        )
    if not s.sync_collection:
        return
    if s.fraction_samples < 1 and not s.max_policy_lag:
        fail(
            "sebulba.max_policy_lag",
            0,
            "keeps every late unroll, so with fraction_samples < 1 they pile up and the lag "
            "grows; set it, e.g. config.sebulba.max_policy_lag=1 (late unrolls older than that "
            "are dropped)",
        )
    if c.deterministic:
        fail("sebulba.sync_collection", True, "is implied by deterministic=True; leave it False")
    if s.async_envs:
        fail(
            "sebulba.async_envs",
            True,
            "must be False when sync_collection=True (actors step all their envs together)",
        )
    game = c.seats.self_play_game() if c.seats.enabled else None
    if game:
        fail(
            "sebulba.sync_collection",
            True,
            f"cannot take a game that seats one learner twice, {game}: its seats move in "
            "turn, so one seat's unroll ends moves before the other's, which cannot end until "
            "the first moves again (with the old params); leave it False, or drop self-play "
            "from config.seats.games",
        )


def check_evaluation(c: Any) -> None:
    if c.eval_every_episodes and c.eval_every_updates:
        fail(
            "eval_every_episodes",
            c.eval_every_episodes,
            f"and config.eval_every_updates={c.eval_every_updates} are both set: give "
            "one (config.eval_every_updates=0 to evaluate by episodes)",
        )
    if c.eval_envs > c.eval_episodes:
        fail(
            "eval_envs",
            c.eval_envs,
            f"is more than config.eval_episodes={c.eval_episodes}: give at most that "
            "(each env plays its share of the episodes)",
        )
    if not 0 < c.eval_background_share <= 1:
        fail("eval_background_share", c.eval_background_share, "must be in (0, 1]")
    if not re.fullmatch(r"\w+", c.eval_metric):
        fail(
            "eval_metric",
            c.eval_metric,
            "must be 'return' or the name of an evaluation statistic (return_worst_seat, "
            "win_rate, ...)",
        )
