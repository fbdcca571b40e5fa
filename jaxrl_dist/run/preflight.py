"""Checks before a run writes anything: the env and the devices (the engine's), the work
directory, the algorithm and its data flow, what the engine refuses, and the params to
warm-start from (the checkpoint to resume is checked against the engine's saved tree,
`resume.check_resumable`). Each failure is a ConfigError with
one line that says what is wrong and how to fix it."""

from __future__ import annotations

import dataclasses
import os
import re
import sys
from collections.abc import Callable
from typing import Any

import jax
import numpy as np

from jaxrl_dist import agents
from jaxrl_dist.agents.base import Agent, RunShape, with_schedules
from jaxrl_dist.checkpoints.steps import locate_step, read_meta, split_step
from jaxrl_dist.checkpoints.store import (
    AgentNotSavedError,
    first_line,
    restore_params,
    restructure_like,
    tree_difference,
)
from jaxrl_dist.config import ConfigError, TrainConfig
from jaxrl_dist.config.agents import AGENT_FIELDS, AgentView, agent_views
from jaxrl_dist.data import flows
from jaxrl_dist.envs import EnvSpec
from jaxrl_dist.envs.seats import AGENT_ROLE, LEARNER, SNAPSHOT_ROLES, agent_snapshot
from jaxrl_dist.envs.sources import FACTORY, register_env_factory
from jaxrl_dist.evaluation.opponents import named_player
from jaxrl_dist.learning.mesh import Devices, select_devices
from jaxrl_dist.run.engine import Engine
from jaxrl_dist.run.fields import refusal, unread_problem
from jaxrl_dist.run.prepared import Prepared, PreparedLane
from jaxrl_dist.run.wandb_sink import wandb_problem
from jaxrl_dist.schedules import check_schedules


def learner_devices(config: TrainConfig) -> Devices:
    """The device split of `config` (both runtimes), its batch split over every learner device;
    ConfigError naming a bad device id or a batch that does not split."""
    try:
        devices = select_devices(config.sebulba.actor_device_ids, config.learner_device_ids)
    except ValueError as e:
        raise ConfigError(str(e)) from None
    n = devices.num_learner_devices
    if config.batch_size % n:
        raise ConfigError(
            f"config.batch_size={config.batch_size} does not split over {n} learner devices "
            f"(of all processes); make config.batch_size a multiple of {n}"
        )
    return devices


def eval_env_problem(
    config: TrainConfig,
    spec: EnvSpec,
    check: Callable[[str, dict[str, Any]], str | None],
    spec_of: Callable[[str, dict[str, Any]], EnvSpec],
) -> str | None:
    """What is wrong with the evaluation's own env (`config.eval_env_id`/`eval_env_kwargs`):
    the engine's `check` of it, or spaces the trained policy cannot take; None when it is the
    training env or fits."""
    if not config.own_eval_env:
        return None
    env_id, kwargs = config.eval_env
    problem = check(env_id, kwargs)
    if problem:
        return problem.replace("config.env_id", "config.eval_env_id").replace(
            "config.env_kwargs", "config.eval_env_kwargs"
        )
    theirs = spec_of(env_id, kwargs)
    if theirs != spec:
        return (
            f"config.eval_env_id={env_id!r} has {_spaces(theirs)} but the training env "
            f"{config.env_id!r} has {_spaces(spec)}; evaluate on an env with the same spaces"
        )
    return None


def _spaces(spec: EnvSpec) -> str:
    actions = f"{spec.num_actions} actions" if spec.num_actions else f"{spec.action_dim}-d actions"
    players = f", {spec.num_players} players" if spec.num_players > 1 else ""
    return f"{spec.obs_dtype} observations {list(spec.obs_shape)}, {actions}{players}"


