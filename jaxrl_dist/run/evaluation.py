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

from jaxrl_dist.agents.base import Algorithm
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


def env_policies(algorithm: Algorithm) -> tuple[Callable, Callable]:
    """The jitted `greedy(params, obs [B, ...])` and `sample(params, obs, key)`, each returning
    the env actions `[B, ...]` (`algorithm.env_action` of the policy's choice)."""
    to_env = algorithm.env_action
    greedy = jax.jit(lambda p, o: to_env(algorithm.greedy_act(p, o)))
    sample = jax.jit(lambda p, o, k: to_env(algorithm.act(p, o, k)[0]))
    return greedy, sample


class Evaluator:
    """Runs greedy or sampled episodes of the current params on a dedicated EnvPool."""

    def __init__(
        self,
        env_id: str,
        env_kwargs: dict[str, Any],
        num_episodes: int,
        seed: int,
        algorithm: Algorithm,
        device: jax.Device,
    ):
        self._env = make_env(
            env_id, env_kwargs, num_episodes, num_episodes, derive_seed(seed, EVAL_SEED_PURPOSE)
        )
        self._num = num_episodes
        self._device = device
        self._greedy, self._sample = env_policies(algorithm)
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
        returns = np.zeros(self._num, np.float64)
        lengths = np.zeros(self._num, np.int64)
        finished = np.zeros(self._num, bool)
        while not finished.all():
            if abort():
                return None
            if greedy:
                action = self._greedy(params, obs)
            else:
                self._key, sub = jax.random.split(self._key)
                action = self._sample(params, obs, sub)
            obs, reward, terminated, truncated, info = self._env.step(np.asarray(action))
            raw = info.get("reward", reward)  # unclipped game score where EnvPool reports it
            live = ~finished
            returns[live] += raw[live]
            lengths[live] += 1
            finished |= np.logical_or(terminated, truncated)
        return EvalResult(returns[:, None], lengths)

    def close(self) -> None:
        self._env.close()
