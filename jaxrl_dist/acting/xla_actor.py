"""The jitted actor loop (`config.actor_loop = "xla"`): T env steps and T policy steps inside one
XLA call, through EnvPool's XLA interface (`handle, recv, send, step = env.xla()`).

The Python actor loop (`actor.py`) pays a Python round trip, an XLA dispatch and three host
copies of every observation per `recv()`; here one jitted unroll per T steps acts, steps a
*sync* EnvPool (every `recv()` returns all its envs), tracks episodes and lays the `[T + 1, B]`
rollout out time-major on the actor's device. The host only splits it into rollouts of the data
seam's width and reads the finished episodes.

A `recv` inside XLA cannot time out: the actor marks when each call into the pool started (the
first `recv` and every unroll: `busy_s`) and the supervisor stops the run once one has run
longer than `config.actor_hang_timeout_s`. The mark is set at dispatch: on an accelerator the
actor shares with the learner, an unroll queued behind updates counts that wait too (keep the
limit far above an update's time). Environments whose observations or actions are 64-bit
(MuJoCo) are refused before the run (`envs.xla_loop_problem`): JAX without x64 would declare
their buffers 32-bit.
"""

from __future__ import annotations

import contextlib
import functools
import time
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxrl_dist.acting.actor import ActorShared, ActorStats, ActorThread
from jaxrl_dist.acting.params_store import ParamsStore
from jaxrl_dist.acting.policy_client import wait_for_params
from jaxrl_dist.agents.base import ActorCore, ActorIdentity
from jaxrl_dist.data.base import QueueItem
from jaxrl_dist.types import PyTree, Rollout


class UnrollCarry(NamedTuple):
    """What one unroll hands the next, every leaf `[B, ...]` in env-id order.

    Attributes:
      obs, reward, terminated, truncated: the newest `recv()` (no action taken on it yet): the
        next rollout's row 0.
      actor_state: the actor core's per-env state.
      episode_return, episode_length: the running episode of each env (`EpisodeTracker`'s
        rules: the unclipped `info["reward"]` where the env reports one).
      first: `[B]` bool, `obs` starts an episode: the one before it ended one (the learner's
        rule, `agents.common.sequence_inputs`), or it is the first after `async_reset`.
    """

    obs: PyTree
    reward: jax.Array
    terminated: jax.Array
    truncated: jax.Array
    actor_state: PyTree
    episode_return: jax.Array
    episode_length: jax.Array
    first: jax.Array


class UnrollOut(NamedTuple):
    """One unroll's results, on the actor's device.

    Attributes:
      rollouts: the `[T + 1, B]` rollout cut along B into rollouts of the data seam's width
        (`policy_version` None: the caller knows which params acted).
      ended: `[T, B]` the episode ended on arriving at `obs[t + 1]`.
      episode_return, episode_length: `[T, B]` that episode's return and length (read where
        `ended`).
    """

    rollouts: tuple[Rollout, ...]
    ended: jax.Array
    episode_return: jax.Array
    episode_length: jax.Array


def in_env_order(recv_out: tuple) -> tuple:
    """A sync `recv()`'s `(obs, reward, terminated, truncated, info)` sorted by env id."""
    obs, reward, terminated, truncated, info = recv_out
    order = jnp.argsort(info["env_id"])
    take = lambda x: x[order]  # noqa: E731
    return (
        jax.tree.map(take, obs),
        take(reward),
        take(terminated),
        take(truncated),
        jax.tree.map(take, info),
    )


def _track(ret, length, reward, info):
    """(return, length) of every env's running episode after one step (a reset step starts a
    new episode: return and length 0)."""
    raw = info.get("reward", reward).astype(jnp.float32)
    first = info["elapsed_step"] == 0
    return jnp.where(first, 0.0, ret + raw), jnp.where(first, 0, length + 1)


def make_unroll(
    core: ActorCore,
    recv: Callable,
    send: Callable,
    *,
    unroll_length: int,
    width: int,
    action_dtype: Any = None,
) -> tuple[Callable, Callable]:
    """`start(handle, actor_state) -> (handle, carry)`: the first `recv()` after
    `async_reset()`; `unroll(params, handle, carry) -> (handle, carry, UnrollOut)`: T policy
    and env steps, the rollout cut into rollouts of `width` envs. Both pure given EnvPool's
    custom calls; jit them (the handle and the carry may be donated). `action_dtype`: the
    env's action dtype (EnvPool's XLA `send` takes its buffer as it is; None keeps the
    policy's)."""

    def start(handle, actor_state):
        handle, got = recv(handle)
        obs, reward, terminated, truncated, info = in_env_order(got)
        zeros = jnp.zeros(reward.shape, jnp.float32)
        ret, length = _track(zeros, zeros.astype(jnp.int32), reward, info)
        first = jnp.ones(reward.shape, bool)
        carry = UnrollCarry(
            obs, reward, terminated, truncated, actor_state, ret, length, first=first
        )
        return handle, carry

    def step(params, state, _):
        handle, c = state
        actor_state = core.start_episodes(c.actor_state, c.first)
        action, extras, actor_state = core.act(params, c.obs, actor_state)
        env_ids = jnp.arange(c.reward.shape[0], dtype=jnp.int32)
        env_action = core.env_action(action)
        if action_dtype is not None:
            env_action = env_action.astype(action_dtype)
        handle = send(handle, env_action, env_ids)
        handle, got = recv(handle)
        obs, reward, terminated, truncated, info = in_env_order(got)
        ret, length = _track(c.episode_return, c.episode_length, reward, info)
        first = jnp.logical_or(c.terminated, c.truncated)  # the obs acted on ended an episode
        new = UnrollCarry(obs, reward, terminated, truncated, actor_state, ret, length, first=first)
        ended = jnp.logical_or(terminated, truncated)
        seen = (c.obs, c.reward, c.terminated, c.truncated, action, extras)
        return (handle, new), (seen, ended, ret, length)

    def unroll(params, handle, carry):
        # the state row 0 acts from (after its resets): a recurrent learner unrolls from it
        core_state = core.core_state(core.start_episodes(carry.actor_state, carry.first))
        (handle, last), (seen, ended, ret, length) = jax.lax.scan(
            lambda s, x: step(params, s, x), (handle, carry), None, length=unroll_length
        )
        obs, reward, terminated, truncated, action, extras = seen
        append = lambda xs, x: jnp.concatenate([xs, x[None]])  # noqa: E731  [T] + [1] -> [T + 1]
        rollout = Rollout(
            obs=jax.tree.map(append, obs, last.obs),
            reward=append(reward, last.reward),
            terminated=append(terminated, last.terminated),
            truncated=append(truncated, last.truncated),
            action=action,
            agent_extras=extras,
            policy_version=None,
            core_state=jax.tree.map(lambda x: x[None], core_state),
        )
        num_envs = action.shape[1]
        cut = lambda x, i: x[:, i : i + width]  # noqa: E731
        rollouts = tuple(
            jax.tree.map(functools.partial(cut, i=i), rollout) for i in range(0, num_envs, width)
        )
        return handle, last, UnrollOut(rollouts, ended, ret, length)

    return start, unroll


