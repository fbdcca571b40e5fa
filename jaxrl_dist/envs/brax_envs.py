"""Brax's envs with gymnax's API, for the Anakin runtime: `jax:jaxrl_dist.envs.brax_envs:make`.

Brax (`pip install 'jaxrl_dist[brax]'`) is not gymnax: its `reset(rng) -> State` and
`step(State, action) -> State` carry the observation, reward and `done` in the state. `make`
wraps one of `brax.envs.get_environment`'s envs in the interface a `jax:MODULE:FACTORY` env
has (`docs/guides/your-own-environment.md`), so the runtime steps it as it steps gymnax's: its
own auto-reset (Brax's `AutoResetWrapper` is not used), a fall (Hopper, Walker2d, Ant) a
termination, `max_episode_steps` (Brax's `episode_length`, 1,000) a time limit.

    python scripts/train.py --config configs/anakin_sac_brax.py --workdir runs/brax_hc
    ... --config.env_kwargs="{'env_name': 'hopper'}"

Observations are `[obs_size]` float32 (an env made with dict observations is refused), actions
a `[action_size]` Box in [-1, 1].
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
from flax import struct


@struct.dataclass
class BraxParams:
    """What gymnax calls the env's params: only the time limit here."""

    max_steps_in_episode: int = 1_000


class BraxEnv:
    """One Brax env (`brax.envs.get_environment(env_name, backend=backend, **kwargs)`)."""

    def __init__(
        self,
        env_name: str = "halfcheetah",
        backend: str = "positional",
        max_episode_steps: int = 1_000,
        **kwargs: Any,
    ):
        from brax import envs  # optional: `pip install 'jaxrl_dist[brax]'`

        if env_name not in envs._envs:  # noqa: SLF001  brax lists its envs nowhere public
            raise ValueError(
                f"env_name={env_name!r} is not one of Brax's envs; use one of {sorted(envs._envs)}"  # noqa: SLF001
            )
        self.name = env_name
        self._env = envs.get_environment(env_name, backend=backend, **kwargs)
        self.default_params = BraxParams(max_steps_in_episode=max_episode_steps)

    def observation_space(self, params: BraxParams):
        from gymnax.environments import spaces

        return spaces.Box(-jnp.inf, jnp.inf, (self._env.observation_size,), jnp.float32)

    def action_space(self, params: BraxParams):
        from gymnax.environments import spaces

        return spaces.Box(-1.0, 1.0, (self._env.action_size,), jnp.float32)

    def reset(self, key: jax.Array, params: BraxParams) -> tuple[jax.Array, Any]:
        """`obs [obs_size]` and the state: Brax's and the step count."""
        state = self._env.reset(key)
        return _flat_obs(state.obs, self.name), (state, jnp.int32(0))

    def step(
        self, key: jax.Array, state: Any, action: jax.Array, params: BraxParams
    ) -> tuple[jax.Array, Any, jax.Array, jax.Array, dict[str, jax.Array]]:
        """gymnax's `step` without its auto-reset: `done` is Brax's termination, the time
        limit `info["truncated"]`; a step that is both is the time limit's, as EnvPool and
        every other env here report it (`jax_envs.JaxEnv`)."""
        brax_state, t = state
        brax_state = self._env.step(brax_state, action)
        t = t + 1
        done = brax_state.done > 0
        truncated = t >= params.max_steps_in_episode
        obs = _flat_obs(brax_state.obs, self.name)
        return obs, (brax_state, t), brax_state.reward, done, {"truncated": truncated}


def _flat_obs(obs: Any, name: str) -> jax.Array:
    if not isinstance(obs, jax.Array):
        raise ValueError(
            f"Brax env {name!r} gives {type(obs).__name__} observations; make it with array "
            "observations (its default)"
        )
    return obs


def make(**kwargs: Any) -> BraxEnv:
    """The factory `jax:jaxrl_dist.envs.brax_envs:make` names; `env_kwargs` are its kwargs."""
    return BraxEnv(**kwargs)
