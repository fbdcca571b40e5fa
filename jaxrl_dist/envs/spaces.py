"""Gymnasium spaces as the networks see them: an `EnvSpec`, and the observation and action
conversions a Python env's worker applies (`envs/steppers.py`).

Observations:
- Box of any rank: as is (float64 narrowed to float32; JAX runs without x64);
- Discrete(n): one-hot `[n]` float32; MultiDiscrete: its one-hots concatenated; MultiBinary:
  flattened to float32;
- Dict and Tuple: every leaf converted as above, flattened and concatenated (Dict keys in
  gymnasium's sorted order) into one float32 vector.

Actions: Discrete(n, start) (the agent picks 0..n-1; `start` is added for the env) and Box of
rank 1 (continuous agents, within its bounds). Anything else is refused before the run.
"""

from __future__ import annotations

from typing import Any

import numpy as np

SUPPORTED = (
    "observations: Box, Discrete, MultiDiscrete, MultiBinary, Dict and Tuple of those; "
    "actions: Discrete and rank-1 Box"
)


def _space_name(space: Any) -> str:
    return f"{type(space).__name__}{getattr(space, 'shape', '') or ''}"


def _leaf_problem(space: Any) -> str | None:
    from gymnasium import spaces

    if isinstance(space, spaces.Box | spaces.Discrete | spaces.MultiDiscrete | spaces.MultiBinary):
        return None
    if isinstance(space, spaces.Dict | spaces.Tuple):
        for sub in space.spaces.values() if isinstance(space, spaces.Dict) else space.spaces:
            problem = _leaf_problem(sub)
            if problem:
                return problem
        return None
    return _space_name(space)


def spaces_problem(observation_space: Any, action_space: Any) -> str | None:
    """What of these spaces jaxrl_dist cannot learn on (one phrase), or None."""
    from gymnasium import spaces

    bad = _leaf_problem(observation_space)
    if bad:
        return f"its observation space {bad} is not supported ({SUPPORTED})"
    if isinstance(action_space, spaces.Discrete):
        return None
    if isinstance(action_space, spaces.Box) and len(action_space.shape) == 1:
        if np.all(np.isfinite(action_space.low)) and np.all(np.isfinite(action_space.high)):
            return None
        return "its Box action space has infinite bounds (give it finite low and high)"
    return f"its action space {_space_name(action_space)} is not supported ({SUPPORTED})"


def _flat_size(space: Any) -> int:
    from gymnasium import spaces

    if isinstance(space, spaces.Discrete):
        return int(space.n)
    if isinstance(space, spaces.MultiDiscrete):
        return int(np.sum(space.nvec))
    if isinstance(space, spaces.Dict):
        return sum(_flat_size(s) for s in space.spaces.values())
    if isinstance(space, spaces.Tuple):
        return sum(_flat_size(s) for s in space.spaces)
    return int(np.prod(space.shape))


def _flat(space: Any, x: Any) -> np.ndarray:
    """One observation of `space` as a flat float32 vector."""
    from gymnasium import spaces

    if isinstance(space, spaces.Discrete):
        out = np.zeros(space.n, np.float32)
        out[int(x) - int(space.start)] = 1.0
        return out
    if isinstance(space, spaces.MultiDiscrete):
        x = np.asarray(x).reshape(-1) - np.asarray(space.start).reshape(-1)
        nvec = np.asarray(space.nvec).reshape(-1)
        out = np.zeros(int(nvec.sum()), np.float32)
        out[np.concatenate([[0], np.cumsum(nvec)[:-1]]) + x] = 1.0
        return out
    if isinstance(space, spaces.Dict):
        return np.concatenate([_flat(s, x[k]) for k, s in space.spaces.items()])
    if isinstance(space, spaces.Tuple):
        return np.concatenate([_flat(s, v) for s, v in zip(space.spaces, x, strict=True)])
    return np.asarray(x, np.float32).reshape(-1)


class SpaceAdapter:
    """The conversions between a gymnasium env's spaces and the agent's arrays (module doc)."""

    def __init__(self, observation_space: Any, action_space: Any):
        from gymnasium import spaces

        self.observation_space, self.action_space = observation_space, action_space
        self._box = isinstance(observation_space, spaces.Box)
        if self._box:
            dtype = np.dtype(observation_space.dtype)
            self.obs_dtype = np.dtype(np.float32) if dtype == np.float64 else dtype
            self.obs_shape = tuple(observation_space.shape)
        else:
            self.obs_dtype = np.dtype(np.float32)
            self.obs_shape = (_flat_size(observation_space),)
        self._discrete = isinstance(action_space, spaces.Discrete)
        self._start = int(action_space.start) if self._discrete else 0

    def spec(self) -> Any:
        """The `EnvSpec` of these spaces (imported here: a worker process never needs it)."""
        from jaxrl_dist.envs.envpool_env import EnvSpec

        if self._discrete:
            return EnvSpec(self.obs_shape, self.obs_dtype, int(self.action_space.n))
        box = self.action_space
        return EnvSpec(
            self.obs_shape,
            self.obs_dtype,
            num_actions=0,
            action_dim=box.shape[0],
            action_low=tuple(float(v) for v in box.low),
            action_high=tuple(float(v) for v in box.high),
        )

    def observation(self, obs: Any) -> np.ndarray:
        """The env's observation as the agent's `obs_shape`/`obs_dtype` array."""
        if self._box:
            return np.asarray(obs, self.obs_dtype)
        return _flat(self.observation_space, obs)

    def observation_problem(self, raw: Any) -> str | None:
        """Why an observation breaks the env's own declared space (shape, dtype, a value
        outside a discrete space, NaN), or None; checked on every step before it is converted:
        a wrong observation stops the run instead of being trained on."""
        space = self.observation_space
        if not self._box:
            if not space.contains(raw):
                return f"returned the observation {raw!r:.80}, outside its space {space}"
            return None
        given = np.asarray(raw)
        if given.shape != self.obs_shape:
            return (
                f"returned an observation of shape {given.shape}; its space says {self.obs_shape}"
            )
        if not np.can_cast(given.dtype, space.dtype, "same_kind"):
            return f"returned a {given.dtype} observation; its space says {space.dtype}"
        if given.dtype.kind == "f" and not np.all(np.isfinite(given)):
            return "returned a NaN or infinite observation"
        return None

    def env_action(self, action: Any) -> Any:
        """The agent's action for one env as the env takes it."""
        if self._discrete:
            return int(action) + self._start
        return np.asarray(action, self.action_space.dtype)


class ObservationError(Exception):
    """An env broke its declared spaces; the message says how (the worker adds the env)."""


def checked(adapter: SpaceAdapter, raw: Any) -> Any:
    """`raw` converted by `adapter`, after checking it against the space (ObservationError)."""
    problem = adapter.observation_problem(raw)
    if problem:
        raise ObservationError(problem)
    return adapter.observation(raw)
