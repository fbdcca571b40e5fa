"""What every evaluator shares: the `Evaluator` protocol, its result (`EvalResult`), a game's
statistics, and the policy an evaluator plays with (`EvalActing`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, NamedTuple, Protocol, runtime_checkable

import jax
import numpy as np

from jaxrl_dist.agents.base import ActorCore, env_policies, evaluation_state, row_policies
from jaxrl_dist.envs import derive_seed, make_env
from jaxrl_dist.envs.workers import START_TIMEOUT_S
from jaxrl_dist.types import local_replica

EVAL_SEED_PURPOSE = 2  # derive_seed path: eval envs never share a stream with actors


@runtime_checkable
class Evaluator(Protocol):
    """What every evaluator is (`pools.py`'s on EnvPool and Python pools, `xla_loop.py`'s inside
    the XLA actor loop, `jax_envs.py`'s in JAX, `round_robin.RoundRobin` over several agents):
    `run` plays the episodes of an evaluation with `params` (a dict `{name: params}` for several
    agents) and returns them, or None when `abort()` turned true first (checked every step: a
    signal must not wait for a long evaluation); `at_update` is the update of the params, for
    evaluators whose episodes are drawn from it. An evaluator may also have
    `warm_up(params, greedy)`, which compiles its policy before the first evaluation."""

    def run(
        self,
        params: Any,
        greedy: bool = True,
        abort: Callable[[], bool] = lambda: False,
        at_update: int = 0,
    ) -> EvalResult | None: ...

    def close(self) -> None: ...


class EvalSetup(NamedTuple):
    """What every EnvPool evaluator is built from: the env, how many episodes, the run's seed,
    the agent's actor half, the device it acts on, how many envs play the episodes (0:
    one per episode; `EnvEpisodes` shares them out), and how long a Python env's worker may
    take to start (`config.sebulba.env_start_timeout_s`)."""

    env_id: str
    env_kwargs: dict[str, Any]
    episodes: int
    seed: int
    core: ActorCore
    device: jax.Device
    envs: int = 0
    start_timeout_s: float = START_TIMEOUT_S

    @property
    def num_envs(self) -> int:
        return self.envs or self.episodes

    def pool(self) -> Any:
        """The evaluation's sync EnvPool of `num_envs` envs, seeded apart from the actors'."""
        seed = derive_seed(self.seed, EVAL_SEED_PURPOSE)
        n = self.num_envs
        return make_env(
            self.env_id, self.env_kwargs, n, n, seed=seed, start_timeout_s=self.start_timeout_s
        )

    def acting(self) -> EvalActing:
        return EvalActing(self.core, self.device, self.seed)


def eval_setup(config: Any, core: Any, device: jax.Device) -> EvalSetup:
    """The `EvalSetup` of a run's evaluations (`config.eval_env`, `eval_episodes`, `seed`,
    `eval_envs`, `env_start_timeout_s`) for the actor half `core` on `device`."""
    env_id, kwargs = config.eval_env
    return EvalSetup(
        env_id,
        kwargs,
        config.eval_episodes,
        config.seed,
        core,
        device,
        config.eval_envs,
        config.sebulba.env_start_timeout_s,
    )


def env_of_episode(num: int, envs: int) -> np.ndarray:
    """`[num]` the env that plays each episode: env `e` plays episodes `e, e + envs, ...`."""
    return np.arange(num) % envs


def finishing_order(lengths: np.ndarray, episodes: int, envs: int) -> np.ndarray:
    """The order in which the episodes `[S * episodes]` (S seeds' evaluations one after the
    other, or one) of lengths `lengths` finished, envs stepping together: env `e` of a seed
    plays its episodes `e, e + envs, ...` one after the other, each after a reset step. Ties
    (episodes ending at the same step) go by index."""
    index = np.arange(len(lengths))
    group = (index // episodes) * envs + env_of_episode(episodes, envs)[index % episodes]
    ends = np.zeros(len(lengths), np.int64)
    for g in np.unique(group):  # in index order within an env: the order it played them
        rows = index[group == g]
        ends[rows] = np.cumsum(np.asarray(lengths)[rows] + 1)
    return np.lexsort((index, ends))


class EnvEpisodes:
    """`num` episodes played on `envs` envs stepped together (a synchronous pool; `envs`
    defaults to `num`): env `e` plays episodes `e, e + envs, e + 2 envs, ...` (< `num`), a share
    fixed in advance, so short episodes are not over-counted (taking the first `num` episodes
    to finish across envs would bias the mean low). The step after an episode's end is the
    env's reset step (EnvPool's semantics): it belongs to no episode."""

    def __init__(self, num: int, envs: int = 0):
        self._num, self._envs = num, envs or num
        self.returns: np.ndarray | None = None  # [num, agents], shaped by the first reward
        self.lengths = np.zeros(num, np.int64)
        self._slot = np.arange(self._envs)  # the episode each env plays (>= num: its share is done)
        self._resetting = np.zeros(self._envs, bool)

    @property
    def done(self) -> bool:
        return bool((self._slot >= self._num).all())

    def add(self, reward: np.ndarray, done: np.ndarray) -> None:
        """One step's rewards `[envs]` or `[envs, agents]` and episode ends `[envs]`."""
        reward = np.asarray(reward, np.float64).reshape(len(done), -1)
        if self.returns is None:
            self.returns = np.zeros((self._num, reward.shape[1]))
        live = (self._slot < self._num) & ~self._resetting
        self.returns[self._slot[live]] += reward[live]
        self.lengths[self._slot[live]] += 1
        ended = live & np.asarray(done, bool)
        self._slot[ended] += self._envs
        self._resetting = ended

    def result(self) -> EvalResult:
        return EvalResult(self.returns, self.lengths)


