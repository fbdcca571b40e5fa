"""A JaxMARL multi-agent env on the Anakin runtime: one stream per (env, agent), one policy shared
by every agent (IPPO), the agent's id in its observation, as `envs/agents.py` does for EnvPool's
multi-agent tasks on Sebulba.

`env_id="jaxmarl:NAME"` makes `jaxmarl.make(NAME, **env_kwargs)` (JaxMARL, Rutherford et al.
2024: MPE, SMAX, Overcooked, ...; `pip install jaxmarl`). Its `N` agents step together; the
batch of `B` streams is `B / N` envs, stream `env * N + agent`:

- its observation `{AGENT_VIEW: [D + N] float32, ACTION_MASK: [A] bool}`: the agent's own
  observation flattened, its one-hot id after it, and its available actions (JaxMARL's
  `get_avail_actions`; all where the env has none);
- its reward: the agent's own, or with `env_kwargs["team_reward"]=True` the sum over the env's
  agents (the key is this adapter's, not passed to JaxMARL);
- the env's end (`dones["__all__"]`) as `terminated` on every row of the env, and EnvPool's
  reset step after it (the final observation first, then the new episode's with reward 0), as
  `envs/jax_envs.py` does for gymnax: JaxMARL's own `step` would put the reset observation in
  place of the final one. JaxMARL does not tell a time limit from a task's end; MPE's episodes
  end only at their time limit, and are treated as JaxMARL's IPPO treats them (terminal).

Every agent must have the same observation shape and the same discrete action count (the
shared policy's), or the env is refused in one line. The env's state lives per env (`[E]`),
its reset flag per stream (`[B]`, what the Anakin program reads); each env's PRNG key is in
its state, so a checkpoint resumes the streams exactly.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxrl_dist.envs.envpool_env import EnvSpec
from jaxrl_dist.envs.jax_envs import TimeStep
from jaxrl_dist.errors import one_line
from jaxrl_dist.types import ACTION_MASK, AGENT_VIEW

JAXMARL_PREFIX = "jaxmarl:"
TEAM_REWARD = "team_reward"  # env_kwargs key: every agent learns from the team's sum


class MarlState(NamedTuple):
    """The streams' state: each env's JaxMARL state and key (`[E]`), and each stream's reset
    flag (`[B]`, the program's `needs_reset`: the next step starts a new episode)."""

    inner: Any
    needs_reset: jax.Array
    key: jax.Array


def is_jaxmarl(env_id: str) -> bool:
    return env_id.startswith(JAXMARL_PREFIX)


def jaxmarl_problem(env_id: str, env_kwargs: dict[str, Any], streams: int) -> str | None:
    """Why `env_id` cannot run with `streams` streams (one line), or None."""
    try:
        env = JaxMarlStreams(env_id, env_kwargs)
    except ValueError as e:
        return str(e)
    if streams % env.num_agents:
        return (
            f"config.batch_size={streams} streams is not a whole number of {env_id}'s envs "
            f"({env.num_agents} agents each: a stream per agent); use a multiple of "
            f"{env.num_agents}"
        )
    return None


class JaxMarlStreams:
    """Streams per (env, agent) over a JaxMARL env (module docstring); the Anakin program's env
    seam (`envs/jax_envs.py`)."""

    def __init__(self, env_id: str, env_kwargs: dict[str, Any]):
        try:
            import jaxmarl
        except ImportError:
            raise ValueError(
                f"config.env_id={env_id!r} needs JaxMARL; pip install jaxmarl"
            ) from None
        kwargs = dict(env_kwargs)
        self._team = bool(kwargs.pop(TEAM_REWARD, False))
        name = env_id.removeprefix(JAXMARL_PREFIX)
        try:
            self._env = jaxmarl.make(name, **kwargs)
        except Exception as e:  # noqa: BLE001  JaxMARL's registry or the env's own arguments
            message = f"config.env_id={env_id!r}: jaxmarl.make failed: {one_line(e)}"
            raise ValueError(message) from None
        self.env_id, self.agents = env_id, list(self._env.agents)
        self.num_agents = len(self.agents)
        self._avail = self._has_avail_actions()
        self.spec = self._spec()

    def _has_avail_actions(self) -> bool:
        """Whether the env says which actions are available (JaxMARL's base class raises
        NotImplementedError where an env does not: MPE)."""
        env = self._env
        try:
            jax.eval_shape(lambda k: env.get_avail_actions(env.reset(k)[1]), jax.random.PRNGKey(0))
        except NotImplementedError:
            return False
        return True

    def _spec(self) -> EnvSpec:
        env, name = self._env, self.env_id
        obs = jax.eval_shape(lambda k: env.reset(k)[0], jax.random.PRNGKey(0))
        shapes = {tuple(obs[a].shape) for a in self.agents}
        counts = {int(getattr(env.action_space(a), "n", 0)) for a in self.agents}
        if len(shapes) != 1 or len(counts) != 1 or 0 in counts:
            raise ValueError(
                f"config.env_id={name!r}: its agents' observations {sorted(shapes)} and "
                f"discrete action counts {sorted(counts)} differ (or are not discrete); one "
                "policy shared by every agent needs one shape and one count"
            )
        (shape,), (count,) = shapes, counts
        view = int(np.prod(shape)) + self.num_agents
        return EnvSpec((view,), np.dtype(np.float32), count, num_agents=self.num_agents)

    # ------------------------------------------------------------------ the seam (batched)
    def reset(self, keys: jax.Array, shared: Any = (), params: Any = None):
        """`[B]` streams (`B / N` envs, from every N-th key) at a new episode each."""
        env_keys = keys[:: self.num_agents]
        inner, obs, mask, key = jax.vmap(self._reset_env)(env_keys)
        n = len(env_keys) * self.num_agents
        zeros = jnp.zeros((n,), bool)
        ts = TimeStep(self._rows(obs, mask), jnp.zeros((n,), jnp.float32), zeros, zeros)
        return MarlState(inner, zeros, key), ts

    def step(self, state: MarlState, action: jax.Array, shared: Any = (), params: Any = None):
        """`[B]` streams' next step: each env steps with its agents' actions together, or
        (after its episode's end) resets."""
        actions = action.reshape(-1, self.num_agents)
        reset = state.needs_reset[:: self.num_agents]
        inner, obs, mask, reward, done, key = jax.vmap(self._step_env)(
            state.inner, reset, state.key, actions
        )
        rows = lambda x: jnp.repeat(x, self.num_agents)  # noqa: E731  [E] -> [B]
        ts = TimeStep(
            self._rows(obs, mask),
            reward.reshape(-1),
            rows(done),
            jnp.zeros_like(rows(done)),
        )
        return MarlState(inner, rows(done), key), ts

    def init_shared(self, params: Any) -> tuple:
        return ()

    def update_shared(self, shared: Any, info: Any, params: Any) -> Any:
        return shared

    def evaluation(self, num_episodes: int, opponent: str) -> JaxMarlStreams:
        return self

    # ------------------------------------------------------------------ one env
    def _observe(self, obs: dict, state: Any) -> tuple[jax.Array, jax.Array]:
        """(`[N, D]` float32 views, `[N, A]` bool available actions) of one env."""
        views = jnp.stack([obs[a].reshape(-1).astype(jnp.float32) for a in self.agents])
        if self._avail:
            avail = self._env.get_avail_actions(state)
            mask = jnp.stack([jnp.asarray(avail[a], bool) for a in self.agents])
        else:
            mask = jnp.ones((self.num_agents, self.spec.num_actions), bool)
        return views, mask

    def _reset_env(self, key: jax.Array):
        key, sub = jax.random.split(key)
        obs, inner = self._env.reset(sub)
        views, mask = self._observe(obs, inner)
        return inner, views, mask, key

    def _step_env(self, inner: Any, reset: jax.Array, key: jax.Array, actions: jax.Array):
        key, step_key, reset_key = jax.random.split(key, 3)
        chosen = {a: actions[i] for i, a in enumerate(self.agents)}
        obs, stepped, rewards, dones, _ = self._env.step_env(step_key, inner, chosen)
        views, mask = self._observe(obs, stepped)
        fresh_obs, fresh = self._env.reset(reset_key)
        fresh_views, fresh_mask = self._observe(fresh_obs, fresh)
        reward = jnp.stack([jnp.asarray(rewards[a], jnp.float32) for a in self.agents])
        if self._team:
            reward = jnp.full_like(reward, reward.sum())
        pick = lambda a, b: jax.tree.map(lambda x, y: jnp.where(reset, x, y), a, b)  # noqa: E731
        done = jnp.asarray(dones["__all__"], bool)
        return (
            pick(fresh, stepped),
            pick(fresh_views, views),
            pick(fresh_mask, mask),
            jnp.where(reset, 0.0, reward),
            jnp.where(reset, False, done),
            key,
        )

    def _rows(self, views: jax.Array, mask: jax.Array) -> dict[str, jax.Array]:
        """`[E, N, D]` views and `[E, N, A]` masks -> the streams' `[B]` observations, the
        agent's one-hot id after its view."""
        envs = views.shape[0]
        ids = jnp.broadcast_to(jnp.eye(self.num_agents), (envs, self.num_agents, self.num_agents))
        flat = jnp.concatenate([views, ids], axis=-1).reshape(envs * self.num_agents, -1)
        return {AGENT_VIEW: flat, ACTION_MASK: mask.reshape(envs * self.num_agents, -1)}
