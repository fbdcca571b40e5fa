"""The jitted actor loop (`config.sebulba.actor_loop = "xla"`): T env steps and T policy steps
inside one XLA call, through EnvPool's XLA interface (`handle, recv, send, step = env.xla()`).

The Python actor loop (`actor.py`) pays a Python round trip, an XLA dispatch and three host
copies of every observation per `recv()`; here one jitted unroll per T steps acts, steps a
*sync* EnvPool (every `recv()` returns all its envs), tracks episodes and lays the `[T + 1, B]`
rollout out time-major on the actor's device. The host only splits it into rollouts of the data
seam's width and reads the finished episodes.

A sync pool leaves the envs idle while the policy acts, and the policy idle while the envs
step. `config.sebulba.env_groups_per_actor = G` splits an actor's envs into G sync pools stepped in
turn inside the unroll, so one group's envs step while the policy acts on another's (the
trick Sebulba plays with two env groups); `benchmarks/throughput.py`'s XLA stages measure it.

A `recv` inside XLA cannot time out: the actor marks when each call into the pool started (the
first `recv` and every unroll: `busy_s`) and the supervisor stops the run once one has run
longer than `config.sebulba.actor_hang_timeout_s`. The mark is set at dispatch: on an accelerator
the actor shares with the learner, an unroll queued behind updates counts that wait too (keep the
limit far above an update's time). Environments whose observations or actions are 64-bit
(MuJoCo) are refused before the run (`envs.xla_loop_problem`): JAX without x64 would declare
their buffers 32-bit.
"""

from __future__ import annotations

import contextlib
import functools
import time
from collections.abc import Callable, Iterator, Sequence
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


def _received(c: UnrollCarry, got: tuple) -> tuple[UnrollCarry, tuple]:
    """The carry after a `recv()` answering the action taken on `c.obs`, and that step's
    `(ended, episode_return, episode_length)`, every leaf `[B, ...]`."""
    obs, reward, terminated, truncated, info = in_env_order(got)
    ret, length = _track(c.episode_return, c.episode_length, reward, info)
    first = jnp.logical_or(c.terminated, c.truncated)  # the obs acted on ended an episode
    new = UnrollCarry(obs, reward, terminated, truncated, c.actor_state, ret, length, first)
    return new, (jnp.logical_or(terminated, truncated), ret, length)


def _rows(tree: PyTree, start, size: int) -> PyTree:
    return jax.tree.map(lambda x: jax.lax.dynamic_slice_in_dim(x, start, size), tree)


def _put_rows(tree: PyTree, rows: PyTree, start) -> PyTree:
    put = lambda x, r: jax.lax.dynamic_update_slice_in_dim(x, r, start, 0)  # noqa: E731
    return jax.tree.map(put, tree, rows)


