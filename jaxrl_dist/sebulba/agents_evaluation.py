"""Evaluating several agents of one run (`config.agents`): each against the run's opponent and
against each other in a turn-based game (`MultiAgentEvaluator`), or each in its own slots of a
simultaneous-move task (`SlotEvaluator`). Same interface as `evaluation.Evaluator`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import numpy as np

from jaxrl_dist.acting.opponent_pool import snapshot_policy
from jaxrl_dist.envs import derive_seed
from jaxrl_dist.envs.agents import agent_rewards, agent_rows
from jaxrl_dist.envs.games import Player
from jaxrl_dist.run.evaluator import (
    EVAL_SEED_PURPOSE,
    EnvEpisodes,
    EvalActing,
    EvalResult,
    EvalSetup,
    agents_result,
)
from jaxrl_dist.sebulba.evaluation import GameEvaluator


def agents_evaluator(config: Any, lanes: list[Any], device: jax.Device, num_players: int) -> Any:
    """The evaluator of a run of several agents (`lanes`: each one's `Lane`, in
    `config.agents` order): `SlotEvaluator` on a simultaneous-move task, else
    `MultiAgentEvaluator`."""
    if config.agent_slots:
        cores = {lane.name: lane.agent.actor for lane in lanes}
        return SlotEvaluator(config, cores, device, config.agent_slots)
    players = {lane.name: (lane.agent.actor, lane.greedy) for lane in lanes}
    return MultiAgentEvaluator(config, players, device, num_players)


class MultiAgentEvaluator:
    """Several agents of one run (`config.agents`) in a turn-based game: each against the run's
    evaluation opponent (`config.seats.eval_opponent`) taking each seat in turn, then each pair
    against each other. `run(params: {name: params}, ...)`'s returns are `[episodes, agents]`
    (each agent's against the opponent, in `config.agents` order: what `reward_metric` sees);
    its statistics are each agent's as `NAME/<stat>`, each pair's as `A_vs_B/<stat>` (A's
    side), and `return_worst_seat`, the weakest agent's weaker seat. Same interface as
    `Evaluator`."""

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
            env_id,
            kwargs,
            config.eval_episodes,
            config.seed,
            core,
            device,
            config.eval_envs,
            config.env_start_timeout_s,
        )
        rows = config.num_eval_envs
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
                player = ParamsPlayer(snapshot_policy(core_b, device, rows, True, key))
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
        def alone(name: str) -> EvalResult | None:
            return self._alone[name].run(params[name], greedy, abort, at_update)

        def pair(a: str, b: str) -> EvalResult | None:
            self._others[f"{a}_vs_{b}"].params = jax.device_put(params[b])
            return self._pairs[(a, b)].run(params[a], greedy, abort, at_update)

        return agents_result(self._names, alone, pair)

    def close(self) -> None:
        for evaluator in [*self._alone.values(), *self._pairs.values()]:
            evaluator.close()


class ParamsPlayer(Player):
    """Plays a seat with `params` set before each evaluation (another agent's, greedy)."""

    def __init__(self, act: Callable[[Any, Any, Any], Any]):
        self._act, self.params = act, None

    def act(self, obs: np.ndarray, legal_mask: np.ndarray, games: np.ndarray) -> np.ndarray:
        return np.asarray(self._act(self.params, obs, legal_mask), np.int32)


class SlotEvaluator:
    """Several agents of one run on a simultaneous-move task (`config.agent_slots`): agent `i`
    of every evaluation env is played by agent `slots[i]` with its params. `run(params: {name:
    params}, ...)`'s returns are `[episodes, agents]`, one column per slot (what
    `reward_metric` sees), with each agent's statistics over its slots (`NAME/return`,
    `NAME/return_std`, ...) beside the run's. Same interface as `Evaluator`."""

    def __init__(
        self, config: Any, cores: dict[str, Any], device: jax.Device, slots: tuple[str, ...]
    ):
        env_id, kwargs = config.eval_env
        setup = EvalSetup(
            env_id,
            kwargs,
            config.eval_episodes,
            config.seed,
            None,
            device,
            config.eval_envs,
            config.env_start_timeout_s,
        )
        self._env, self._num, self._slots = setup.pool(), config.eval_episodes, slots
        self._envs = setup.num_envs
        self._acting = {name: EvalActing(core, device, config.seed) for name, core in cores.items()}

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
            action = np.zeros((self._envs, agents), np.int32)
            for name, acting in self._acting.items():  # each acts on every row, keeps its own
                mine = np.asarray(acting.actions(placed[name], every, greedy, first))
                mine = mine.reshape(self._envs, agents)
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
