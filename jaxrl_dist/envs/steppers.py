"""One Python env as a worker process steps it (`process_pool.py`): `reset(seed)` and
`step(action)` return `(obs, reward, terminated, truncated, extra)` in the agent's arrays,
checked against the env's declared spaces on every call (`ObservationError`).

- `GymStepper`: a gymnasium `Env`: `obs` as `SpaceAdapter` converts it, `reward` a float,
  `extra` None.
- `AecStepper` and `ParallelStepper` (`pettingzoo_env.py`): a PettingZoo game, as an EnvPool
  game or multi-agent task returns it.
"""

from __future__ import annotations

from typing import Any

from jaxrl_dist.envs.spaces import SpaceAdapter


class ObservationError(Exception):
    """An env broke its declared spaces; the message says how (the worker adds the env)."""


def checked(adapter: SpaceAdapter, raw: Any) -> Any:
    """`raw` converted by `adapter`, after checking it against the space (ObservationError)."""
    problem = adapter.observation_problem(raw)
    if problem:
        raise ObservationError(problem)
    return adapter.observation(raw)


class GymStepper:
    """A gymnasium env (module doc)."""

    def __init__(self, env: Any):
        self.env = env
        self.adapter = SpaceAdapter(env.observation_space, env.action_space)

    def reset(self, seed: int | None) -> tuple:
        raw, _ = self.env.reset(seed=seed)
        return checked(self.adapter, raw), 0.0, False, False, None

    def step(self, action: Any) -> tuple:
        raw, reward, terminated, truncated, _ = self.env.step(self.adapter.env_action(action))
        return checked(self.adapter, raw), float(reward), bool(terminated), bool(truncated), None

    def render(self) -> Any:
        return self.env.render()


def make_stepper(env: Any) -> Any:
    """The stepper for `env`: a PettingZoo AEC or Parallel env, else a gymnasium env."""
    kind = type(env).__mro__
    names = {f"{c.__module__}.{c.__qualname__}" for c in kind}
    if any(n.startswith("pettingzoo.") for n in names):
        from jaxrl_dist.envs.pettingzoo_env import pettingzoo_stepper

        return pettingzoo_stepper(env)
    return GymStepper(env)
