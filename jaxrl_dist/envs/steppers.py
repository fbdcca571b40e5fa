"""A Python env's worker process (`process_pool.py` starts it: `python -m
jaxrl_dist.envs.steppers FD`), and one env as it steps it: `reset(seed)` and
`step(action)` return `(obs, reward, terminated, truncated, extra)` in the agent's arrays,
checked against the env's declared spaces on every call (`ObservationError`).

- `GymStepper`: a gymnasium `Env`: `obs` as `SpaceAdapter` converts it, `reward` a float,
  `extra` None.
- `AecStepper` and `ParallelStepper` (`pettingzoo_env.py`): a PettingZoo game, as an EnvPool
  game or multi-agent task returns it.
"""

from __future__ import annotations

import multiprocessing.connection
import sys
import traceback
from collections.abc import Callable
from typing import Any

from jaxrl_dist.envs.spaces import ObservationError, SpaceAdapter, checked


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


def gymnasium_make(spec: Any, kwargs: dict[str, Any]) -> Any:
    """One env of gymnasium's registered `spec`. The Python sources' factories call this and
    `call_factory` from here, the worker's own module, so that unpickling a factory in a worker
    imports gymnasium and the user's module but not JAX (about 1 s of each worker's start)."""
    import gymnasium

    return gymnasium.make(spec, **kwargs)


def call_factory(factory: Callable[..., Any], kwargs: dict[str, Any]) -> Any:
    """`factory(**kwargs)`, with `max_episode_steps` (gymnasium.make's and EnvPool's name for
    the time limit) applied as gymnasium's TimeLimit: an env of a factory has none otherwise,
    and an episode that never ends holds its evaluation forever."""
    kwargs = dict(kwargs)
    steps = kwargs.pop("max_episode_steps", None)
    env = factory(**kwargs)
    if steps is None:
        return env
    import gymnasium

    return gymnasium.wrappers.TimeLimit(env, int(steps))


def make_stepper(env: Any) -> Any:
    """The stepper for `env`: a PettingZoo AEC or Parallel env, else a gymnasium env."""
    kind = type(env).__mro__
    names = {f"{c.__module__}.{c.__qualname__}" for c in kind}
    if any(n.startswith("pettingzoo.") for n in names):
        from jaxrl_dist.envs.pettingzoo_env import pettingzoo_stepper

        return pettingzoo_stepper(env)
    return GymStepper(env)


def _worker_main(conn: Any) -> None:
    """A worker process: builds its envs and answers step requests until told to close."""
    try:
        path, payload, name, seeds = conn.recv()
        sys.path[:] = path
        import cloudpickle

        factory = cloudpickle.loads(payload)
        envs = [make_stepper(factory()) for _ in seeds]
    except BaseException:  # noqa: BLE001  reported to the parent, which names the env
        conn.send(("error", traceback.format_exc()))
        return
    conn.send(("ready", None))
    fresh = [True] * len(envs)  # no reset yet: the first uses the env's seed
    ended = [True] * len(envs)  # the next step is a reset step
    elapsed = [0] * len(envs)
    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):  # the parent is gone (killed): nothing left to answer
            return
        if message[0] == "close":
            break
        if message[0] == "render":
            try:
                conn.send(("render", envs[0].render()))
            except Exception:  # noqa: BLE001  reported to the parent's render()
                conn.send(("error", traceback.format_exc()))
            continue
        _, local, actions, force_reset = message
        rows = []
        try:
            for j, action in zip(local, actions, strict=True):
                if ended[j] or force_reset:
                    row = envs[j].reset(seeds[j] if fresh[j] else None)
                    fresh[j], elapsed[j] = False, 0
                else:
                    row = envs[j].step(action)
                    elapsed[j] += 1
                ended[j] = row[2] or row[3]
                rows.append((*row, elapsed[j]))
        except ObservationError as e:  # not a fault a restart mends
            conn.send(("contract", f"{name} {e}"))
            return
        except BaseException:  # noqa: BLE001  the parent restarts this worker
            conn.send(("error", traceback.format_exc()))
            return
        conn.send(("step", rows))


if __name__ == "__main__":  # a worker: `python -m jaxrl_dist.envs.steppers FD`
    _worker_main(multiprocessing.connection.Connection(int(sys.argv[1])))