@dataclasses.dataclass(frozen=True)
class EvalResult:
    """The episodes of one evaluation.

    Attributes:
      returns: `[episodes, agents]` float64 undiscounted returns (game scores where EnvPool
        reports unclipped rewards); `agents` is 1 for single-agent envs; in a turn-based game
        against an opponent, the learner's return in the seat it played.
      lengths: `[episodes]` int64 episode lengths in agent steps (moves of a game).
      extra: more statistics for the log and summary (a game's win, draw and loss rates).
      seats: `[episodes]` the learner's seat in each game of a turn-based game, else None.
    """

    returns: np.ndarray
    lengths: np.ndarray
    extra: dict[str, float] = dataclasses.field(default_factory=dict)
    seats: np.ndarray | None = None

    def stats(self) -> dict[str, float]:
        """Mean, std, min and max return (over episodes and agents) and mean length."""
        return {
            "return": float(self.returns.mean()),
            "return_std": float(self.returns.std()),
            "return_min": float(self.returns.min()),
            "return_max": float(self.returns.max()),
            "length": float(self.lengths.mean()),
            **self.extra,
        }


def game_stats(returns: np.ndarray, seat: np.ndarray, lengths: np.ndarray) -> EvalResult:
    """Games' `[n]` learner returns, learner seats and lengths (moves) as an `EvalResult`, with
    the win, draw and loss rates and the mean return in each seat."""
    returns = np.asarray(returns, np.float64)
    extra = {
        "win_rate": float(np.mean(returns > 0)),
        "draw_rate": float(np.mean(returns == 0)),
        "loss_rate": float(np.mean(returns < 0)),
    }
    for s in np.unique(seat):
        extra[f"return_seat{s}"] = float(returns[seat == s].mean())
    extra["return_worst_seat"] = min(v for k, v in extra.items() if k.startswith("return_seat"))
    return EvalResult(returns[:, None], np.asarray(lengths, np.int64), extra, np.asarray(seat))


class EvalActing:
    """An evaluator's policy: the params on its device, greedy or sampled actions, and the
    per-env actor state carried from step to step (a recurrent policy's memory; its own key
    stream, seeded from the run's seed), fresh at every evaluation (`start`): `state`, which
    an evaluator stepping inside XLA carries itself."""

    def __init__(self, core: ActorCore, device: jax.Device, seed: int):
        self._core, self._device = core, device
        self._greedy, self._sample = env_policies(core)
        self._at_rows: tuple | None = None  # row_policies(core), built on first use
        self._key = jax.random.PRNGKey(derive_seed(seed, EVAL_SEED_PURPOSE, 1))
        self.state: Any = None

    def start(self, params: Any, rows: int) -> Any:
        """The params on the device; a fresh actor state for `rows` envs."""
        self._key, sub = jax.random.split(self._key)
        self.state = jax.device_put(evaluation_state(self._core, rows, sub), self._device)
        return jax.device_put(local_replica(params), self._device)

    def actions(self, params: Any, obs: Any, greedy: bool, first: np.ndarray) -> jax.Array:
        """Actions for `obs [rows, ...]`; `first [rows]` marks the envs whose observation
        starts an episode."""
        policy = self._greedy if greedy else self._sample
        action, self.state = policy(params, obs, self.state, first)
        return action

    def actions_at(
        self, params: Any, obs: Any, greedy: bool, rows: np.ndarray, first: np.ndarray
    ) -> jax.Array:
        """Actions for `obs [n, ...]` of the envs (streams) `rows [n]` of the state, each from
        its own memory (`agents/base.py`: `row_policies`); a padding row may repeat."""
        if self._at_rows is None:
            self._at_rows = row_policies(self._core)
        policy = self._at_rows[0 if greedy else 1]
        action, self.state = policy(params, obs, self.state, rows, first)
        return action
