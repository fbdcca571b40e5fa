"""Evaluating several agents of one run (`config.agents`): each against the run's opponent and
against each other in a turn-based game (`game_round_robin`), or each in its own slots of a
simultaneous-move task (`SlotEvaluator`). Each an `Evaluator`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import numpy as np

from jaxrl_dist.acting.row_policy import ParamsPlayer
from jaxrl_dist.acting.seat_pools import snapshot_policy
from jaxrl_dist.envs import derive_seed
from jaxrl_dist.envs.agents import agent_rewards, agent_rows
from jaxrl_dist.evaluation.base import (
    EVAL_SEED_PURPOSE,
    EnvEpisodes,
    EvalActing,
    EvalResult,
    EvalSetup,
    eval_setup,
)
from jaxrl_dist.evaluation.pools import GameEvaluator
from jaxrl_dist.evaluation.round_robin import RoundRobin


def agents_evaluator(config: Any, lanes: list[Any], device: jax.Device, num_players: int) -> Any:
    """The evaluator of a run of several agents (`lanes`: each one's `Lane`, in
    `config.agents` order): `SlotEvaluator` on a simultaneous-move task, else
    `game_round_robin`."""
    if config.sebulba.agent_slots:
        cores = {lane.name: lane.agent.actor for lane in lanes}
        return SlotEvaluator(eval_setup(config, None, device), cores, config.sebulba.agent_slots)
    players = {lane.name: (lane.agent.actor, lane.greedy) for lane in lanes}
    return game_round_robin(config, players, device, num_players)


def game_round_robin(
    config: Any, agents: dict[str, tuple[Any, bool]], device: jax.Device, num_players: int
) -> RoundRobin:
    """Several agents of one run (`config.agents`, `{name: (actor core, greedy)}` in that
    order) in a turn-based game on pools: each against the run's evaluation opponent
    (`config.seats.eval_opponent`) taking each seat in turn, then each pair against each other
    (the second agent's greedy policy on a `ParamsPlayer`)."""
    opponent = config.seats.eval_opponent

    names = list(agents)
    alone = {
        name: GameEvaluator(
            eval_setup(config, core, device), opponent=opponent, num_players=num_players
        )
        for name, (core, _) in agents.items()
    }
    pairs = {}
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            key = jax.random.PRNGKey(derive_seed(config.seed, EVAL_SEED_PURPOSE, 3, i))
            policy = snapshot_policy(agents[b][0], device, config.num_eval_envs, True, key)
            player = ParamsPlayer(policy)
            game = GameEvaluator(
                eval_setup(config, agents[a][0], device),
                opponent=b,
                num_players=num_players,
                player=player,
            )
            pairs[(a, b)] = AgainstParams(game, player)
    return RoundRobin(alone, pairs)


class AgainstParams:
    """A pair's games on a pool (a `round_robin.PairEvaluator`): the other agent's params are
    set on its `ParamsPlayer` before each evaluation."""

    def __init__(self, game: GameEvaluator, player: ParamsPlayer):
        self._game, self._player = game, player

    def run(
        self, params: Any, other: Any, greedy: bool, abort: Callable[[], bool], at_update: int
    ) -> EvalResult | None:
        self._player.params = jax.device_put(other)
        return self._game.run(params, greedy, abort, at_update)

    def close(self) -> None:
        self._game.close()


class SlotEvaluator:
    """Several agents of one run on a simultaneous-move task (`config.sebulba.agent_slots`):
    agent `i` of every evaluation env is played by agent `slots[i]` with its params. `run(params:
    {name: params}, ...)`'s returns are `[episodes, agents]`, one column per slot (what
    `reward_metric` sees), with each agent's statistics over its slots (`NAME/return`,
    `NAME/return_std`, ...) beside the run's. An `Evaluator`."""

    def __init__(self, setup: EvalSetup, cores: dict[str, Any], slots: tuple[str, ...]):
        """`setup`: the evaluation's env, episodes, seed, device and envs (its `core` unused:
        each agent acts with its own of `cores`)."""
        self._env, self._num, self._slots = setup.pool(), setup.episodes, slots
        self._envs = setup.num_envs
        self._acting = {
            name: EvalActing(core, setup.device, setup.seed) for name, core in cores.items()
        }

    def run(
        self,
        params: dict[str, Any],
        greedy: bool = True,
        abort: Callable[[], bool] = lambda: False,
        at_update: int = 0,
    ) -> EvalResult | None:
        agents = len(self._slots)
        rows = self._envs * agents
        placed = {name: acting.start(params[name], rows) for name, acting in self._acting.items()}
        obs, _ = self._env.reset()
        episodes = EnvEpisodes(self._num, self._envs)
        first, was_last = np.ones(rows, bool), np.zeros(rows, bool)
        while not episodes.done:
            if abort():
                return None
            every = agent_rows(obs)  # env-major: env e's agent i is row e * agents + i
            action = None  # [envs, agents] indices, or [envs, agents, D] continuous actions
            for name, acting in self._acting.items():  # each acts on every row, keeps its own
                mine = np.asarray(acting.actions(placed[name], every, greedy, first))
                mine = mine.reshape(self._envs, agents, *mine.shape[1:])
                if action is None:
                    action = np.zeros_like(mine)
                for i, slot in enumerate(self._slots):
                    if slot == name:
                        action[:, i] = mine[:, i]
            obs, reward, terminated, truncated, _ = self._env.step(action)
            ended = np.logical_or(terminated, truncated)
            episodes.add(agent_rewards(reward, agents, team=False), ended)
            first, was_last = was_last, np.repeat(ended, agents)
        result, extra = episodes.result(), {}
        for name in self._acting:  # over that agent's slots: NAME/return, NAME/return_std, ...
            columns = [i for i, s in enumerate(self._slots) if s == name]
            mine = EvalResult(result.returns[:, columns], result.lengths).stats()
            extra.update({f"{name}/{k}": v for k, v in mine.items()})
        return EvalResult(result.returns, result.lengths, extra)

    def close(self) -> None:
        self._env.close()
