"""Evaluation on separate EnvPool instances with their own seeds.

Each of the `num_episodes` envs contributes exactly its first episode, so short episodes are not
over-counted (taking the first N episodes to finish across envs would bias the mean low).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import numpy as np

from jaxrl_dist.acting.opponent_pool import snapshot_policy
from jaxrl_dist.envs import derive_seed, xla_loop_problem
from jaxrl_dist.envs.agents import agent_rewards, agent_rows
from jaxrl_dist.envs.games import Player
from jaxrl_dist.envs.seats import LEARNER, GameResult, SeatedGame
from jaxrl_dist.run.evaluator import EVAL_SEED_PURPOSE, EvalResult, EvalSetup, game_stats
from jaxrl_dist.run.opponents import named_player
from jaxrl_dist.sebulba.xla_evaluation import XlaEvaluator
from jaxrl_dist.types import pad_rows


class FirstEpisodes:
    """The first episode of each of `num` envs stepped together (a synchronous pool)."""

    def __init__(self, num: int):
        self.returns: np.ndarray | None = None  # [num, agents], shaped by the first reward
        self.lengths = np.zeros(num, np.int64)
        self.finished = np.zeros(num, bool)

    def add(self, reward: np.ndarray, done: np.ndarray) -> None:
        """One step's rewards `[num]` or `[num, agents]` and episode ends `[num]`."""
        reward = np.asarray(reward, np.float64).reshape(len(done), -1)
        if self.returns is None:
            self.returns = np.zeros_like(reward)
        live = ~self.finished
        self.returns[live] += reward[live]
        self.lengths[live] += 1
        self.finished |= done

    def result(self) -> EvalResult:
        return EvalResult(self.returns, self.lengths)


class Evaluator:
    """Runs greedy or sampled episodes of the current params on a dedicated EnvPool."""

    def __init__(self, setup: EvalSetup, num_agents: int = 1):
        self._env = setup.pool()
        self._num, self._agents = setup.episodes, num_agents
        self._acting = setup.acting()

    def run(
        self,
        params,
        greedy: bool = True,
        abort: Callable[[], bool] = lambda: False,
        at_update: int = 0,
    ) -> EvalResult | None:
        """Plays one episode per env and returns them; None if `abort()` turned true first
        (checked every step: a signal must not wait for a long Atari evaluation)."""
        params = self._acting.start(params, self._num * self._agents)
        obs, _ = self._env.reset()
        episodes = FirstEpisodes(self._num)
        first = np.ones(self._num * self._agents, bool)
        was_last = np.zeros_like(first)  # obs ended an episode: the next obs starts one
        while not episodes.finished.all():
            if abort():
                return None
            if self._agents > 1:  # one row per agent, `[episodes, agents]` returns
                action = self._acting.actions(params, agent_rows(obs), greedy, first)
                action = np.asarray(action).reshape(self._num, self._agents)
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
        params = self._acting.start(params, self._num * self._agents)
        first = np.ones(self._num * self._agents, bool)
        jax.block_until_ready(self._acting.actions(params, obs, greedy, first))

    def close(self) -> None:
        self._env.close()


class GameEvaluator:
    """The learner against an opponent in a turn-based game, taking each seat in turn (game
    `i`: the learner in seat `i % players`); the first game of each of `num_episodes` games
    counts. `opponent` names it (`run/opponents.py`: scripted or "checkpoint:PATH[@STEP]");
    `player`, if given, plays it instead (a pool snapshot). Same interface as `Evaluator`."""

    def __init__(
        self, setup: EvalSetup, *, opponent: str, num_players: int, player: Player | None = None
    ):
        self._pool = setup.pool()
        num_episodes = setup.episodes
        rng = np.random.default_rng(derive_seed(setup.seed, EVAL_SEED_PURPOSE, 2))
        player = player or named_player(opponent, setup.env_id, num_episodes, rng)
        self._players = {opponent: player}
        self._roles = [
            tuple(LEARNER if s == i % num_players else opponent for s in range(num_players))
            for i in range(num_episodes)
        ]
        self._num = num_episodes
        self._acting = setup.acting()

    def run(
        self,
        params,
        greedy: bool = True,
        abort: Callable[[], bool] = lambda: False,
        at_update: int = 0,
    ) -> EvalResult | None:
        params = self._acting.start(params, self._num)
        env = SeatedGame(self._pool, self._roles, self._players)
        env.async_reset()
        first: dict[int, GameResult] = {}
        no_starts = np.zeros(self._num, bool)  # memoryless: seats refuse recurrent cores
        while len(first) < self._num:
            if abort():
                self._drain()
                return None
            obs, _, _, _, info = env.recv()
            padded = pad_rows(obs, self._num)  # one compiled shape
            action = self._acting.actions(params, padded, greedy, no_starts)
            env.send(np.asarray(action)[: len(info["env_id"])], info["env_id"])
            for result in env.finished:
                first.setdefault(result.game, result)
            env.finished.clear()
        self._drain()
        return game_result([first[g] for g in range(self._num)])

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
    return Evaluator(setup, num_agents)


