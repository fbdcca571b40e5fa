"""Evaluation episodes played inside XLA (EnvPool's XLA interface), for evaluation beside
training.

`Evaluator` (`evaluation.py`) runs a Python loop per step: a `step()`, a jitted policy call and
NumPy bookkeeping, holding the GIL most of the time. Beside training, that thread and the actor
and learner threads queue for the GIL: measured on 2 cores, each second of a Python evaluation
cost about 1.5 s of training throughput. Here `chunk` steps (policy, `send`, `recv`, episode
bookkeeping) run in one jitted `while_loop` that returns to Python only to check `abort`, so the
evaluation thread holds the GIL for a dispatch per chunk. The episodes are the same: the envs
of a sync pool play their shares of the episodes (`EnvEpisodes`: env `e` plays episodes `e, e +
envs, ...`), with the same env seeds and policy keys as `Evaluator` (tested equal). Envs the
XLA actor loop cannot step (`envs.xla_loop_problem`) keep `Evaluator`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxrl_dist.acting.xla_actor import in_env_order
from jaxrl_dist.agents.base import ActorCore
from jaxrl_dist.evaluation.base import EvalResult, EvalSetup

CHUNK_STEPS = 64  # env steps per jitted call: `abort` is checked between calls


class _Episodes(NamedTuple):
    """The evaluation's loop state: per env (`[num_envs, ...]`, in env-id order) and per
    episode (`returns`, `lengths`: `[num_episodes]`)."""

    obs: Any
    actor_state: Any
    first: jax.Array  # obs starts an episode
    was_last: jax.Array  # obs ended an episode: the next step is the env's reset step
    slot: jax.Array  # int32, the episode each env plays (>= num_episodes: its share is done)
    returns: jax.Array  # float32
    lengths: jax.Array  # int32


class XlaEvaluator:
    """`Evaluator`'s interface (`run`, `warm_up`, `close`) with the episodes stepped in XLA."""

    def __init__(self, setup: EvalSetup, chunk: int = CHUNK_STEPS):
        self._env = setup.pool()
        self._num, self._envs, self._device = setup.episodes, setup.num_envs, setup.device
        self._acting = setup.acting()
        core, device = setup.core, setup.device
        handle, recv, send, _ = self._env.xla()
        self._handle = jax.device_put(handle, device)
        action_dtype = self._env.spec._action_spec[-1][0]  # what EnvPool's send takes
        start, steps = _loops(core, recv, send, action_dtype, chunk, self._num)
        self._start = jax.jit(start, donate_argnums=0)
        self._steps = jax.jit(steps, static_argnums=3, donate_argnums=(1, 2))

    def _begin(self, params) -> tuple[Any, _Episodes]:
        """The params on the device and the reset observations, with a fresh actor state (one
        key split, as `Evaluator.run` and `warm_up` each take)."""
        params = self._acting.start(params, self._envs)
        self._env.async_reset()
        self._handle, episodes = self._start(self._handle, self._acting.state)
        return params, episodes

    def _play(self, params, greedy: bool, abort: Callable[[], bool]) -> _Episodes | None:
        params, episodes = self._begin(params)
        while not abort():  # checked before every chunk, as `Evaluator` does every step
            self._handle, episodes, done = self._steps(params, self._handle, episodes, greedy)
            if bool(done):
                return episodes
        return None

    def run(
        self,
        params,
        greedy: bool = True,
        abort: Callable[[], bool] = lambda: False,
        at_update: int = 0,
    ) -> EvalResult | None:
        """Plays the episodes; None if `abort()` turned true first (checked before each
        chunk of `chunk` steps)."""
        episodes = self._play(params, greedy, abort)
        if episodes is None:
            return None
        returns, lengths = jax.device_get((episodes.returns, episodes.lengths))
        return EvalResult(np.asarray(returns, np.float64)[:, None], np.asarray(lengths, np.int64))

    def warm_up(self, params, greedy: bool = True) -> None:
        """Compiles both loops without stepping an episode (as `Evaluator.warm_up`: a reset,
        and one key split, so the envs' and keys' streams stay those of `Evaluator`)."""
        params, episodes = self._begin(params)
        self._steps.lower(params, self._handle, episodes, greedy).compile()

    def close(self) -> None:
        self._env.close()


def _loops(core: ActorCore, recv, send, action_dtype, chunk: int, num: int):
    """`start(handle, actor_state) -> (handle, episodes)`: the reset observations;
    `steps(params, handle, episodes, greedy) -> (handle, episodes, all finished)`: up to
    `chunk` steps, fewer once every env played its share of the `num` episodes."""

    def start(handle, actor_state):
        handle, got = recv(handle)
        obs, reward, _, _, _ = in_env_order(got)
        n = reward.shape[0]
        return handle, _Episodes(
            obs=obs,
            actor_state=actor_state,
            first=jnp.ones(n, bool),
            was_last=jnp.zeros(n, bool),
            slot=jnp.arange(n, dtype=jnp.int32),
            returns=jnp.zeros(num, jnp.float32),
            lengths=jnp.zeros(num, jnp.int32),
        )

    def step(params, greedy, handle, e: _Episodes):
        state = core.start_episodes(e.actor_state, e.first)
        if greedy:
            action, state = core.greedy_act(params, e.obs, state)
        else:
            action, _, state = core.act(params, e.obs, state)
        env_ids = jnp.arange(e.first.shape[0], dtype=jnp.int32)
        handle = send(handle, core.env_action(action).astype(action_dtype), env_ids)
        handle, got = recv(handle)
        obs, reward, terminated, truncated, info = in_env_order(got)
        reward = info.get("reward", reward).astype(jnp.float32)  # the unclipped game score
        live = (e.slot < num) & ~e.was_last  # a reset step belongs to no episode
        ended = jnp.logical_or(terminated, truncated)
        return handle, _Episodes(
            obs=obs,
            actor_state=state,
            first=e.was_last,
            was_last=ended,
            slot=jnp.where(live & ended, e.slot + e.slot.shape[0], e.slot),
            returns=e.returns.at[e.slot].add(jnp.where(live, reward, 0.0), mode="drop"),
            lengths=e.lengths.at[e.slot].add(live.astype(jnp.int32), mode="drop"),
        )

    def steps(params, handle, episodes, greedy):
        def cond(carry):
            i, _, e = carry
            return (i < chunk) & ~jnp.all(e.slot >= num)

        def body(carry):
            i, handle, e = carry
            return (i + 1, *step(params, greedy, handle, e))

        _, handle, episodes = jax.lax.while_loop(cond, body, (0, handle, episodes))
        return handle, episodes, jnp.all(episodes.slot >= num)

    return start, steps
