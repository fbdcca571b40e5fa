"""JAX-native environments (gymnax) with EnvPool's semantics, for the Anakin runtime.

The Anakin program's env seam, what `JaxEnv` here and `jax_games.SeatedJaxGame` (pgx board
games with seats) provide, all pure and batched over the `B` envs:

- `reset(keys [B], shared, params) -> (state, TimeStep)` and `step(state, action [B], shared,
  params) -> (state, TimeStep)`, every leaf `[B, ...]`;
- `init_shared(params) -> shared` and `update_shared(shared, info [T, B], params) -> shared`:
  state shared by the whole batch (a board game's opponent pool; `()` here), updated after each
  learner update from the rollout's `TimeStep.info`; `params` are the acting params (a board
  game's self-play opponent plays them);
- `evaluation(num_episodes, opponent)`: the env evaluations play; `spec`.

`make_jax_env(env_id, env_kwargs)` gives a `JaxEnv`, a gymnax env made to behave the way an
EnvPool env does, so the learner sees the same `[T + 1, B]` time-step-aligned rollouts
(`jaxrl_dist/types.py`) from either runtime:

- a step that ends an episode returns its *final* observation, with `terminated` (the task ended)
  or `truncated` (the time limit, `max_episode_steps`) set; at the time limit only `truncated`,
  even where the task ended on that step too (as EnvPool reports it);
- the next step ignores its action and returns the first observation of a new episode with
  reward 0 and both flags False (EnvPool's auto-reset; gymnax's own `step` instead returns the
  reset observation in place of the final one, which would hide the final state from the value
  bootstrap of a truncated episode).

Each env's PRNG key lives in its state, so a batch's randomness does not depend on how the batch
is split over devices, and a checkpoint of the state resumes the env streams exactly.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxrl_dist.envs.envpool_env import EnvSpec
from jaxrl_dist.envs.jax_sources import GYMNAX_PREFIX
from jaxrl_dist.envs.observation import obs_indices_problem, split_obs_indices
from jaxrl_dist.envs.registry import find_source
from jaxrl_dist.envs.source import JAX, kind_problem
from jaxrl_dist.errors import one_line
from jaxrl_dist.user_code import FactoryError

API_DOC = "docs/guides/your-own-environment.md lists the API a JAX env needs"


class EnvTraceError(ValueError):
    """An env's reset or step fails when traced; the message says which, and why."""


class EnvState(NamedTuple):
    """One env's state (a leading `[B]` on every leaf when batched).

    Attributes:
      inner: the wrapped env's own state.
      needs_reset: `[]` bool, the last step ended the episode: the next step resets.
      key: `[2]` uint32 this env's PRNG key (resets and stochastic dynamics).
    """

    inner: Any
    needs_reset: jax.Array
    key: jax.Array


class TimeStep(NamedTuple):
    """What one step returns, EnvPool's `(obs, reward, terminated, truncated)`, and what the
    env's `update_shared` reads (`info`)."""

    obs: Any
    reward: jax.Array
    terminated: jax.Array
    truncated: jax.Array
    info: Any = ()


