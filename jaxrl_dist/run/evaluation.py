"""Evaluation on separate EnvPool instances with their own seeds.

Each of the `num_episodes` envs contributes exactly its first episode, so short episodes are not
over-counted (taking the first N episodes to finish across envs would bias the mean low).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import jax
import numpy as np

from jaxrl_dist.agents.base import ActorCore, ActorIdentity
from jaxrl_dist.envs import derive_seed, make_env
from jaxrl_dist.learning.mesh import local_replica

EVAL_SEED_PURPOSE = 2  # derive_seed path: eval envs never share a stream with actors


@dataclasses.dataclass(frozen=True)
class EvalResult:
    """The episodes of one evaluation.

    Attributes:
      returns: `[episodes, agents]` float64 undiscounted returns (game scores where EnvPool
        reports unclipped rewards); `agents` is 1 for single-agent envs.
      lengths: `[episodes]` int64 episode lengths in agent steps.
    """

    returns: np.ndarray
    lengths: np.ndarray

    def stats(self) -> dict[str, float]:
        """Mean, std, min and max return (over episodes and agents) and mean length."""
        return {
            "return": float(self.returns.mean()),
            "return_std": float(self.returns.std()),
            "return_min": float(self.returns.min()),
            "return_max": float(self.returns.max()),
            "length": float(self.lengths.mean()),
        }


def env_policies(core: ActorCore) -> tuple[Callable, Callable]:
    """The jitted `greedy(params, obs [B, ...])` and `sample(params, obs, key)`, each returning
    the env actions `[B, ...]` (`core.env_action` of the policy's choice); `sample` acts from a
    fresh actor state drawn from `key` (actor 0 of 1)."""

    def sample(params, obs, key):
        state = core.init_state(ActorIdentity(0, 1), obs.shape[0], key)
        return core.env_action(core.act(params, obs, state)[0])

    greedy = jax.jit(lambda p, o: core.env_action(core.greedy_act(p, o)))
    return greedy, jax.jit(sample)


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

    def __init__(
        self,
        env_id: str,
        env_kwargs: dict[str, Any],
        num_episodes: int,
        seed: int,
        core: ActorCore,
        device: jax.Device,
    ):
        self._env = make_env(
            env_id, env_kwargs, num_episodes, num_episodes, derive_seed(seed, EVAL_SEED_PURPOSE)
        )
        self._num = num_episodes
        self._device = device
        self._greedy, self._sample = env_policies(core)
        self._key = jax.device_put(
            jax.random.PRNGKey(derive_seed(seed, EVAL_SEED_PURPOSE, 1)), device
        )

    def run(
        self, params, greedy: bool = True, abort: Callable[[], bool] = lambda: False
    ) -> EvalResult | None:
        """Plays one episode per env and returns them; None if `abort()` turned true first
        (checked every step: a signal must not wait for a long Atari evaluation)."""
        params = jax.device_put(local_replica(params), self._device)
        obs, _ = self._env.reset()
        episodes = FirstEpisodes(self._num)
        while not episodes.finished.all():
            if abort():
                return None
            if greedy:
                action = self._greedy(params, obs)
            else:
                self._key, sub = jax.random.split(self._key)
                action = self._sample(params, obs, sub)
            obs, reward, terminated, truncated, info = self._env.step(np.asarray(action))
            # The unclipped game score where EnvPool reports it.
            episodes.add(info.get("reward", reward), np.logical_or(terminated, truncated))
        return episodes.result()

    def close(self) -> None:
        self._env.close()