def make_unroll(
    core: ActorCore,
    pools: Sequence[tuple[Callable, Callable]],
    *,
    unroll_length: int,
    width: int,
    action_dtype: Any = None,
) -> tuple[Callable, Callable]:
    """The jitted loop's two programs over `G = len(pools)` sync EnvPools of `n` envs each
    (`pools`: each one's XLA `(recv, send)`), env ids `g * n + i` in a `[B = G * n]` layout.

    `start(handles, actor_state) -> (handles, carry)`: every pool's first `recv()` after
    `async_reset()`; `unroll(params, handles, carry) -> (handles, carry, UnrollOut)`: T policy
    and env steps of every env, the rollout cut into rollouts of `width` envs. Both pure given
    EnvPool's custom calls (`handles`: one per pool); jit them (handles and carry may be
    donated). `action_dtype`: the env's action dtype (EnvPool's XLA `send` takes its buffer as
    it is; None keeps the policy's).

    The pools are stepped in turn: group g's `recv`, the policy on its envs, its `send`, then
    group g + 1's. With G > 1 a group's envs step while the policy acts on the other groups
    (Sebulba's two env groups); with G = 1 it is act, send, recv, step after step. Each
    pool's `recv` of step t - 1 comes at step t, just before the policy acts on it, so one
    unroll's schedule, as a scan over t of a scan over g, skips the recv at t = 0 (the carry
    holds it) and ends with every pool's last recv.
    """
    groups = len(pools)
    recvs = [functools.partial(_recv_into, g, recv) for g, (recv, _) in enumerate(pools)]
    sends = [functools.partial(_send_from, g, send) for g, (_, send) in enumerate(pools)]

    def start(handles, actor_state):
        handles, firsts = tuple(handles), []
        for g in range(groups):
            handles, got = recvs[g](handles)
            firsts.append(in_env_order(got))
        join = lambda *xs: jnp.concatenate(xs)  # noqa: E731  [n] per group -> [B]
        obs, reward, terminated, truncated, info = jax.tree.map(join, *firsts)
        zeros = jnp.zeros(reward.shape, jnp.float32)
        ret, length = _track(zeros, zeros.astype(jnp.int32), reward, info)
        first = jnp.ones(reward.shape, bool)
        carry = UnrollCarry(obs, reward, terminated, truncated, actor_state, ret, length, first)
        return handles, carry

    def unroll(params, handles, carry):
        n = carry.reward.shape[0] // groups
        handles = tuple(handles)

        def recv_group(g, handles, c):
            """Group g's carry rows after its recv, and that step's episodes."""
            handles, got = jax.lax.switch(g, recvs, handles)
            mine, tracked = _received(_rows(c, g * n, n), got)
            return handles, _put_rows(c, mine, g * n), tracked

        def slot(state, g, t, params):
            handles, c = state
            skipped = (jnp.zeros(n, bool), jnp.zeros(n, jnp.float32), jnp.zeros(n, jnp.int32))
            handles, c, tracked = jax.lax.cond(
                t > 0,
                lambda h, c: recv_group(g, h, c),
                lambda h, c: (h, c, skipped),  # step 0 acts on the carry's recv
                handles,
                c,
            )
            mine = _rows(c, g * n, n)
            actor_state = core.start_episodes(mine.actor_state, mine.first)
            action, extras, actor_state = core.act(params, mine.obs, actor_state)
            env_action = core.env_action(action)
            if action_dtype is not None:
                env_action = env_action.astype(action_dtype)
            handles = jax.lax.switch(g, sends, handles, env_action)
            c = _put_rows(c, mine._replace(actor_state=actor_state), g * n)
            seen = (mine.obs, mine.reward, mine.terminated, mine.truncated, action, extras)
            return (handles, c), (seen, tracked)

        def step(state, t):
            slots = functools.partial(slot, t=t, params=params)
            return jax.lax.scan(slots, state, jnp.arange(groups))

        # the state row 0 acts from (after its resets): a recurrent learner unrolls from it
        core_state = core.core_state(core.start_episodes(carry.actor_state, carry.first))
        (handles, last), (seen, tracked) = jax.lax.scan(
            step, (handles, carry), jnp.arange(unroll_length)
        )
        ends = []
        for g in range(groups):  # every pool's last recv: the rollout's row T
            handles, last, got = recv_group(g, handles, last)
            ends.append(got)
        flat = lambda x: x.reshape(x.shape[0], -1, *x.shape[3:])  # noqa: E731  [T, G, n] -> [T, B]
        seen = jax.tree.map(flat, seen)
        # tracked[t] is step t - 1's (row 0 skipped); the last recvs give step T - 1's
        last_step = [jnp.concatenate(xs)[None] for xs in zip(*ends, strict=True)]
        ended, ret, length = (
            jnp.concatenate([flat(x)[1:], end]) for x, end in zip(tracked, last_step, strict=True)
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
        return handles, last, UnrollOut(rollouts, ended, ret, length)

    return start, unroll


def _recv_into(g: int, recv: Callable, handles: tuple) -> tuple[tuple, tuple]:
    """Pool g's `recv()`, its handle replaced in `handles` (a `lax.switch` branch)."""
    handle, got = recv(handles[g])
    return (*handles[:g], handle, *handles[g + 1 :]), got


def _send_from(g: int, send: Callable, handles: tuple, env_action: jax.Array) -> tuple:
    """Pool g's `send()` of its `[n]` actions to its envs `0..n-1` (a `lax.switch` branch)."""
    env_ids = jnp.arange(env_action.shape[0], dtype=jnp.int32)
    return (*handles[:g], send(handles[g], env_action, env_ids), *handles[g + 1 :])


class XlaActor(ActorThread):
    """Steps its sync EnvPools (`groups` of them, `make_env(group=g)` each, stepped in turn:
    `make_unroll`) `unroll_length` steps per jitted call with the newest params, and writes
    `QueueItem`s of `shared.segments_per_rollout` envs each.

    Beyond `ActorThread`'s contract, `busy_s()` says how long the current call into the pool
    has run (0 between calls), for the supervisor's watchdog.
    """

    def __init__(
        self,
        *,
        index: int,
        make_env: Callable[..., Any],
        core: ActorCore,
        store: ParamsStore,
        device: jax.Device,
        identity: ActorIdentity,
        key: jax.Array,
        shared: ActorShared,
        groups: int = 1,
    ):
        super().__init__(index)
        self._make_env, self._core, self._store = make_env, core, store
        self._groups = groups
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

    def _compile(self, pools: list) -> tuple[tuple, UnrollCarry, Callable]:
        """(handles, first carry, the compiled unroll): compiled ahead of the first call, so
        `busy_s` never counts compilation."""
        xla = [pool.xla() for pool in pools]
        shared = self._shared
        action_dtype = pools[0].spec._action_spec[-1][0]  # what EnvPool's send takes, as given
        start, unroll = make_unroll(
            self._core,
            [(recv, send) for _, recv, send, _ in xla],
            unroll_length=shared.unroll_length,
            width=shared.segments_per_rollout,
            action_dtype=action_dtype,
        )
        num_envs = sum(pool.config["num_envs"] for pool in pools)
        state = self._core.init_state(self._identity, num_envs, self._key)
        state = jax.device_put(state, self._device)
        handles = jax.device_put(tuple(handle for handle, *_ in xla), self._device)
        first = jax.jit(start, donate_argnums=(0, 1)).lower(handles, state).compile()
        for pool in pools:
            pool.async_reset()
        with self._watched():  # the first recv is watched too
            handles, carry = jax.block_until_ready(first(handles, state))
        got = wait_for_params(self._store, self._device, 0, shared.stop)
        params = got[0] if got is not None else None
        compiled = jax.jit(unroll, donate_argnums=(1, 2)).lower(params, handles, carry).compile()
        return handles, carry, compiled

    def _loop(self) -> None:
        pools = []
        shared = self._shared
        try:
            for group in range(self._groups):
                pools.append(self._make_env(group=group))
            handles, carry, unroll = self._compile(pools)
            min_version = 0  # sync collection: each unroll acts with newer params than the last
            while not shared.stop.is_set():
                got = wait_for_params(self._store, self._device, min_version, shared.stop)
                if got is None:
                    break
                params, version = got
                min_version = version + 1 if shared.sync else 0
                t0 = time.perf_counter()
                with self._watched():
                    handles, carry, out = unroll(params, handles, carry)
                    episodes = jax.device_get((out.ended, out.episode_return, out.episode_length))
                timers = dict.fromkeys(ActorStats.TIMERS, 0.0)
                timers["unroll_s"] = time.perf_counter() - t0
                self._write(out.rollouts, version, episodes, timers)
        finally:
            for pool in pools:
                pool.close()

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
