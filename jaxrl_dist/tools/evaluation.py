"""`jaxrl_dist.evaluate`: one evaluation of a trained policy, from Python (a notebook, research
code) or `scripts/evaluate.py`, which calls it.

    result = jaxrl_dist.evaluate("runs/cartpole@best", episodes=20)
    result.mean_return, result.returns  # [episodes, agents]

`source` is a run (its work dir or checkpoints dir, `RUN[@latest|@best|@STEP]`, or the
`RunResult` that `Trainer.run` returned), a `Policy`, or params with the `TrainConfig` that
trained them. The episodes are played on fresh envs (EnvPool, or a JAX env behind the same
interface; by default one env per episode, its first), seeded by default with the run's seed +
`SEED_OFFSET`, so they are not the episodes the run's own evaluations played, and a rerun gives
the same result. A turn-based game is played against an opponent (default: the run's
`seats.eval_opponent`), the policy taking each seat in turn. An agent of a run of several that
shared a simultaneous task (`config.sebulba.agent_slots`) plays its own slots, the other
agents of the same step theirs, as the run evaluated it; its returns are its slots'.

Bad input raises ValueError or FileNotFoundError with one line naming the fix.
"""

from __future__ import annotations

import dataclasses
import os
import time
from typing import Any

import jax
import numpy as np

from jaxrl_dist.checkpoints.policy import (
    STEP_CHOICES,
    Policy,
    load_policy,
    load_policy_at,
    plays_in_jax,
    policy_from_config,
)
from jaxrl_dist.checkpoints.steps import split_step
from jaxrl_dist.config import TrainConfig
from jaxrl_dist.envs.jax_envs import make_jax_env
from jaxrl_dist.envs.seats import AGENT_ROLE
from jaxrl_dist.envs.sources import check_env
from jaxrl_dist.evaluation.agents import SlotEvaluator
from jaxrl_dist.evaluation.base import EvalResult, EvalSetup
from jaxrl_dist.evaluation.jax_envs import JaxEvaluator
from jaxrl_dist.evaluation.opponents import NAMES as OPPONENT_NAMES
from jaxrl_dist.evaluation.opponents import POOL, is_opponent_name, policy_player, pool_policy
from jaxrl_dist.evaluation.pools import make_evaluator
from jaxrl_dist.run.summary import RunResult

MODES = ("greedy", "sampled")
SEED_OFFSET = 10_000  # default evaluation seed = the run's seed + this


@dataclasses.dataclass(frozen=True)
class Evaluation:
    """The episodes of one evaluation and what was evaluated.

    Attributes:
      returns: `[episodes, agents]` float64 undiscounted returns (`agents` is 1 except in
        simultaneous-move envs of several agents; in a turn-based game, the policy's return in
        the seat it played).
      lengths: `[episodes]` int64 episode lengths in agent steps (moves of a game).
      seats: `[episodes]` the seat the policy played in each game (turn-based games), else None.
      stats: the mean, std, min and max return and the mean length (`return`, `return_std`,
        `return_min`, `return_max`, `length`); a game's `win_rate`, `draw_rate`, `loss_rate`,
        `return_seat<S>` and `return_worst_seat`.
      policy: the `Policy` evaluated (its `step`, `meta`, `env_id`, ...).
      env_id, env_kwargs: the env played.
      mode: "greedy" or "sampled".
      seed: the env seed.
      opponent: who a turn-based game was played against; None for other envs.
      envs: how many envs played the episodes (0: one each).
    """

    returns: np.ndarray
    lengths: np.ndarray
    seats: np.ndarray | None
    stats: dict[str, float]
    policy: Policy
    env_id: str
    env_kwargs: dict[str, Any]
    mode: str
    seed: int
    opponent: str | None
    envs: int = 0

    @property
    def mean_return(self) -> float:
        return self.stats["return"]

    @property
    def mean_length(self) -> float:
        return self.stats["length"]

    @property
    def agent_returns(self) -> np.ndarray:
        """`[agents]` each agent's mean return."""
        return self.returns.mean(axis=0)

    @property
    def seat_returns(self) -> dict[int, float]:
        """A turn-based game's mean return in each seat the policy played ({} for other envs)."""
        if self.seats is None:
            return {}
        return {int(s): float(self.returns[self.seats == s].mean()) for s in np.unique(self.seats)}

    def record(self) -> dict[str, Any]:
        """As JSON (what `scripts/evaluate.py` writes): the step, the statistics, per-episode
        `returns` (`[episodes][agents]`) and `lengths`; a game's `opponent` and `seats`."""
        policy = self.policy
        games = self.opponent is not None
        return {
            **({"opponent": self.opponent} if games else {}),
            "step": policy.step,
            "env_steps": policy.meta.get("env_steps"),
            "env_id": self.env_id,
            **({"env_kwargs": self.env_kwargs} if self.env_kwargs != policy.env_kwargs else {}),
            "algorithm": policy.description["algorithm"],
            "mode": self.mode,
            "seed": self.seed,
            "episodes": int(self.lengths.shape[0]),
            **({"envs": self.envs} if self.envs else {}),
            **self.stats,
            "returns": self.returns.tolist(),
            "lengths": self.lengths.tolist(),
            **({"seats": self.seats.tolist()} if games else {}),
            "train_eval_metric": policy.meta.get("eval_metric"),  # the run's own, if it had one
            "time": time.time(),
        }


