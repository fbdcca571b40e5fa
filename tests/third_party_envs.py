"""Stand-ins for envs no one here wrote (`tests/test_env_startup.py`), each written the way the
library it stands for writes its envs:

- `CraftaxLike`: Craftax's `make_craftax_env_from_name(name, auto_reset=False)` env, a JAX env
  with gymnax's method names (`step_env`, `reset_env`, `is_terminal`, `default_params`) that
  does not subclass gymnax's `Environment` and has no `is_truncated`; its `done` counts the
  time limit, as Craftax's `is_game_over` does. A walk right along a chain of `length` cells:
  reward 1 and done at the last one, or done at `max_timesteps`. `broken="step"` or
  `"reset"` reads a field its state does not have there (an env that would crash the run);
  `"rewards"` returns two rewards a step (a team's).
- `JaxMarlLike`: a JaxMARL multi-agent env (`num_agents`, `agents`, `reset(key)`,
  `step(key, state, actions)`, spaces per agent, no `default_params`).
- `SlowStartCorridor`: a gymnasium env that takes `start_delay_s` to build in a worker process,
  and `first_reset_delay_s` for its first reset there (as one that loads its assets, or
  compiles, at either); the tests' own process builds it at once, so the start-up check's
  in-process builds stay fast. `FaultyResetCorridor`: its reset raises.
"""

from __future__ import annotations

import functools
import sys
import time

import gymnasium
from own_envs import KeyCorridor

# ----------------------------------------------------------------------------- Craftax-like


@functools.cache
def _craftax_types():
    """The params and state classes (made on first use: gymnasium's workers import this
    module, and flax would slow every one of them)."""
    import jax.numpy as jnp
    from flax import struct

    @struct.dataclass
    class EnvParams:
        max_timesteps: int = 12

    @struct.dataclass
    class EnvState:
        cell: jnp.ndarray
        timestep: jnp.ndarray

    return EnvParams, EnvState


class CraftaxLike:
    """Craftax's `EnvironmentNoAutoReset` and one env of it (module doc)."""

    def __init__(self, length: int = 6, broken: str = ""):
        self.length, self.broken = length, broken

    @property
    def default_params(self):
        return _craftax_types()[0]()

    def step(self, key, state, action, params=None):
        """Craftax's own `step` (jitted there): `step_env`, no reset."""
        return self.step_env(key, state, action, params or self.default_params)

    def reset(self, key, params=None):
        return self.reset_env(key, params or self.default_params)

    def step_env(self, key, state, action, params):
        import jax.numpy as jnp

        _, env_state = _craftax_types()
        cell = jnp.clip(state.cell + 2 * action - 1, 0, self.length - 1)
        clock = state.timestep + 1 if self.broken != "step" else state.time + 1
        state = env_state(cell=cell, timestep=clock)
        reward = (cell == self.length - 1).astype(jnp.float32)
        if self.broken == "rewards":  # one per agent of a team
            reward = jnp.stack([reward, reward])
        done = self.is_terminal(state, params)
        info = {"discount": 1.0 - done.astype(jnp.float32)}
        return self.get_obs(state), state, reward, done, info

    def reset_env(self, key, params):
        import jax.numpy as jnp

        _, env_state = _craftax_types()
        state = env_state(cell=jnp.int32(0), timestep=jnp.int32(0))
        if self.broken == "reset":
            state = state.replace(cell=state.position)
        return self.get_obs(state), state

    def get_obs(self, state):
        import jax

        return jax.nn.one_hot(state.cell, self.length)

    def is_terminal(self, state, params):
        return (state.cell == self.length - 1) | (state.timestep >= params.max_timesteps)

    @property
    def num_actions(self) -> int:
        return 2

    def action_space(self, params=None):
        from gymnax.environments import spaces

        return spaces.Discrete(2)

    def observation_space(self, params):
        from gymnax.environments import spaces

        return spaces.Box(0.0, 1.0, (self.length,))


def make_craftax_like_env_from_name(name: str = "Chain-Symbolic-v1", auto_reset: bool = False):
    """`jax:third_party_envs:make_craftax_like_env_from_name`, Craftax's factory's shape."""
    if auto_reset:
        raise ValueError("this stand-in has only Craftax's NoAutoReset envs")
    broken = {
        "Chain-BrokenStep-v1": "step",
        "Chain-BrokenReset-v1": "reset",
        "Chain-TeamRewards-v1": "rewards",
    }
    return CraftaxLike(broken=broken.get(name, ""))


# ----------------------------------------------------------------------------- JaxMARL-like
class JaxMarlLike:
    """Two agents that each see the step count and are rewarded for action 1 (module doc)."""

    def __init__(self, num_agents: int = 2):
        self.num_agents = num_agents
        self.agents = [f"agent_{i}" for i in range(num_agents)]

    def reset(self, key):
        import jax.numpy as jnp

        return {a: jnp.zeros(1) for a in self.agents}, jnp.int32(0)

    def step(self, key, state, actions):
        import jax.numpy as jnp

        state = state + 1
        obs = {a: jnp.full(1, state, jnp.float32) for a in self.agents}
        rewards = {a: (actions[a] == 1).astype(jnp.float32) for a in self.agents}
        dones = {a: state >= 5 for a in [*self.agents, "__all__"]}
        return obs, state, rewards, dones, {}

    def observation_space(self, agent):
        from gymnax.environments import spaces

        return spaces.Box(0.0, 5.0, (1,))

    def action_space(self, agent):
        from gymnax.environments import spaces

        return spaces.Discrete(2)


def make_jaxmarl_like(**kwargs):
    """`jax:third_party_envs:make_jaxmarl_like`."""
    return JaxMarlLike(**kwargs)


# ----------------------------------------------------------------------------- gymnasium
def _in_a_worker() -> bool:
    """Whether this is a Python env's worker process (`python -m jaxrl_dist.envs.steppers`)."""
    spec = getattr(sys.modules["__main__"], "__spec__", None)
    return spec is not None and spec.name == "jaxrl_dist.envs.steppers"


class SlowStartCorridor(KeyCorridor):
    """The key corridor, `start_delay_s` to build in a worker process and `first_reset_delay_s`
    for its first reset there (module doc)."""

    def __init__(self, start_delay_s: float = 0.0, first_reset_delay_s: float = 0.0, **kwargs):
        if _in_a_worker():
            time.sleep(start_delay_s)
        super().__init__(**kwargs)
        self._first_reset_delay_s = first_reset_delay_s if _in_a_worker() else 0.0

    def reset(self, *, seed=None, options=None):
        time.sleep(self._first_reset_delay_s)
        self._first_reset_delay_s = 0.0
        return super().reset(seed=seed, options=options)


class FaultyResetCorridor(KeyCorridor):
    def reset(self, *, seed=None, options=None):
        raise RuntimeError("the corridor's map did not load")


SLOW_START_ID = "gymnasium:third_party_envs:SlowStartCorridor-v0"
FAULTY_RESET_ID = "gymnasium:third_party_envs:FaultyResetCorridor-v0"
CRAFTAX_ID = "jax:third_party_envs:make_craftax_like_env_from_name"
JAXMARL_ID = "jax:third_party_envs:make_jaxmarl_like"


gymnasium.register("SlowStartCorridor-v0", entry_point=SlowStartCorridor, max_episode_steps=40)
gymnasium.register("FaultyResetCorridor-v0", entry_point=FaultyResetCorridor)
