"""Evaluation inside JAX: every seed's params play `num_episodes` episodes of the JAX env at once.

The same interface as the EnvPool evaluator (`run(params, greedy, abort) -> EvalResult`), so the
run's `EvalMonitor` (metric, best, hooks, stop target, logs) is shared with Sebulba.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jaxrl_dist.agents.base import ActorCore, ActorIdentity, evaluation_state
from jaxrl_dist.envs import derive_seed
from jaxrl_dist.envs.jax_envs import make_jax_env
from jaxrl_dist.envs.jax_game_parts import NetworkPlayer
from jaxrl_dist.envs.seats import AGENT_ROLE
from jaxrl_dist.evaluation.base import (
    EVAL_SEED_PURPOSE,
    EvalResult,
    env_of_episode,
    game_stats,
)
from jaxrl_dist.evaluation.round_robin import RoundRobin
from jaxrl_dist.types import local_replica


def network_player(core: ActorCore) -> NetworkPlayer:
    """How a game's network roles move with the agent's actor half: a fresh actor state of one
    row per move from its key, holding the game's memory (the recurrent core's state, fresh at
    each game; `{}` for a memoryless policy)."""

    def init(key):
        fresh = core.start_episodes(evaluation_state(core, 1, key), jnp.ones((1,), bool))
        return core.core_state(fresh)

    def state_of(key, memory):
        return core.with_core_state(evaluation_state(core, 1, key), memory)

    def sample(params, obs, key, memory):
        action, _, state = core.act(params, obs, state_of(key, memory))
        return action, core.core_state(state)

    def greedy(params, obs, key, memory):
        action, state = core.greedy_act(params, obs, state_of(key, memory))
        return action, core.core_state(state)

    return NetworkPlayer(init, sample, greedy)


def make_eval_env(config: Any, env: Any) -> Any:
    """The env evaluations play: `env` (the training env), or the config's own eval env."""
    return make_jax_env(*config.eval_env) if config.own_eval_env else env


def play_episodes(
    env: Any,
    core: ActorCore,
    params: Any,
    key: jax.Array,
    num: int,
    greedy: bool,
    others: dict[str, Any] | None = None,
    envs: int = 0,
) -> tuple[jax.Array, jax.Array]:
    """`num` episodes on `envs` envs (0: one each; env `e` plays episodes `e, e + envs, ...`, a
    share fixed in advance, as `evaluation/base.py`'s `EnvEpisodes`) -> (returns `[num]`
    float32, lengths `[num]` int32: env steps, or a game's moves where the env reports them,
    `info["plies"]`); `others`: the params of the other agents a game seats, by role
    ("agent:NAME"). The step after an episode's end is the env's reset step: a game's counts
    the new game's opening moves and reply, another env's counts nothing. Pure: vmap it over
    seeds."""
    envs = envs or num
    reset_key, act_key = jax.random.split(key)
    shared = env.init_shared(params, *([others] if others else []))
    state, ts = env.reset(jax.random.split(reset_key, envs), shared, params)
    actor = core.init_state(ActorIdentity(0, 1), envs, act_key)
    game = _is_game(ts)
    slot = jnp.arange(envs, dtype=jnp.int32)  # the episode each env plays (>= num: done)
    lengths = jnp.zeros((num,), jnp.int32)
    if game:  # a game's first reply counts
        lengths = lengths.at[slot].add(_length_of(ts), mode="drop")
    # `first`: the obs starts an episode (a recurrent policy resets its memory), which the obs
    # after one that ended an episode does (the env's reset step)
    first, ended = jnp.ones((envs,), bool), jnp.zeros((envs,), bool)  # ended: obs is an end
    start = (state, ts.obs, actor, first, ended, slot, jnp.zeros((num,)), lengths)

    def running(carry):
        return ~jnp.all(carry[5] >= num)

    def step(carry):
        state, obs, actor, first, ended, slot, returns, lengths = carry
        actor = core.start_episodes(actor, first)
        if greedy:
            action, actor = core.greedy_act(params, obs, actor)
        else:
            action, _, actor = core.act(params, obs, actor)
        state, ts = env.step(state, core.env_action(action), shared, params)
        live = slot < num
        counted = live if game else live & ~ended  # a reset step: only a game's moves count
        returns = returns.at[slot].add(jnp.where(counted, ts.reward, 0.0), mode="drop")
        lengths = lengths.at[slot].add(jnp.where(counted, _length_of(ts), 0), mode="drop")
        now_ended = ts.terminated | ts.truncated
        slot = jnp.where(live & now_ended, slot + envs, slot)
        return state, ts.obs, actor, ended, now_ended, slot, returns, lengths

    out = jax.lax.while_loop(running, step, start)
    return out[6], out[7]


def _is_game(ts: Any) -> bool:
    return isinstance(ts.info, dict) and "plies" in ts.info


def _length_of(ts: Any) -> jax.Array:
    """`[B]` what a step adds to an episode's length: a game's moves (both seats'), else 1."""
    return ts.info["plies"] if _is_game(ts) else jnp.ones(ts.reward.shape, jnp.int32)