class XlaActor(ActorThread):
    """Steps one sync EnvPool `unroll_length` steps per jitted call with the newest params, and
    writes `QueueItem`s of `shared.segments_per_rollout` envs each.

    Beyond `ActorThread`'s contract, `busy_s()` says how long the current call into the pool
    has run (0 between calls), for the supervisor's watchdog.
    """

    def __init__(
        self,
        *,
        index: int,
        make_env: Callable[[], Any],
        core: ActorCore,
        store: ParamsStore,
        device: jax.Device,
        identity: ActorIdentity,
        key: jax.Array,
        shared: ActorShared,
    ):
        super().__init__(index)
        self._make_env, self._core, self._store = make_env, core, store
        self._device, self._identity, self._key = device, identity, key
        self._shared = shared
        self._busy_since: float | None = None

    def busy_s(self) -> float:
        """Seconds the current call into the pool has run (0 between calls and while
        compiling)."""
        since = self._busy_since
        return 0.0 if since is None else time.monotonic() - since

    @contextlib.contextmanager
    def _watched(self) -> Iterator[None]:
        """Marks a call into the pool (a `recv` inside XLA cannot time out) for `busy_s`."""
        self._busy_since = time.monotonic()
        try:
            yield
        finally:
            self._busy_since = None

    def _compile(self, env) -> tuple[Any, UnrollCarry, Callable]:
        """(handle, first carry, the compiled unroll): compiled ahead of the first call, so
        `busy_s` never counts compilation."""
        handle, recv, send, _ = env.xla()
        shared = self._shared
        action_dtype = env.spec._action_spec[-1][0]  # what EnvPool's send takes, as given
        start, unroll = make_unroll(
            self._core,
            recv,
            send,
            unroll_length=shared.unroll_length,
            width=shared.segments_per_rollout,
            action_dtype=action_dtype,
        )
        num_envs = env.config["num_envs"]
        state = self._core.init_state(self._identity, num_envs, self._key)
        state = jax.device_put(state, self._device)
        handle = jax.device_put(handle, self._device)
        first = jax.jit(start, donate_argnums=(0, 1)).lower(handle, state).compile()
        env.async_reset()
        with self._watched():  # the first recv is watched too
            handle, carry = jax.block_until_ready(first(handle, state))
        got = wait_for_params(self._store, self._device, 0, shared.stop)
        params = got[0] if got is not None else None
        compiled = jax.jit(unroll, donate_argnums=(1, 2)).lower(params, handle, carry).compile()
        return handle, carry, compiled

    def _loop(self) -> None:
        env = self._make_env()
        shared = self._shared
        try:
            handle, carry, unroll = self._compile(env)
            min_version = 0  # sync collection: each unroll acts with newer params than the last
            while not shared.stop.is_set():
                got = wait_for_params(self._store, self._device, min_version, shared.stop)
                if got is None:
                    break
                params, version = got
                min_version = version + 1 if shared.sync else 0
                t0 = time.perf_counter()
                with self._watched():
                    handle, carry, out = unroll(params, handle, carry)
                    episodes = jax.device_get((out.ended, out.episode_return, out.episode_length))
                timers = dict.fromkeys(ActorStats.TIMERS, 0.0)
                timers["unroll_s"] = time.perf_counter() - t0
                self._write(out.rollouts, version, episodes, timers)
        finally:
            env.close()

    def _write(
        self, rollouts: tuple[Rollout, ...], version: int, episodes: tuple, timers: dict
    ) -> None:
        """Writes the rollouts (still on the device: the learner takes them from there) with
        their policy version, and adds the stats."""
        t0 = time.perf_counter()
        ended, returns, lengths = episodes
        returns, lengths = returns[ended], lengths[ended]
        t, width = self._shared.unroll_length, self._shared.segments_per_rollout
        versions = np.full((t, width), version, np.int32)
        items = [QueueItem(self.index, r._replace(policy_version=versions)) for r in rollouts]
        timers["rollout_s"] += time.perf_counter() - t0
        for item in items:
            timers["queue_put_s"] += self._shared.write(item)
        self._shared.stats.add(timers, t * width * len(items), returns, lengths)
