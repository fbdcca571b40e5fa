"""The start-up check's step of a Sebulba env source: one env made, reset and stepped once
through the code the run steps it with (a worker process of `process_pool.py` for a Python env,
an EnvPool for an EnvPool id), so an env that would crash the run, or not start in time, is
refused in one line before anything is written. Imports no JAX.

The action stepped is a legal one: the first legal move where the env gives a mask (a game's
`legal_action_mask`, a multi-agent task's `action_mask`), else action 0, or the point of a
continuous action space nearest 0.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from jaxrl_dist.envs.envpool_env import EnvSpec
from jaxrl_dist.envs.workers import EnvContractError, WorkerError, WorkerStartError
from jaxrl_dist.errors import one_line

PROBED: set[tuple] = set()  # (env_id, kwargs, start timeout) of envs that stepped: probed once


def probe_action(spec: EnvSpec, obs: Any, info: dict[str, Any]) -> np.ndarray:
    """A legal action for a pool of one env (module doc): `[1]`, `[1, agents]` for a
    simultaneous task, `[1, action_dim]` for continuous actions (`[1, agents, action_dim]`
    for a simultaneous task's)."""
    if "legal_action_mask" in info:  # a turn-based game: the player to move's
        return np.asarray(info["legal_action_mask"]).argmax(-1).astype(np.int32)
    if spec.continuous:  # every agent's (`[1, agents, action_dim]`), or the env's
        low, high = np.asarray(spec.action_low), np.asarray(spec.action_high)
        action = np.clip(np.zeros(spec.action_dim), low, high).astype(np.float32)
        agents = (spec.num_agents,) if spec.num_agents > 1 else ()
        return np.broadcast_to(action, (1, *agents, spec.action_dim)).copy()
    if isinstance(obs, dict) and "action_mask" in obs:  # every agent's
        return np.asarray(obs["action_mask"]).argmax(-1).astype(np.int32)
    if spec.num_agents > 1:
        return np.zeros((1, spec.num_agents), np.int32)
    return np.zeros(1, np.int32)


def probe_problem(env_id: str, make_pool: Callable[[], Any], spec: EnvSpec) -> str | None:
    """Makes a pool of one env with `make_pool()`, resets and steps it once, and closes it:
    None, or one line saying which of the three failed and why."""
    name = f"config.env_id={env_id!r}"
    pool, stage = None, "making one env"
    try:
        pool = make_pool()
        stage = "its first reset"
        obs, info = pool.reset()
        stage = "its first step"
        pool.step(probe_action(spec, obs, info))
    except WorkerStartError as e:
        return f"{name}: {_without_name(e, env_id)}"
    except WorkerError as e:
        return f"{name}: {stage} failed in a worker process: {e.reason}"
    except EnvContractError as e:
        return f"{name}: at {stage} it {_without_name(e, env_id)}"
    except Exception as e:  # noqa: BLE001  the env's own code: any error in one line
        return f"{name}: {stage} failed: {one_line(e)}"
    finally:
        if pool is not None:
            pool.close()
    return None


def _without_name(error: Exception, env_id: str) -> str:
    """A pool's message (one line) without the env's name it starts with: the caller's line
    names the env."""
    text = (str(error).strip().splitlines() or [type(error).__name__])[0]
    return text.removeprefix(f"{env_id}: ").removeprefix(f"{env_id} ")