class JaxEvaluator:
    """Greedy or sampled episodes of every seed's params (`[S, ...]` leaves) on the first local
    device; each evaluation draws fresh episodes from a key folded with the update count of its
    params (`at_update`), so a resumed run evaluates as an uninterrupted one."""

    def __init__(self, env: Any, core: ActorCore, num_episodes: int, seed: int, envs: int = 0):
        """`env`: the env evaluations play, of `envs` streams (0: `num_episodes`;
        `env.evaluation(...)`: a game's against the evaluation opponent)."""
        seats = getattr(env, "seats", None)  # a game's learner seat per env, so per episode
        self._seats = None if seats is None else seats[env_of_episode(num_episodes, len(seats))]
        self._key = jax.random.PRNGKey(derive_seed(seed, EVAL_SEED_PURPOSE))
        self._device = jax.local_devices()[0]
        self._play = {
            greedy: jax.jit(
                jax.vmap(
                    lambda p, k, o, g=greedy: play_episodes(
                        env, core, p, k, num_episodes, g, o, envs
                    ),
                    in_axes=(0, None, 0),
                )
            )
            for greedy in (True, False)
        }

    def run(
        self,
        params: Any,
        greedy: bool = True,
        abort: Callable[[], bool] = lambda: False,
        at_update: int = 0,
        others: dict[str, Any] | None = None,
    ) -> EvalResult | None:
        """`[S, episodes]` results -> an `EvalResult` of every seed's episodes (returns
        `[S * episodes, 1]`), with each seed's mean return as `seed<i>_return` (and a game's
        statistics as `seed<i>_<stat>`) when S > 1.
        `others`: the other agents' `[S, ...]` params by role, where the games seat them."""
        if abort():
            return None
        params, others = jax.device_put(local_replica((params, others or {})), self._device)
        key = jax.random.fold_in(self._key, at_update)
        returns, lengths = jax.device_get(self._play[greedy](params, key, others))
        result = self._result(returns, lengths)
        if returns.shape[0] > 1:  # each seed's return (and a game's statistics)
            for i in range(returns.shape[0]):
                seed = self._result(returns[i : i + 1], lengths[i : i + 1])
                mine = {"return": seed.stats()["return"], **seed.extra}
                result.extra.update({f"seed{i}_{k}": v for k, v in mine.items()})
        return result

    def _result(self, returns: np.ndarray, lengths: np.ndarray) -> EvalResult:
        """The `EvalResult` of `[S, episodes]` results: a game's win, draw and loss rates and
        returns per seat, as on Sebulba."""
        if self._seats is None:
            return EvalResult(
                np.asarray(returns, np.float64).reshape(-1, 1),
                np.asarray(lengths, np.int64).reshape(-1),
            )
        seats = np.broadcast_to(self._seats, returns.shape).reshape(-1)
        return game_stats(returns.reshape(-1), seats, lengths.reshape(-1))

    def close(self) -> None:
        pass


def jax_round_robin(
    envs: dict[str, Any],
    cores: dict[str, ActorCore],
    opponent: str,
    num_episodes: int,
    seed: int,
    num_envs: int = 0,
) -> RoundRobin:
    """Several agents of one run (`config.agents`) in a pgx game, every seed at once: each
    against the run's evaluation opponent taking each seat in turn, then each pair against each
    other (the second playing its policy's mode). Returns are `[S * episodes, agents]`.
    `envs`, `cores`: each agent's training env (a `SeatedJaxGame`) and actor half, in
    `config.agents` order; `num_envs`: the games played at once (0: `num_episodes`)."""
    names, streams = list(envs), num_envs or num_episodes

    def evaluator(name: str, env: Any) -> JaxEvaluator:
        return JaxEvaluator(env, cores[name], num_episodes, seed, num_envs)

    alone = {name: evaluator(name, envs[name].evaluation(streams, opponent)) for name in names}
    pairs = {}
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            role = AGENT_ROLE + b
            env = envs[a].evaluation(streams, role, {role: network_player(cores[b])})
            pairs[(a, b)] = SeatedOther(evaluator(a, env), role)
    return RoundRobin(alone, pairs)


class SeatedOther:
    """A pair's games in JAX (a `round_robin.PairEvaluator`): the other agent's params are
    handed to the game, which seats them in its role."""

    def __init__(self, evaluator: JaxEvaluator, role: str):
        self._evaluator, self._role = evaluator, role

    def run(
        self, params: Any, other: Any, greedy: bool, abort: Callable[[], bool], at_update: int
    ) -> EvalResult | None:
        return self._evaluator.run(params, greedy, abort, at_update, {self._role: other})

    def close(self) -> None:
        self._evaluator.close()


def run_evaluator(config: Any, envs: dict[str, Any], cores: dict[str, ActorCore]) -> Any:
    """A run's evaluator: `jax_round_robin` for several agents, else `JaxEvaluator` on the
    run's evaluation env (`envs`, `cores`: each agent's training env and actor half, in
    `config.agents` order), `eval_episodes` on `eval_envs` streams."""
    if len(envs) > 1:
        opponent, episodes = config.seats.eval_opponent, config.eval_episodes
        return jax_round_robin(envs, cores, opponent, episodes, config.seed, config.eval_envs)
    (env,), (core,) = envs.values(), cores.values()
    env = make_eval_env(config, env).evaluation(config.num_eval_envs, config.seats.eval_opponent)
    return JaxEvaluator(env, core, config.eval_episodes, config.seed, config.eval_envs)
