"""`env_kwargs["obs_indices"]`: jaxrl_dist's own env option, a partially observed variant of any
env with vector observations.

`obs_indices=(0, 2)` keeps entries 0 and 2 of each observation and drops the rest: CartPole's
cart position and pole angle, its velocities hidden, so a policy must remember earlier
observations to act well (the memory task of the recurrent configs). The option travels with
`env_kwargs` wherever the env is made (actors, evaluators, `load_policy`, `scripts/evaluate.py`,
the Anakin runtime's JAX env), so a checkpoint is always played on the env it learned.
"""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np

OBS_INDICES = "obs_indices"


def split_obs_indices(env_kwargs: dict[str, Any]) -> tuple[dict[str, Any], tuple[int, ...] | None]:
    """(the env's own options, the kept observation entries or None)."""
    kwargs = dict(env_kwargs)
    indices = kwargs.pop(OBS_INDICES, None)
    return kwargs, None if indices is None else tuple(indices)


def obs_indices_problem(indices: Any, obs_shape: tuple[int, ...]) -> str | None:
    """A one-line problem with `obs_indices` for observations of `obs_shape`, or None."""
    if indices is None:
        return None
    if len(obs_shape) != 1:
        return (
            f"config.env_kwargs.obs_indices keeps entries of vector observations; this env's are "
            f"{list(obs_shape)}: drop config.env_kwargs.obs_indices"
        )
    ok = all(isinstance(i, numbers.Integral) and not isinstance(i, bool) for i in indices)
    if not indices or not ok or len(set(indices)) != len(indices):
        return f"config.env_kwargs.obs_indices={list(indices)} must be distinct ints, e.g. (0, 2)"
    if min(indices) < 0 or max(indices) >= obs_shape[0]:
        return (
            f"config.env_kwargs.obs_indices={list(indices)} must be in [0, {obs_shape[0]}): the "
            f"observations have {obs_shape[0]} entries"
        )
    return None


class ObservationSubset:
    """An EnvPool whose observations (`reset`, `recv`, `step`) keep `indices` only; everything
    else is the pool's."""

    def __init__(self, pool: Any, indices: tuple[int, ...]):
        self._pool, self._indices = pool, np.asarray(indices)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._pool, name)

    def _cut(self, obs: np.ndarray) -> np.ndarray:
        return np.ascontiguousarray(obs[:, self._indices])

    def reset(self, *args, **kwargs):
        obs, info = self._pool.reset(*args, **kwargs)
        return self._cut(obs), info

    def recv(self, *args, **kwargs):
        obs, *rest = self._pool.recv(*args, **kwargs)
        return (self._cut(obs), *rest)

    def step(self, *args, **kwargs):
        obs, *rest = self._pool.step(*args, **kwargs)
        return (self._cut(obs), *rest)
