"""Evaluation on separate EnvPool instances with their own seeds.

Each env plays a share of the episodes fixed in advance (`evaluation/base.py`'s `EnvEpisodes`; by
default one env per episode, its first), so short episodes are not over-counted (taking the
first N episodes to finish across envs would bias the mean low).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import numpy as np

from jaxrl_dist.envs import derive_seed, xla_loop_problem
from jaxrl_dist.envs.agents import agent_rewards, agent_rows
from jaxrl_dist.envs.games import Player
from jaxrl_dist.envs.seats import LEARNER, GameResult, SeatedGame
from jaxrl_dist.evaluation.base import (
    EVAL_SEED_PURPOSE,
    EnvEpisodes,
    EvalResult,
    EvalSetup,
    env_of_episode,
    game_stats,
)
from jaxrl_dist.evaluation.opponents import named_player
from jaxrl_dist.evaluation.xla_loop import XlaEvaluator
from jaxrl_dist.types import pad_request


class PoolEvaluator:
    """Greedy or sampled episodes of the current params on a dedicated pool (EnvPool, or a
    Python source's workers). An `Evaluator`."""

    def __init__(self, setup: EvalSetup, num_agents: int = 1):
        self._env = setup.pool()
        self._num, self._envs, self._agents = setup.episodes, setup.num_envs, num_agents
        self._acting = setup.acting()

    def run(
        self,
        params,
        greedy: bool = True,
        abort: Callable[[], bool] = lambda: False,
        at_update: int = 0,
    ) -> EvalResult | None:
        """Plays the episodes and returns them; None if `abort()` turned true first
        (checked every step: a signal must not wait for a long Atari evaluation)."""
        params = self._acting.start(params, self._envs * self._agents)
        obs, _ = self._env.reset()
        episodes = EnvEpisodes(self._num, self._envs)
        first = np.ones(self._envs * self._agents, bool)
        was_last = np.zeros_like(first)  # obs ended an episode: the next obs starts one
        while not episodes.done:
            if abort():
                return None
            if self._agents > 1:  # one row per agent, `[episodes, agents]` returns
                action = self._acting.actions(params, agent_rows(obs), greedy, first)
                action = np.asarray(action)
                action = action.reshape(self._envs, self._agents, *action.shape[1:])
            else:
                action = self._acting.actions(params, obs, greedy, first)
            obs, reward, terminated, truncated, info = self._env.step(np.asarray(action))
            # The unclipped game score where EnvPool reports it.
            reward = info.get("reward", reward)
            if self._agents > 1:
                reward = agent_rewards(reward, self._agents, team=False)
            ended = np.logical_or(terminated, truncated)
            episodes.add(reward, ended)
            first, was_last = was_last, np.repeat(ended, self._agents)
        return episodes.result()

    def warm_up(self, params, greedy: bool = True) -> None:
        """Compiles the policy on the reset observations (a step of no episode), so the first
        evaluation does not compile while training runs beside it."""
        obs, _ = self._env.reset()
        if self._agents > 1:
            obs = agent_rows(obs)
        params = self._acting.start(params, self._envs * self._agents)
        first = np.ones(self._envs * self._agents, bool)
        jax.block_until_ready(self._acting.actions(params, obs, greedy, first))

    def close(self) -> None:
        self._env.close()


class GameEvaluator:
    """The learner against an opponent in a turn-based game, taking each seat in turn (env
    `e`'s games: the learner in seat `e % players`); env `e` plays games `e, e + envs, ...` of
    the `num_episodes` (`EnvEpisodes`' shares; by default one env per game, its first).
    `opponent` names it (`evaluation/opponents.py`: scripted or "checkpoint:PATH[@STEP]"); `player`,
    if given, plays it instead (a pool snapshot). An `Evaluator`."""

    def __init__(
        self, setup: EvalSetup, *, opponent: str, num_players: int, player: Player | None = None
    ):
        self._pool = setup.pool()
        self._num, self._envs = setup.episodes, setup.num_envs
        rng = np.random.default_rng(derive_seed(setup.seed, EVAL_SEED_PURPOSE, 2))
        player = player or named_player(opponent, setup.env_id, self._envs, rng)
        self._players = {opponent: player}
        self._roles = [
            tuple(LEARNER if s == e % num_players else opponent for s in range(num_players))
            for e in range(self._envs)
        ]
        self._acting = setup.acting()

    def run(
        self,
        params,
        greedy: bool = True,
        abort: Callable[[], bool] = lambda: False,
        at_update: int = 0,
    ) -> EvalResult | None:
        params = self._acting.start(params, self._envs + 1)  # row `envs`: padding
        for player in self._players.values():
            player.restart()
        env = SeatedGame(self._pool, self._roles, self._players)
        env.async_reset()
        env_of = env_of_episode(self._num, self._envs)
        games: list[list[GameResult]] = [[] for _ in range(self._envs)]
        share = np.bincount(env_of, minlength=self._envs)  # each env's games
        while any(len(g) < n for g, n in zip(games, share, strict=True)):
            if abort():
                self._drain()
                return None
            obs, _, _, _, info = env.recv()
            n = len(info["env_id"])
            # A stream's first turn in a game starts its memory (a recurrent policy's).
            starts = info["elapsed_step"] == 0
            padded, rows, first = pad_request(obs, info["env_id"], starts, self._envs, self._envs)
            action = self._acting.actions_at(params, padded, greedy, rows, first)
            env.send(np.asarray(action)[:n], info["env_id"])
            for result in env.finished:
                games[result.game].append(result)
            env.finished.clear()
        self._drain()
        return game_result([games[e][i // self._envs] for i, e in enumerate(env_of)])

    def _drain(self) -> None:
        """Receives the step every game has in flight (after each `send` all of them do), so
        the next run's reset starts from a pool with nothing pending."""
        self._pool.recv()

    def close(self) -> None:
        self._pool.close()


def game_result(games: list[GameResult]) -> EvalResult:
    """The learner's return and the length of each game, with its win, draw and loss rates and
    its mean return in each seat."""
    seat = np.array([r.roles.index(LEARNER) for r in games])
    returns = np.array([r.returns[s] for r, s in zip(games, seat, strict=True)], np.float64)
    return game_stats(returns, seat, np.array([r.length for r in games], np.int64))


def make_evaluator(
    setup: EvalSetup,
    *,
    num_players: int = 1,
    opponent: str = "random",
    num_agents: int = 1,
    player: Player | None = None,
    in_xla: bool = False,
) -> Any:
    """`GameEvaluator` against `opponent` for a turn-based game (`num_players > 1`), else
    `Evaluator`: a run's evaluations and `scripts/evaluate.py` choose alike. `in_xla`: an
    `XlaEvaluator` (the same episodes, stepped inside XLA) where the env allows it (evaluation
    beside training)."""
    plain = num_players == 1 and num_agents == 1
    if in_xla and plain and not xla_loop_problem(setup.env_id, setup.env_kwargs):
        return XlaEvaluator(setup)
    if num_players > 1:
        return GameEvaluator(setup, opponent=opponent, num_players=num_players, player=player)
    return PoolEvaluator(setup, num_agents)
