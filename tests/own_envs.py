"""Envs of the tests' own, defined here as a user defines theirs (`tests/test_own_envs.py`).

- `KeyCorridor-v0` (gymnasium, registered on import): a corridor of `length` cells, the key in
  cell 0, the agent starting in cell `start`, a door in the last cell. Stepping onto the door's
  cell with the key opens it: reward 1, the episode terminates. Without the key the door stays
  shut; nothing else is rewarded. Observation Discrete(2 * length): `cell * 2 + has_key`
  (one-hot for the networks); actions Discrete(2): left, right. 40 steps at most (gymnasium's
  TimeLimit: a truncation). The optimal return is 1 (2 steps left, then length - 1 right).
- `FaultyCorridor-v0`: the corridor observed as a one-hot Box, with a fault chosen by `fault`:
  "raise", "hang" or "kill" (the worker process kills itself with SIGKILL) at each env's step
  `at`; once in the whole run if `once` names a file (the first env to fault creates it), else
  in every env (a fault that keeps coming back). "nan" and "shape" break the observation
  contract.
"""

from __future__ import annotations

import os
import signal
import time

import gymnasium
import numpy as np
from gymnasium import spaces

CORRIDOR_ID = "gymnasium:own_envs:KeyCorridor-v0"
FAULTY_ID = "gymnasium:own_envs:FaultyCorridor-v0"


class KeyCorridor(gymnasium.Env):
    """The module doc's corridor."""

    def __init__(self, length: int = 10, start: int = 3):
        self.length, self.start = length, start
        self.observation_space = spaces.Discrete(2 * length)
        self.action_space = spaces.Discrete(2)
        self._cell, self._key = start, False

    def _obs(self) -> int:
        return self._cell * 2 + int(self._key)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self._cell, self._key = self.start, False
        return self._obs(), {}

    def step(self, action):
        self._cell = int(np.clip(self._cell + (1 if action == 1 else -1), 0, self.length - 1))
        self._key = self._key or self._cell == 0
        opened = self._key and self._cell == self.length - 1
        return self._obs(), float(opened), opened, False, {}


class FaultyCorridor(KeyCorridor):
    """The corridor with a fault (module doc), observed as a one-hot Box."""

    def __init__(self, fault: str = "raise", at: int = 20, once: str = "", **kw):
        super().__init__(**kw)
        self.observation_space = spaces.Box(0.0, 1.0, (2 * self.length,), np.float32)
        self._fault, self._at, self._once = fault, at, once
        self._steps = 0

    def _faults_now(self) -> bool:
        if self._steps != self._at:
            return False
        if not self._once:
            return True
        try:
            with open(self._once, "x"):  # the run's first fault creates it
                return True
        except FileExistsError:
            return False

    def _obs(self) -> np.ndarray:
        return np.eye(2 * self.length, dtype=np.float32)[super()._obs()]

    def step(self, action):
        self._steps += 1
        if self._faults_now():
            if self._fault == "raise":
                raise RuntimeError("the corridor's door jammed")
            if self._fault == "hang":
                time.sleep(3600)
            if self._fault == "kill":
                os.kill(os.getpid(), signal.SIGKILL)
            if self._fault == "nan":
                return np.full(2 * self.length, np.nan, np.float32), 0.0, False, False, {}
            if self._fault == "shape":
                return np.zeros(3, np.float32), 0.0, False, False, {}
        return super().step(action)


gymnasium.register("KeyCorridor-v0", entry_point=KeyCorridor, max_episode_steps=40)
gymnasium.register("FaultyCorridor-v0", entry_point=FaultyCorridor, max_episode_steps=40)


# Envs a run refuses (tests/test_own_envs.py's bad inputs).
class ShiftingCorridor(KeyCorridor):
    """Each instance a corridor one cell longer than the last: spaces that change."""

    made = 0

    def __init__(self):
        ShiftingCorridor.made += 1
        super().__init__(length=6 + ShiftingCorridor.made)


class TextCorridor(KeyCorridor):
    def __init__(self):
        super().__init__()
        self.observation_space = spaces.Text(8)


class MultiActionCorridor(KeyCorridor):
    def __init__(self):
        super().__init__()
        self.action_space = spaces.MultiDiscrete([2, 2])


def broken_corridor():
    raise OSError("the corridor's map file is missing")


def autoreset_corridor():
    return gymnasium.wrappers.Autoreset(KeyCorridor())


def vector_corridor():
    return gymnasium.vector.SyncVectorEnv([KeyCorridor])


gymnasium.register("ShiftingCorridor-v0", entry_point=ShiftingCorridor)
gymnasium.register("TextCorridor-v0", entry_point=TextCorridor)
gymnasium.register("MultiActionCorridor-v0", entry_point=MultiActionCorridor)
gymnasium.register("BrokenCorridor-v0", entry_point=broken_corridor)
gymnasium.register("VectorCorridor-v0", entry_point=vector_corridor)
gymnasium.register("AutoresetCorridor-v0", entry_point=autoreset_corridor)


# ----------------------------------------------------------------------------- a JAX env
class JaxCorridor:
    """The key corridor as a JAX env with gymnax's API, written without gymnax's base class:
    `reset(key, params) -> (obs, state)`, `step(key, state, action, params) -> (obs, state,
    reward, done, info)` with `info["truncated"]` at the time limit; no auto-reset (the run
    resets on the step after `done`). Observations one-hot `[2 * length]` float32."""

    def __init__(self, length: int = 10, start: int = 3):
        self.length, self.start = length, start

    @property
    def default_params(self):
        return CorridorParams()

    def observation_space(self, params):
        from gymnax.environments import spaces as jax_spaces

        return jax_spaces.Box(0.0, 1.0, (2 * self.length,))

    def action_space(self, params):
        from gymnax.environments import spaces as jax_spaces

        return jax_spaces.Discrete(2)

    def _obs(self, state):
        import jax

        return jax.nn.one_hot(state["cell"] * 2 + state["key"], 2 * self.length)

    def reset(self, key, params):
        import jax.numpy as jnp

        state = {"cell": jnp.int32(self.start), "key": jnp.int32(0), "t": jnp.int32(0)}
        return self._obs(state), state

    def step(self, key, state, action, params):
        import jax.numpy as jnp

        cell = jnp.clip(state["cell"] + 2 * action - 1, 0, self.length - 1)
        has_key = jnp.maximum(state["key"], (cell == 0).astype(jnp.int32))
        state = {"cell": cell, "key": has_key, "t": state["t"] + 1}
        opened = (has_key == 1) & (cell == self.length - 1)
        truncated = (state["t"] >= params.max_steps_in_episode) & ~opened
        return self._obs(state), state, opened.astype(jnp.float32), opened, {"truncated": truncated}


def _corridor_params():
    import flax.struct

    @flax.struct.dataclass
    class Params:
        max_steps_in_episode: int = 40

    return Params


CorridorParams = _corridor_params()


def make_jax_corridor(**kwargs):
    """`jax:own_envs:make_jax_corridor`: the factory a run names."""
    return JaxCorridor(**kwargs)


JAX_CORRIDOR_ID = "jax:own_envs:make_jax_corridor"


class JaxCorridorNoParams(JaxCorridor):
    """Gymnax's API without `default_params` (refused: the run would have no params)."""

    default_params = None