def multi_agent_problem(config: TrainConfig, spec: EnvSpec) -> str | None:
    """What does not fit between the env's players or agents and `config.seats` /
    `config.sebulba.agents_per_env` (Sebulba's; one line with the fix), or None."""
    seats, players = config.seats, spec.num_players
    # On Anakin a multi-agent env's streams are its agents (`envs/jax_marl.py`): no field says
    # how many (Sebulba's actors split EnvPool's rows by `sebulba.agents_per_env`).
    anakin = config.runtime == "anakin"
    if spec.num_agents != config.sebulba.agents_per_env and not anakin:
        return (
            f"config.env_id={config.env_id!r} has {spec.num_agents} agent(s) per env; set "
            f"config.sebulba.agents_per_env={spec.num_agents}"
        )
    if players > 1 and not seats.enabled:
        return (
            f"config.env_id={config.env_id!r} is a {players}-player turn-based game: say who "
            "plays each seat with config.seats.games, e.g. "
            '\'(("learner", "learner"), ("learner", "random"), ("random", "learner"))\''
        )
    if players > 1 and config.eval_envs % players:
        return (
            f"config.eval_envs={config.eval_envs} must be a multiple of {players} for a "
            f"{players}-player game (env e seats the policy in seat e % {players}: each seat "
            "its share of the episodes)"
        )
    if seats.enabled and players == 1:
        return (
            f"config.seats.games is set but config.env_id={config.env_id!r} is not a turn-based "
            "game; leave config.seats.games empty"
        )
    unread = None if seats.enabled else seats.set_without_games()
    if unread:
        name, value, default = unread
        return (
            f"config.seats.{name}={value!r} is read only in a turn-based game with seats "
            f"(config.seats.games); leave it at {default!r}"
        )
    if seats.enabled and len(seats.games[0]) != players:
        return (
            f"config.seats.games={seats.games} gives {len(seats.games[0])} seats a game; "
            f"{config.env_id} has {players}"
        )
    # A replay agent learns from a greedy seat's moves (they go into its replay, as another
    # agent's would); an on-policy learner needs its own samples.
    replays = flows.get(agents.get(config.algorithm).data).replays
    for pattern in seats.games if not replays else ():
        for seat, role in enumerate(seats.learned(pattern)):
            if role == LEARNER and seats.greedy_seat(seat):
                return (
                    f"config.seats.exploration_mask={seats.exploration_mask} makes seat {seat} "
                    f"greedy, but the learner plays and learns from it on-policy "
                    f"({config.algorithm}), which needs its own samples; turn its "
                    "config.seats.learning_mask off too, or use a replay agent (rainbow)"
                )
    names = {name for pattern in seats.games for name in pattern} | {seats.eval_opponent}
    names = {  # the run's agents, their pools and starts
        name for name in names if not name.startswith(AGENT_ROLE) and not agent_snapshot(name)
    }
    for name in sorted(names - {LEARNER, *SNAPSHOT_ROLES}) if seats.enabled else ():
        try:  # a checkpoint opponent is loaded now: a bad path fails before any training
            named_player(name, config.env_id, 1, np.random.default_rng(0))
        except ValueError as e:
            return f"config.seats: {e}"
    return None


def config_agent(config: TrainConfig, spec: EnvSpec, shape: RunShape) -> Agent:
    """The agent `config` names for `spec`, its intrinsic reward beside it (ValueError, one
    line, for settings that do not fit)."""
    return agents.make_agent(
        config.algorithm,
        config.algo,
        config.network,
        spec,
        shape,
        config.intrinsic,
        config.batch_size,
    )


def scheduled_agent(agent: Agent, config: TrainConfig, num_updates: int) -> Agent:
    """`agent` whose learner follows `config.schedules` (raises ConfigError for a schedule of
    a name the agent cannot change, or one `anneal_lr` already schedules)."""
    problem = check_schedules(config.schedules, agent.hyperparams)
    integers = [name for name in config.schedules if type(getattr(config.algo, name, 0.0)) is int]
    if integers:
        problem = problem or (
            f"config.schedules[{integers[0]!r}]: {integers[0]} is a count; a schedule would "
            "make it fractional. Change it at run time instead (control.json)"
        )
    if "learning_rate" in config.schedules and getattr(config.algo, "anneal_lr", False):
        problem = problem or (
            "config.schedules['learning_rate'] replaces config.algo.anneal_lr's linear decay; "
            "set config.algo.anneal_lr=False"
        )
    if problem:
        raise ConfigError(problem)
    learner = with_schedules(agent.learner, dict(config.schedules), num_updates)
    return dataclasses.replace(agent, learner=learner)