class JaxEnv:
    """A gymnax env with EnvPool's auto-reset, termination and truncation (module docstring).

    Attributes:
      env_id: the gymnax id.
      spec: what the networks need (`EnvSpec`, as for an EnvPool env).
    """

    def __init__(self, env_id: str, env_kwargs: dict[str, Any]):
        kwargs, indices = split_obs_indices(env_kwargs)
        max_steps = kwargs.pop("max_episode_steps", None)
        self.env_id = env_id
        self._env, params = find_source(env_id, JAX).make(env_id, kwargs)
        # gymnax's `Environment`, and classes written after it without subclassing it
        # (Craftax's), have `step_env`/`reset_env` (no auto-reset); another class's `step`
        # must not reset by itself (`jax_sources.user_env`).
        self._gymnax = hasattr(self._env, "step_env") and hasattr(self._env, "reset_env")
        if max_steps is not None:
            if not hasattr(params, "max_steps_in_episode"):
                raise ValueError(
                    "max_episode_steps needs env params with a max_steps_in_episode field"
                )
            params = params.replace(max_steps_in_episode=int(max_steps))
        self._params = params
        self.spec = _spec(self._env, params, self._reset)
        problem = obs_indices_problem(indices, self.spec.obs_shape)
        if problem:
            raise ValueError(problem)
        self._indices = None if indices is None else jnp.asarray(indices)
        if indices is not None:
            self.spec = self.spec._replace(obs_shape=(len(indices),))

    def _reset(self, key: jax.Array, params: Any) -> tuple[Any, Any]:
        if self._gymnax:
            return self._env.reset_env(key, params)
        return self._env.reset(key, params)

    def _step(self, key: jax.Array, inner: Any, action: jax.Array) -> tuple:
        """The wrapped env's transition: (obs, inner, reward, terminated, truncated)."""
        step = self._env.step_env if self._gymnax else self._env.step
        obs, inner, reward, terminated, info = step(key, inner, action, self._params)
        is_truncated = getattr(self._env, "is_truncated", None) if self._gymnax else None
        if is_truncated is not None:  # gymnax's time limit
            truncated = is_truncated(inner, self._params)
        else:  # the env's own word, if any (Craftax counts its time limit in `done`)
            truncated = info.get("truncated", False) if isinstance(info, dict) else False
        return obs, inner, reward, terminated, jnp.asarray(truncated, bool)

    def _observe(self, obs: jax.Array) -> jax.Array:
        """One env's observation as the agent sees it (`env_kwargs["obs_indices"]`)."""
        return obs if self._indices is None else obs[self._indices]

    # ------------------------------------------------------------------ the seam (batched)
    def reset(self, keys: jax.Array, shared: Any = (), params: Any = None):
        """`[B]` new episodes from `keys [B]`."""
        return jax.vmap(self.reset_one)(keys)

    def step(self, state: EnvState, action: jax.Array, shared: Any = (), params: Any = None):
        """`[B]` envs' next step."""
        return jax.vmap(self.step_one)(state, action)

    def init_shared(self, params: Any) -> tuple:
        return ()

    def update_shared(self, shared: Any, info: Any, params: Any) -> Any:
        return shared

    def evaluation(self, num_episodes: int, opponent: str) -> JaxEnv:
        return self

    # ------------------------------------------------------------------ one env
    def reset_one(self, key: jax.Array) -> tuple[EnvState, TimeStep]:
        """A new episode: `(state, TimeStep(first obs, 0, False, False))`."""
        key, sub = jax.random.split(key)
        obs, inner = self._reset(sub, self._params)
        state = EnvState(inner, jnp.zeros((), bool), key)
        return state, _first_step(self._observe(obs))

    def step_one(self, state: EnvState, action: jax.Array) -> tuple[EnvState, TimeStep]:
        """One EnvPool step: the env's transition, or (after an episode's end) a reset."""
        key, step_key, reset_key = jax.random.split(state.key, 3)
        obs, inner, reward, terminated, truncated = self._step(step_key, state.inner, action)
        # At the time limit EnvPool reports truncated, not terminated, even where the task
        # also ended there (CartPole's pole past 12 degrees at step 500): the same here.
        terminated = jnp.logical_and(jnp.asarray(terminated, bool), ~truncated)
        obs = self._observe(obs)
        stepped = TimeStep(obs, jnp.asarray(reward, jnp.float32), terminated, truncated)
        reset_obs, reset_inner = self._reset(reset_key, self._params)
        reset = state.needs_reset
        pick = lambda a, b: jax.tree.map(lambda x, y: jnp.where(reset, x, y), a, b)  # noqa: E731
        timestep = pick(_first_step(self._observe(reset_obs)), stepped)
        timestep = timestep._replace(
            terminated=jnp.asarray(timestep.terminated, bool),
            truncated=jnp.asarray(timestep.truncated, bool),
        )
        ended = jnp.logical_or(timestep.terminated, timestep.truncated)
        return EnvState(pick(reset_inner, inner), ended, key), timestep


def _first_step(obs: Any) -> TimeStep:
    return TimeStep(obs, jnp.zeros((), jnp.float32), jnp.zeros((), bool), jnp.zeros((), bool))