class MultiAgentEvaluator:
    """Several agents of one run (`config.agents`) in a turn-based game: each against the run's
    evaluation opponent (`config.seats.eval_opponent`) taking each seat in turn, then each pair
    against each other. `run(params: {name: params}, ...)`'s returns are `[episodes, agents]`
    (each agent's against the opponent, in `config.agents` order: what `reward_metric` sees);
    its statistics are each agent's as `NAME/<stat>` and each pair's as `A_vs_B/<stat>` (A's
    side). Same interface as `Evaluator`."""

    def __init__(
        self,
        config: Any,
        agents: dict[str, tuple[Any, bool]],
        device: jax.Device,
        num_players: int,
    ):
        """`agents`: `{name: (actor core, greedy)}` in `config.agents` order."""
        env_id, kwargs = config.eval_env
        opponent = config.seats.eval_opponent
        setup = lambda core: EvalSetup(  # noqa: E731
            env_id, kwargs, config.eval_episodes, config.seed, core, device
        )
        self._names = list(agents)
        self._alone = {
            name: GameEvaluator(setup(core), opponent=opponent, num_players=num_players)
            for name, (core, _) in agents.items()
        }
        self._others: dict[str, ParamsPlayer] = {}
        self._pairs = {}
        for i, a in enumerate(self._names):
            for b in self._names[i + 1 :]:
                core_b = agents[b][0]
                key = jax.random.PRNGKey(derive_seed(config.seed, EVAL_SEED_PURPOSE, 3, i))
                player = ParamsPlayer(
                    snapshot_policy(core_b, device, config.eval_episodes, True, key)
                )
                self._others[f"{a}_vs_{b}"] = player
                self._pairs[(a, b)] = GameEvaluator(
                    setup(agents[a][0]), opponent=b, num_players=num_players, player=player
                )

    def run(
        self,
        params: dict[str, Any],
        greedy: bool = True,
        abort: Callable[[], bool] = lambda: False,
        at_update: int = 0,
    ) -> EvalResult | None:
        returns, lengths, extra = [], [], {}
        for name in self._names:
            result = self._alone[name].run(params[name], greedy, abort, at_update)
            if result is None:
                return None
            returns.append(result.returns[:, 0])
            lengths.append(result.lengths)
            extra.update({f"{name}/{k}": v for k, v in result.stats().items()})
        for (a, b), evaluator in self._pairs.items():
            self._others[f"{a}_vs_{b}"].params = jax.device_put(params[b])
            result = evaluator.run(params[a], greedy, abort, at_update)
            if result is None:
                return None
            extra.update({f"{a}_vs_{b}/{k}": v for k, v in result.stats().items()})
        return EvalResult(np.stack(returns, axis=1), np.mean(lengths, axis=0), extra)

    def close(self) -> None:
        for evaluator in [*self._alone.values(), *self._pairs.values()]:
            evaluator.close()


class ParamsPlayer(Player):
    """Plays a seat with `params` set before each evaluation (another agent's, greedy)."""

    def __init__(self, act: Callable[[Any, Any, Any], Any]):
        self._act, self.params = act, None

    def act(self, obs: np.ndarray, legal_mask: np.ndarray, games: np.ndarray) -> np.ndarray:
        return np.asarray(self._act(self.params, obs, legal_mask), np.int32)