def prepare(config: TrainConfig, workdir: str, resume: bool, engine: type[Engine]) -> Prepared:
    """Devices, the work directory, each agent's algorithm, data flow and warm start, what
    `engine` refuses; ConfigError. `engine.machine` checks the env and the devices (for every
    agent's view of the run)."""
    problem = refusal(config, engine)  # before the machine checks: they may read those fields
    roles = {role for pattern in config.seats.games for role in pattern} | set(
        config.sebulba.agent_slots
    )
    named = sorted(r for r in roles if r.startswith(AGENT_ROLE)) if not config.agents else []
    if named:
        problem = (
            f"config.seats.games or agent_slots name {named[0]!r}, but config.agents is empty; "
            "name agents in config.agents, or use a role of one agent's run"
        )
    if problem:
        raise ConfigError(problem)
    views = agent_views(config)
    spec, devices = engine.machine(views[0].config)
    for view in views[1:]:
        engine.machine(view.config)
    ckpt_dir = os.path.join(workdir, "checkpoints")
    has_ckpt = os.path.isdir(ckpt_dir) and bool(os.listdir(ckpt_dir))
    if has_ckpt and not resume:
        raise ConfigError(
            f"{workdir} already holds a run's checkpoints; pass --resume to continue "
            "it, or choose another --workdir (nothing was overwritten)"
        )
    problem = wandb_problem(config)
    if problem:
        raise ConfigError(problem)
    lanes = tuple(_prepare_lane(view, spec, engine) for view in views)
    background = config.evaluates_in_background(engine.evaluates_beside_by_default)
    problem = unread_problem(config, [lane.flow for lane in lanes], background)
    if problem:
        raise ConfigError(problem)
    notes = tuple(lane.note for lane in lanes if lane.note)
    return Prepared(spec, devices, lanes, notes)


def _prepare_lane(view: AgentView, spec: EnvSpec, engine: type[Engine]) -> PreparedLane:
    """One agent's algorithm, data flow, schedules and warm start; ConfigError."""
    config = view.config
    entry = agents.get(config.algorithm)
    flow = flows.get(entry.data)
    problem = entry.check(config.algo, config) or flow.check(config)
    problem = problem or engine.problem(config, flow)
    if not problem and view.learning and not view.exploring and not flow.replays:
        problem = (
            f"config.exploration_mask makes agent {view.name!r} greedy, but it learns "
            f"on-policy ({config.algorithm}) from its own samples; turn its "
            "config.learning_mask off too, or let it explore"
        )
    if problem:
        raise ConfigError(_named(problem, view))
    shape = RunShape(config.total_env_steps, flow.env_steps_per_update(config))
    try:
        agent = config_agent(config, spec, shape)
        agent = scheduled_agent(agent, config, shape.num_updates)
        init_shapes = jax.eval_shape(agent.learner.init, jax.random.PRNGKey(0))
    except (ValueError, TypeError) as e:
        raise ConfigError(_named(str(e).splitlines()[0], view)) from None
    if agent.learner.priorities != flow.priorities:
        raise ConfigError(
            f"algorithm {config.algorithm!r}: its learner "
            f"{'returns' if agent.learner.priorities else 'returns no'} priorities but its data "
            f"flow {entry.data!r} {'takes' if flow.priorities else 'takes no'} priorities back; "
            "register it with a flow whose DataFlow.priorities is LearnerCore.priorities"
        )
    warm, notes = None, []
    if config.warm_start:
        like = agent.learner.actor_params(init_shapes)
        source = config.warm_start
        warm = warm_params(source, like, config.env_id, view.warm_start_agent, warn=notes.append)[2]
    return PreparedLane(view, agent, flow, warm, notes[0] if notes else None)


