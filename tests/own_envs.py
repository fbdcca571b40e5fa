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

import functools
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
        return corridor_params()()

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


@functools.cache
def corridor_params():
    """The JAX corridor's params class (made on first use: the gymnasium envs' worker
    processes import this module, and flax would add half a second to each)."""
    import flax.struct

    @flax.struct.dataclass
    class Params:
        max_steps_in_episode: int = 40

    return Params


def make_jax_corridor(**kwargs):
    """`jax:own_envs:make_jax_corridor`: the factory a run names."""
    return JaxCorridor(**kwargs)


JAX_CORRIDOR_ID = "jax:own_envs:make_jax_corridor"


class JaxCorridorNoParams(JaxCorridor):
    """Gymnax's API without `default_params` (refused: the run would have no params)."""

    default_params = None


# ----------------------------------------------------------------------------- PettingZoo games
@functools.cache
def _pettingzoo():
    """The PettingZoo games' classes (made on first use, as `corridor_params`)."""
    from pettingzoo import AECEnv, ParallelEnv

    class Nim(AECEnv):
        """Nim on one heap of `stones`: each move takes 1 to `take` stones; who takes the
        last stone wins (+1, the other -1). PettingZoo classic's observation: the stones
        left (Discrete) and the legal moves. Optimal play leaves a multiple of take + 1."""

        metadata = {"name": "nim_v0", "is_parallelizable": False}

        def __init__(self, stones: int = 10, take: int = 3):
            super().__init__()
            self.stones0, self.take = stones, take
            self.possible_agents = ["player_0", "player_1"]
            self._obs = spaces.Dict(
                {
                    "observation": spaces.Discrete(stones + 1),
                    "action_mask": spaces.MultiBinary(take),
                }
            )

        def observation_space(self, agent):
            return self._obs

        def action_space(self, agent):
            return spaces.Discrete(self.take)

        def observe(self, agent):
            mask = np.array([k + 1 <= self.stones for k in range(self.take)], np.int8)
            return {"observation": self.stones, "action_mask": mask}

        def reset(self, seed=None, options=None):
            self.agents = list(self.possible_agents)
            self.stones = self.stones0
            self.rewards = dict.fromkeys(self.agents, 0.0)
            self._cumulative_rewards = dict.fromkeys(self.agents, 0.0)
            self.terminations = dict.fromkeys(self.agents, False)
            self.truncations = dict.fromkeys(self.agents, False)
            self.infos = {a: {} for a in self.agents}
            self.agent_selection = self.agents[0]

        def step(self, action):
            mover = self.agent_selection
            if self.terminations[mover] or self.truncations[mover]:
                self._was_dead_step(action)
                return
            self.stones -= min(int(action) + 1, self.stones)
            self.rewards = dict.fromkeys(self.agents, 0.0)
            other = self.agents[1 - self.agents.index(mover)]
            if self.stones == 0:
                self.rewards[mover], self.rewards[other] = 1.0, -1.0
                self.terminations = dict.fromkeys(self.agents, True)
            self._cumulative_rewards[mover] = 0.0
            self.agent_selection = other
            self._accumulate_rewards()

    class Match(ParallelEnv):
        """Two agents see the same random target (one of 3) and are each rewarded 1 for
        choosing it; 5 rounds. Simultaneous moves, per-agent rewards."""

        metadata = {"name": "match_v0"}

        def __init__(self, rounds: int = 5):
            self.rounds = rounds
            self.possible_agents = ["a", "b"]

        def observation_space(self, agent):
            return spaces.Discrete(3)

        def action_space(self, agent):
            return spaces.Discrete(3)

        def _draw(self):
            self.target = int(self.rng.integers(3))

        def _observe(self):
            return dict.fromkeys(self.agents, self.target)

        def _rewards(self, actions):
            return {a: float(actions[a] == self.target) for a in self.agents}

        def reset(self, seed=None, options=None):
            self.rng = (
                np.random.default_rng(seed)
                if seed is not None or not hasattr(self, "rng")
                else self.rng
            )
            self.agents, self.t = list(self.possible_agents), 0
            self._draw()
            return self._observe(), {a: {} for a in self.agents}

        def step(self, actions):
            rewards = self._rewards(actions)
            self.t += 1
            self._draw()
            done = self.t >= self.rounds
            obs = self._observe()
            terms = dict.fromkeys(self.agents, False)
            truncs = dict.fromkeys(self.agents, done)
            infos = {a: {} for a in self.agents}
            if done:
                self.agents = []
            return obs, rewards, terms, truncs, infos

    class Steer(Match):
        """Match with continuous actions: each agent is shown a target in [-1, 1] (its own
        first, the other's second) and rewarded `1 - |action - target| / 2` for a Box action
        in [-1, 1]. Uniform actions score about 3.3 an episode, the target itself 5."""

        metadata = {"name": "steer_v0"}

        def observation_space(self, agent):
            return spaces.Box(-1.0, 1.0, (2,), np.float32)

        def action_space(self, agent):
            return spaces.Box(-1.0, 1.0, (1,), np.float32)

        def _draw(self):
            self.targets = self.rng.uniform(-1, 1, 2).astype(np.float32)

        def _observe(self):
            return {"a": self.targets.copy(), "b": self.targets[::-1].copy()}

        def _rewards(self, actions):
            own = dict(zip(self.possible_agents, self.targets, strict=True))
            return {a: 1.0 - abs(float(actions[a][0]) - float(own[a])) / 2 for a in self.agents}

    return Nim, Match, Steer


def make_nim(**kwargs):
    """`pettingzoo:own_envs:make_nim`."""
    nim, _, _ = _pettingzoo()
    return nim(**kwargs)


def make_match(**kwargs):
    """`pettingzoo:own_envs:make_match`."""
    _, match, _ = _pettingzoo()
    return match(**kwargs)


def make_steer(**kwargs):
    """`pettingzoo:own_envs:make_steer`: continuous actions, simultaneous moves."""
    _, _, steer = _pettingzoo()
    return steer(**kwargs)


def make_steering_nim(**kwargs):
    """Nim with a Box of actions: refused (a turn-based game's seats take Discrete ones)."""
    env = make_nim(**kwargs)
    env.action_space = lambda agent: spaces.Box(-1.0, 1.0, (2,), np.float32)
    return env


NIM_ID = "pettingzoo:own_envs:make_nim"
MATCH_ID = "pettingzoo:own_envs:make_match"
STEER_ID = "pettingzoo:own_envs:make_steer"
