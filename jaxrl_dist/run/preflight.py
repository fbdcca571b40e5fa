"""Checks before a run writes anything: the env, the devices, the work directory, the algorithm,
the checkpoint to resume and the params to warm-start from. Each failure is a ConfigError with
one line that says what is wrong and how to fix it."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from typing import Any

import jax
import numpy as np

from jaxrl_dist import agents
from jaxrl_dist.agents.base import Agent, RunShape, with_schedules
from jaxrl_dist.config import ConfigError, TrainConfig
from jaxrl_dist.data import env_steps_per_update
from jaxrl_dist.envs import EnvSpec, check_env, env_spec, xla_loop_problem
from jaxrl_dist.envs.seats import LEARNER, SNAPSHOT_ROLES
from jaxrl_dist.learning.mesh import Devices, select_devices
from jaxrl_dist.run.checkpoint import restore_params_like
from jaxrl_dist.run.opponents import named_player
from jaxrl_dist.run.resume import check_resumable
from jaxrl_dist.run.videos import video_problem
from jaxrl_dist.run.wandb_sink import wandb_problem
from jaxrl_dist.schedules import check_schedules

PRIORITIZED_FLOWS = ("prioritized", "sequences")  # learners that return priorities
REPLAY_FLOWS = ("replay", *PRIORITIZED_FLOWS)


@dataclasses.dataclass(frozen=True)
class Prepared:
    """What the checks produced: the env's spec, the device split, the agent's two halves, the
    data flow that feeds its learner, and the warm-start params (host arrays) if
    `config.warm_start` names a run."""

    spec: EnvSpec
    devices: Devices
    agent: Agent
    data: str = "on_policy"
    warm_params: Any = None


def validate_for_machine(config: TrainConfig) -> tuple[EnvSpec, Devices]:
    """Checks what needs EnvPool's registry, the devices and the process count; raises
    ConfigError.

    Returns (env spec, devices). Nothing is written before this passes.
    """
    problem = check_env(config.env_id, config.env_kwargs) or config.process_problem(
        jax.process_count()
    )
    if not problem and config.actor_loop == "xla":
        problem = xla_loop_problem(config.env_id, config.env_kwargs)
    if problem:
        raise ConfigError(problem)
    devices = learner_devices(config)
    spec = env_spec(config.env_id, config.env_kwargs)
    problem = multi_agent_problem(config, spec)
    if problem:
        raise ConfigError(problem)
    return spec, devices


def learner_devices(config: TrainConfig) -> Devices:
    """The device split of `config` (both runtimes), its batch split over every learner device;
    ConfigError naming a bad device id or a batch that does not split."""
    try:
        devices = select_devices(config.actor_device_ids, config.learner_device_ids)
    except ValueError as e:
        raise ConfigError(str(e)) from None
    n = devices.num_learner_devices
    if config.batch_size % n:
        raise ConfigError(
            f"config.batch_size={config.batch_size} does not split over {n} learner devices "
            f"(of all processes); make config.batch_size a multiple of {n}"
        )
    return devices


def multi_agent_problem(config: TrainConfig, spec: EnvSpec) -> str | None:
    """What does not fit between the env's players or agents and `config.seats` /
    `config.agents_per_env` (one line with the fix), or None."""
    seats, players = config.seats, spec.num_players
    if spec.num_agents != config.agents_per_env:
        return (
            f"config.env_id={config.env_id!r} has {spec.num_agents} agent(s) per env; set "
            f"config.agents_per_env={spec.num_agents}"
        )
    if players > 1 and not seats.enabled:
        return (
            f"config.env_id={config.env_id!r} is a {players}-player turn-based game: say who "
            "plays each seat with config.seats.games, e.g. "
            '\'(("learner", "learner"), ("learner", "random"), ("random", "learner"))\''
        )
    if seats.enabled and players == 1:
        return (
            f"config.seats.games is set but config.env_id={config.env_id!r} is not a turn-based "
            "game; leave config.seats.games empty"
        )
    if seats.enabled and len(seats.games[0]) != players:
        return (
            f"config.seats.games={seats.games} gives {len(seats.games[0])} seats a game; "
            f"{config.env_id} has {players}"
        )
    for pattern in seats.games:
        for seat, role in enumerate(seats.learned(pattern)):
            if role == LEARNER and seats.greedy_seat(seat):
                return (
                    f"config.seats.exploration_mask={seats.exploration_mask} makes seat {seat} "
                    "greedy, but the learner plays and learns from it: an on-policy learner "
                    "needs its own samples; turn its config.seats.learning_mask off too"
                )
    names = {name for pattern in seats.games for name in pattern} | {seats.eval_opponent}
    for name in sorted(names - {LEARNER, *SNAPSHOT_ROLES}) if seats.enabled else ():
        try:  # a checkpoint opponent is loaded now: a bad path fails before any training
            named_player(name, config.env_id, 1, np.random.default_rng(0))
        except ValueError as e:
            return f"config.seats: {e}"
    return None


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


def prepare(
    config: TrainConfig,
    workdir: str,
    resume: bool,
    machine: Callable[[TrainConfig], tuple[EnvSpec, Devices]] = validate_for_machine,
    check_resume: bool = True,
) -> Prepared:
    """Devices, the work directory, the algorithm, the warm-start params; ConfigError.
    `machine` checks the env and devices (the Anakin runtime passes its own: JAX envs);
    `check_resume=False` leaves the checkpoint's shapes to the caller (a runtime that saves
    more than the learner state)."""
    spec, devices = machine(config)
    ckpt_dir = os.path.join(workdir, "checkpoints")
    has_ckpt = os.path.isdir(ckpt_dir) and bool(os.listdir(ckpt_dir))
    if has_ckpt and not resume:
        raise ConfigError(
            f"{workdir} already holds a run's checkpoints; pass --resume to continue "
            "it, or choose another --workdir (nothing was overwritten)"
        )
    entry = agents.get(config.algorithm)
    problem = entry.check(config.algo, config) or data_problem(entry.data, config)
    problem = problem or video_problem(config) or wandb_problem(config)
    if problem:
        raise ConfigError(problem)
    shape = RunShape(config.total_env_steps, env_steps_per_update(entry.data, config))
    try:
        agent = entry.make(config.algo, config.network, spec, shape)
        agent = scheduled_agent(agent, config, shape.num_updates)
        init_shapes = jax.eval_shape(agent.learner.init, jax.random.PRNGKey(0))
    except (ValueError, TypeError) as e:
        raise ConfigError(str(e).splitlines()[0]) from None
    if agent.learner.priorities != (entry.data in PRIORITIZED_FLOWS):
        raise ConfigError(
            f"algorithm {config.algorithm!r}: its learner "
            f"{'returns' if agent.learner.priorities else 'returns no'} priorities but its data "
            f"flow is {entry.data!r}; register it with data='prioritized' or 'sequences' exactly "
            "when LearnerCore.priorities is True"
        )
    if resume and check_resume:  # a damaged checkpoint or other shapes: refused before writes
        check_resumable(ckpt_dir, init_shapes)
    warm_params = None
    if config.warm_start:
        try:
            warm_params = restore_params_like(
                config.warm_start, agent.learner.actor_params(init_shapes)
            )
        except FileNotFoundError:
            msg = f"config.warm_start={config.warm_start!r} holds no checkpoint"
            raise ConfigError(msg) from None
        except ValueError:
            raise ConfigError(
                f"config.warm_start={config.warm_start!r}: its params do not match this "
                "config's network (different torso, sizes or env); warm-start from a run "
                "with the same network"
            ) from None
    return Prepared(spec, devices, agent, entry.data, warm_params)


def data_problem(flow: str, config: TrainConfig) -> str | None:
    """What does not fit the agent's data flow or the policy seam (one line), or None."""
    if flow in REPLAY_FLOWS and config.deterministic:
        return (
            "config.deterministic=True takes one unroll of every actor per update, which a "
            "replay's sampling does not; this agent learns from a replay"
        )
    if flow in REPLAY_FLOWS and config.sync_collection:
        return (
            f"config.sync_collection=True: algorithm {config.algorithm!r} learns from a "
            f"replay ({flow!r}), where batches are sampled, not collected; leave it False"
        )
    if flow in REPLAY_FLOWS:
        problem = _replay_problem(flow, config)
        if problem:
            return problem
    batch = config.inference.batch_size
    if config.inference.client == "server" and batch and batch < config.env_batch_size:
        return (
            f"config.inference.batch_size={batch} is smaller than one actor's recv() batch "
            f"({config.env_batch_size} envs); make it at least that"
        )
    return None