def _named(problem: str, view: AgentView) -> str:
    """A problem found in agent `view`'s own fields (`AGENT_FIELDS`), in
    `config.agents.NAME.` terms; a problem with a run field stays as it is."""
    field = re.match(r"config\.(\w+)", problem)
    if view.name == LEARNER or field is None or field.group(1) not in AGENT_FIELDS:
        return problem
    name = field.group(1)  # every mention of it, the fix it names too
    return re.sub(rf"config\.{name}\b", f"config.agents.{view.name}.{name}", problem)


def warm_params(
    spec: str,
    like: Any,
    env_id: str,
    agent: str | None = None,
    field: str = "config.warm_start",
    warn: Callable[[str], None] | None = None,
) -> tuple[str, int, Any]:
    """(the run's path, the step, its params) of the run `spec` names (`RUN[@latest|@best|
    @STEP]`; its agent `agent` if it had several), the params shaped like `like`, trained on
    `env_id`; ConfigError (one line naming `field`): a warm start's, and a load into a running
    job's (`run/control.py`). For `@best` the path is the best params' own directory
    (`checkpoints/best/`), so `PATH@STEP` names them again. "latest" is the newest intact step:
    a damaged newer one is named in one `warning:` line on stderr (process 0), also handed to
    `warn`."""
    path, which = split_step(spec)
    how = " with config.agents.NAME.warm_start_agent" if field == "config.warm_start" else ""

    def note(line: str) -> None:
        line = f"{field}: {line}"
        if jax.process_index() == 0:
            print(f"warning: {line}", file=sys.stderr)
        if warn is not None:
            warn(line)

    try:
        directory, step = locate_step(path, which, agent, warn=note)
        meta = read_meta(directory, step)
        policies = meta.get("policies") or {}
        policy = policies.get(agent) if agent in policies else meta.get("policy", {})
        source = (policy or {}).get("env_id", env_id)
    except FileNotFoundError:
        raise ConfigError(f"{field}={spec!r} holds no checkpoint") from None
    except AgentNotSavedError as e:  # a run of several agents' best: which one
        raise ConfigError(f"{field}={spec!r}: {e}{how}") from None
    except ValueError as e:  # no such step, or no best params for @best
        raise ConfigError(f"{field}={spec!r}: {e}") from None
    if source != env_id:
        raise ConfigError(
            f"{field}={spec!r} was trained on {source}, not {env_id}; take params from a run "
            "of the same env"
        )
    source_path = directory if which == "best" else path  # a best is in its own directory
    try:
        params = restore_params(directory, step, agent)
    except AgentNotSavedError as e:  # a run of several agents: which one
        raise ConfigError(f"{field}={spec!r}: {e}{how}") from None
    except ValueError as e:  # a damaged step named by its number
        raise ConfigError(
            f"{field}={spec!r}: step {step} cannot be read ({first_line(e)}); name another step"
        ) from None
    if tree_difference(params, like):
        raise ConfigError(
            f"{field}={spec!r}: its params do not match this config's network "
            "(different torso, sizes, env, or config.intrinsic's value head); take params "
            "from a run with the same network"
        )
    return source_path, step, restructure_like(params, like)


def with_env_factory(config: TrainConfig, env_factory: Callable[..., Any]) -> TrainConfig:
    """`config` training on `env_factory`'s envs (registered as `factory:NAME`)."""
    name = config.env_id.removeprefix(FACTORY) if config.env_id.startswith(FACTORY) else ""
    name = name or re.sub(r"\W", "", getattr(env_factory, "__name__", "")) or "env"
    return dataclasses.replace(config, env_id=register_env_factory(name, env_factory))