def _spec(env: Any, params: Any, reset: Any) -> EnvSpec:
    act_space = env.action_space(params)
    try:
        obs = jax.eval_shape(lambda k: reset(k, params)[0], jax.random.PRNGKey(0))
    except Exception as e:  # noqa: BLE001  the env's code: any error in one line
        raise EnvTraceError(f"its reset failed when traced: {one_line(e)} ({API_DOC})") from e
    if not isinstance(obs, jax.ShapeDtypeStruct):
        raise ValueError(f"its observations are a {type(obs).__name__}; return one array")
    num_actions = int(getattr(act_space, "n", 0))
    if num_actions:
        return EnvSpec(tuple(obs.shape), np.dtype(obs.dtype), num_actions)
    shape = tuple(getattr(act_space, "shape", ())) or (1,)
    if len(shape) != 1 or not hasattr(act_space, "low"):
        raise ValueError(
            f"its action space {type(act_space).__name__} is not supported (Discrete with n, "
            "or a Box of rank 0 or 1)"
        )
    low = tuple(float(x) for x in np.broadcast_to(act_space.low, shape))
    high = tuple(float(x) for x in np.broadcast_to(act_space.high, shape))
    return EnvSpec(
        tuple(obs.shape),
        np.dtype(obs.dtype),
        num_actions=0,
        action_dim=shape[0],
        action_low=low,
        action_high=high,
    )


def jax_env_problem(env_id: str, env_kwargs: dict[str, Any]) -> str | None:
    """A one-line problem with `env_id`/`env_kwargs` for the Anakin runtime, or None: its
    source's (`envs/registry.py`) check, then the env made and its batched reset and step
    traced as the run's program calls them (`step_problem`)."""
    source = find_source(env_id, JAX)
    problem = kind_problem(env_id, source, JAX) or source.check(env_id, env_kwargs)
    if problem:
        return problem
    try:
        env = make_jax_env(env_id, env_kwargs)
    except FactoryError as e:
        return str(e)
    except EnvTraceError as e:
        return f"config.env_id={env_id!r}: {e}"
    except (TypeError, ValueError, AttributeError) as e:
        if source.name == "gymnax":  # gymnax.make's refusal of an option
            name = env_id.removeprefix(GYMNAX_PREFIX)
            first = str(e).splitlines()[0] if str(e) else type(e).__name__
            return f"config.env_kwargs={env_kwargs!r} rejected by gymnax for {name}: {first}"
        return f"config.env_id={env_id!r}: {one_line(e)}"
    except Exception as e:  # noqa: BLE001  the user's code: any error in one line
        return f"config.env_id={env_id!r}: {one_line(e)}"
    return step_problem(env_id, env)


def step_problem(env_id: str, env: JaxEnv) -> str | None:
    """Why `env`'s batched `reset` and `step` (one env, as the Anakin program calls them)
    cannot be traced, or return other than one observation of `env.spec`, one reward and one
    done per env; None if they can. Traced, not run: what would fail inside the run's jit (a
    missing method, a wrong shape) fails here, in one line, before anything is written."""
    name = f"config.env_id={env_id!r}"
    keys = jax.eval_shape(lambda: jax.random.split(jax.random.PRNGKey(0), 1))
    try:
        state, _ = jax.eval_shape(env.reset, keys)
    except Exception as e:  # noqa: BLE001  the user's code: any error in one line
        return f"{name}: its reset failed when traced: {one_line(e)} ({API_DOC})"
    spec = env.spec
    shape, dtype = ((1, spec.action_dim), jnp.float32) if spec.continuous else ((1,), jnp.int32)
    try:
        _, step = jax.eval_shape(env.step, state, jax.ShapeDtypeStruct(shape, dtype))
    except Exception as e:  # noqa: BLE001  the user's code: any error in one line
        return f"{name}: its step failed when traced: {one_line(e)} ({API_DOC})"
    expected = {"observation": spec.obs_shape, "reward": (), "done": (), "truncated": ()}
    given = (step.obs, step.reward, step.terminated, step.truncated)
    wrong = [
        f"{what} {tuple(leaf.shape[1:])}"
        for (what, want), leaf in zip(expected.items(), given, strict=True)
        if tuple(leaf.shape[1:]) != tuple(want)
    ]
    if wrong:
        return (
            f"{name}: its step returns a {', '.join(wrong)} per env, where the run needs an "
            f"observation {tuple(spec.obs_shape)} (as its reset's) and one reward and one done "
            "(a single agent's)"
        )
    return None


def make_jax_env(env_id: str, env_kwargs: dict[str, Any]) -> JaxEnv:
    """The JAX env for `env_id`: a gymnax id (optionally written `gymnax:<id>`), whose
    `env_kwargs` go to `gymnax.make`, or `jax:module:factory` (`jax_sources.user_env`); in both,
    `max_episode_steps` (EnvPool's name) sets the params' time limit."""
    return JaxEnv(env_id, env_kwargs)