def evaluate(
    source: Any,
    episodes: int = 10,
    *,
    step: str | int | None = None,
    agent: str | None = None,
    config: TrainConfig | None = None,
    env_id: str | None = None,
    env_kwargs: dict[str, Any] | None = None,
    opponent: str | None = None,
    mode: str = "greedy",
    seed: int | None = None,
    envs: int = 0,
) -> Evaluation:
    """Plays `episodes` episodes with a policy and returns them.

    Args:
      source: a run's work dir or checkpoints dir (`"RUN@best"`, `"RUN@20"`: a step after the
        last `@`), a `RunResult`, a `Policy`, or params (a checkpoint's, or
        `policy.params`) with `config`.
      episodes: how many episodes.
      step: the run's checkpoint step, "latest" (default), "best" or a number.
      agent: which agent of a run of several (`config.agents`).
      config: the `TrainConfig` that params were trained with (only with params).
      env_id: another env to play (default: the run's evaluation env, `config.eval_env_id`);
        it must have the policy's spaces.
      env_kwargs: that env's kwargs (without `env_id`: over the policy's training env's own).
      opponent: a turn-based game's opponent: random, heuristic, perfect,
        checkpoint:PATH[@STEP], pool:ID|latest (a snapshot of the checkpoint's opponent pool)
        or agent:NAME (another agent of the same step); default the run's.
      mode: "greedy" (the policy's mode) or "sampled".
      seed: the env seed (default: the run's seed + `SEED_OFFSET`).
      envs: the envs that play the episodes (0: one each; env `e` plays episodes `e, e +
        envs, ...`, as `config.eval_envs`).
    """
    _check(episodes, mode, seed, opponent)
    if isinstance(envs, bool) or not isinstance(envs, int) or not 0 <= envs <= episodes:
        raise ValueError(f"envs={envs!r}: give a whole number from 0 (one per episode) to episodes")
    policy = _policy(source, step, agent, config)
    env = policy.eval_env(env_id, env_kwargs)
    seed = _default_seed(policy) if seed is None else seed
    players = policy.spec.num_players
    if opponent is not None and players == 1:
        raise ValueError(f"an opponent is for turn-based games; {policy.env_id} has one player")
    if players > 1 and envs % players:
        raise ValueError(f"envs={envs}: give a multiple of {players} (each seat its share)")
    opponent = (opponent or policy.eval_opponent) if players > 1 else None
    result = _play(policy, episodes, mode == "greedy", seed, opponent, env, envs)
    return Evaluation(
        returns=result.returns,
        lengths=result.lengths,
        seats=result.seats,
        stats=result.stats(),
        policy=policy,
        env_id=env[0],
        env_kwargs=env[1],
        mode=mode,
        seed=seed,
        opponent=opponent,
        envs=envs,
    )


def _check(episodes: int, mode: str, seed: int | None, opponent: str | None) -> None:
    if isinstance(episodes, bool) or not isinstance(episodes, int) or episodes <= 0:
        raise ValueError(f"episodes={episodes!r}: give a whole number > 0")
    if mode not in MODES:
        raise ValueError(f"mode={mode!r}: choose greedy or sampled")
    if seed is not None and not 0 <= seed < 2**32:
        raise ValueError(f"seed={seed}: must be in [0, 2**32)")
    named = opponent is None or is_opponent_name(opponent) or opponent.startswith(AGENT_ROLE)
    if not named:
        raise ValueError(f"opponent {opponent!r}: choose {OPPONENT_NAMES}")