def _replay_problem(flow: str, config: TrainConfig) -> str | None:
    """Replay sizes that cannot work with the run's batch and segments (one line), or None."""
    r, unroll, batch = config.replay, config.unroll_length, config.replay_batch_size
    unit = "transitions" if flow == "prioritized" else "segments"
    if r.capacity < batch:
        name = "replay.batch_size" if r.batch_size else "batch_size"
        return (
            f"config.replay.capacity={r.capacity} is smaller than config.{name}={batch} "
            f"(the {unit} of one update); make the capacity at least the batch"
        )
    if flow != "prioritized":
        return None
    if r.n_step >= unroll:
        return (
            f"config.replay.n_step={r.n_step} is not shorter than config.unroll_length={unroll}: "
            "a window is cut at its segment's end, so most would be short; make unroll_length "
            "larger than n_step"
        )
    if r.capacity < unroll:
        return (
            f"config.replay.capacity={r.capacity} transitions holds no segment of "
            f"config.unroll_length={unroll}; make the capacity at least that"
        )
    held = r.capacity // unroll * unroll  # whole segments
    if r.min_size > held:
        enough = -(-r.min_size // unroll) * unroll
        return (
            f"config.replay.min_size={r.min_size} is more than the {held} transitions the "
            f"replay holds (whole segments of unroll_length={unroll}), so learning would never "
            f"start; make min_size at most {held} or capacity at least {enough}"
        )
    return None