def _policy(source: Any, step: str | int | None, agent: str | None, config: Any) -> Policy:
    """The `Policy` that `source` names (see `evaluate`)."""
    if config is not None and isinstance(source, (str, os.PathLike, RunResult, Policy)):
        raise ValueError("config= goes with params; a run or a Policy brings its own")
    if isinstance(source, Policy):
        if step is not None or agent is not None:
            raise ValueError("a Policy is one step of one agent: leave step= and agent= out")
        return source
    if isinstance(source, RunResult):
        source = source.workdir
    if isinstance(source, (str, os.PathLike)):
        path, named = split_step(os.fspath(source))
        if step is not None and named != "latest" and str(step) != named:
            raise ValueError(f"{source!r} names step {named} and step={step!r}: give one")
        which = named if step is None else step
        if isinstance(which, str) and which not in STEP_CHOICES and not which.isdigit():
            raise ValueError(f"step={which!r}: give latest, best or a step number")
        return load_policy(path, which, agent)
    if config is None:
        raise ValueError(
            f"a source of type {type(source).__name__}: give a run dir, a RunResult, a Policy, "
            "or params with config=TrainConfig"
        )
    if step is not None or agent is not None:
        raise ValueError("params with their config are one policy: leave step= and agent= out")
    return policy_from_config(source, config)


def _default_seed(policy: Policy) -> int:
    run_seed = policy.meta.get("config", {}).get("seed", 0)
    return (run_seed + SEED_OFFSET) % 2**32


def _play(
    policy: Policy,
    episodes: int,
    greedy: bool,
    seed: int,
    opponent: str | None,
    env: tuple[str, dict[str, Any]],
    envs: int,
) -> EvalResult:
    """`episodes` episodes on `envs` new envs (0: one each). New envs each time (not one
    evaluator kept for `evaluate.py --follow`): EnvPool seeds an env only when it is made, so
    only new envs give every call the same starting states, and a rerun the same result."""
    if policy.run_slots:
        return _play_slots(policy, episodes, greedy, seed, env, envs)
    if plays_in_jax(*env, check_env(*env)):
        return _play_jax(policy, make_jax_env(*env), episodes, greedy, seed, envs)
    setup = EvalSetup(*env, episodes, seed, policy.agent.actor, jax.local_devices()[0], envs)
    player = None  # named players are made by the evaluator; a pool snapshot needs the checkpoint
    if opponent is not None and opponent.startswith((POOL, AGENT_ROLE)):
        if policy.directory is None:
            raise ValueError(
                f"opponent {opponent!r} is read from the policy's checkpoint; this policy was "
                "built from params: evaluate the run's directory"
            )
        if opponent.startswith(POOL):
            player = policy_player(pool_policy(policy, opponent), setup.num_envs)
        else:  # another agent of the same step
            other = load_policy_at(policy.directory, policy.step, opponent[len(AGENT_ROLE) :])
            player = policy_player(other, setup.num_envs)
    evaluator = make_evaluator(
        setup,
        num_players=policy.spec.num_players,
        opponent=opponent or "random",
        num_agents=policy.spec.num_agents,
        player=player,
    )
    try:
        return evaluator.run(policy.params, greedy=greedy)
    finally:
        evaluator.close()


def _play_slots(
    policy: Policy, episodes: int, greedy: bool, seed: int, env: tuple[str, dict], envs: int
) -> EvalResult:
    """An agent of a run of several sharing a simultaneous task (`config.sebulba.agent_slots`),
    played as the run evaluated it: in its own slots, the other slots by the other agents' params of
    the same step. Returns its slots' columns (`[episodes, its slots]`)."""
    slots = policy.run_slots
    others = set(slots) - {policy.name}  # this agent's params are loaded already
    agents = {name: load_policy_at(policy.directory, policy.step, name) for name in others}
    agents[policy.name] = policy
    setup = EvalSetup(*env, episodes, seed, None, jax.local_devices()[0], envs)
    cores = {name: p.agent.actor for name, p in agents.items()}
    evaluator = SlotEvaluator(setup, cores, slots)
    try:
        result = evaluator.run({name: p.params for name, p in agents.items()}, greedy=greedy)
    finally:
        evaluator.close()
    mine = [i for i, slot in enumerate(slots) if slot == policy.name]
    return EvalResult(result.returns[:, mine], result.lengths)


def _play_jax(
    policy: Policy, env: Any, episodes: int, greedy: bool, seed: int, envs: int
) -> EvalResult:
    """`episodes` episodes of the JAX env `env` in one jitted loop (Anakin's evaluator, the
    policy as its one seed), `envs` at a time (0: one each)."""
    evaluator = JaxEvaluator(env, policy.agent.actor, episodes, seed, envs)
    return evaluator.run(jax.tree.map(lambda x: np.asarray(x)[None], policy.params), greedy)
