"""The policy seam: actors ask a policy client for actions and never see where inference runs.

Two clients: `LocalClient` (the actor's own jitted inference on its device, as in Sebulba) and
`ServerClient` (a central inference server batching many actors' requests, as in SEED RL;
`inference_server.py`). Both run the agent's `ActorCore` through `make_inference_step`, so the
same pure functions act either way, and both keep the actor's per-env state.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, NamedTuple, Protocol

import jax
import jax.numpy as jnp
import numpy as np

from jaxrl_dist.acting.params_store import ParamsStore
from jaxrl_dist.agents.base import ActorCore, ActorIdentity, act_by_rows
from jaxrl_dist.threads import POLL_S
from jaxrl_dist.types import PyTree, pad_request


class ActResult(NamedTuple):
    """Host (NumPy) results of one inference call for `B` envs.

    Attributes:
      action: `[B, ...]` the policy's actions (what the rollout stores).
      env_action: `[B, ...]` what the envs receive.
      extras: `{name: [B, ...]}` the actor core's extras (e.g. the behaviour log-probability).
      version: the learner version of the params that acted.
      core_state: `[B, ...]` the recurrent core state each env acted from (after the resets of
        `first`): a segment starting at this observation stores it. `{}` when memoryless.
    """

    action: np.ndarray
    env_action: np.ndarray
    extras: dict[str, np.ndarray]
    version: int
    core_state: Any = None


def episode_starts(first: np.ndarray | None, rows: int) -> np.ndarray:
    """`first` as `[rows]` bool (None: no env starts an episode)."""
    return np.zeros(rows, bool) if first is None else np.asarray(first, bool)


class PolicyClient(Protocol):
    """What an actor thread asks for actions."""

    def act(
        self, obs: np.ndarray, env_ids: np.ndarray, min_version: int = 0, first=None
    ) -> ActResult | None:
        """Actions for `obs [B, ...]` of the envs `env_ids [B]`, with params of at least
        `min_version`; `first [B]` marks the observations that start an episode (a recurrent
        policy resets its memory there). None if the run stops while waiting."""

    def reset(self, key: jax.Array, keep_memory: bool = False) -> None:
        """Re-initialises this actor's per-env state from `key` (lockstep: at every unroll);
        `keep_memory`: each env's recurrent state stays (`ActorCore.with_core_state`)."""

    def memory(self) -> PyTree:
        """Host copies of this actor's per-env recurrent states, `[num_envs, ...]` (`{}` for a
        memoryless policy)."""

    def set_memory(self, memory: PyTree) -> None:
        """Puts back per-env recurrent states `memory()` gave (a lockstep resume or restart)."""


def make_inference_step(core: ActorCore, greedy: Any = False) -> Callable:
    """`step(params, obs [N, ...], rows [N], first [N], state [R, ...]) -> (action, env_action,
    extras, core_state, state)`: gathers the per-env actor state of `rows`, starts the episodes
    of `first`, acts, scatters the new state back; `core_state` is what each row acted from.
    Jit it with the state donated; rows may repeat a padding row whose result is ignored.
    `greedy`: the policy's mode (Q-agents: epsilon 0), with zeros for `act`'s extras (an
    agent that acts so learns off-policy, or not at all: `config.exploration_mask`); or `[R]`
    bool, per state row (the streams of a greedy seat, `agents/base.py`: `act_by_rows`)."""
    by_rows = np.ndim(greedy) > 0

    def step(params, obs, rows, first, state):
        picked = core.start_episodes(jax.tree.map(lambda s: s[rows], state), first)
        core_state = core.core_state(picked)
        if by_rows:
            rows_greedy = jnp.asarray(greedy, bool)[rows]
            action, extras, sampled = act_by_rows(core, params, obs, picked, rows_greedy)
        else:
            action, extras, sampled = core.act(params, obs, picked)
        if not by_rows and greedy:  # the sampled act's values go unused: XLA drops that work
            action, sampled = core.greedy_act(params, obs, picked)
            extras = jax.tree.map(jnp.zeros_like, extras)
        picked = sampled
        state = jax.tree.map(lambda s, new: s.at[rows].set(new), state, picked)
        return action, core.env_action(action), extras, core_state, state

    return step


def wait_for_params(
    store: ParamsStore, device: jax.Device, min_version: int, stop: threading.Event
) -> tuple[PyTree, int] | None:
    """(params on `device`, version >= `min_version`), or None once `stop` is set."""
    while not stop.is_set():
        try:
            return store.get(device, POLL_S, min_version)
        except TimeoutError:
            continue
    return None


def as_structure(like: PyTree, memory: PyTree) -> PyTree:
    """`memory`'s leaves in `like`'s tree structure: a checkpoint gives tuples back as lists
    (an LSTM's `(c, h)`), the leaves in the same order."""
    return jax.tree.unflatten(jax.tree.structure(like), jax.tree.leaves(memory))


class LocalClient:
    """Inference on the actor's own device: the newest params at every call, one jitted step
    (key split, act, env action) per `recv()`.

    `pad_to`: every call acts on this many rows, a padding row of the state filling the rest
    (as the inference server does), so a pool whose `recv()` returns a varying number of rows
    (a seated game's learner streams) compiles the step once instead of once per row count;
    0: the rows as given (a pool's fixed batch)."""

    def __init__(
        self,
        *,
        step: Callable,
        core: ActorCore,
        store: ParamsStore,
        device: jax.Device,
        identity: ActorIdentity,
        num_envs: int,
        key: jax.Array,
        stop: threading.Event,
        pad_to: int = 0,
    ):
        self._step, self._core, self._store = step, core, store
        self._device, self._identity, self._num_envs = device, identity, num_envs
        self._stop, self._pad_to = stop, pad_to
        self._state: PyTree = None
        self.reset(key)

    def reset(self, key: jax.Array, keep_memory: bool = False) -> None:
        state = self._core.init_state(self._identity, self._num_envs, key)
        if self._pad_to:  # row `num_envs`: the padding row, whose results are dropped
            state = jax.tree.map(lambda s: jnp.concatenate([s, s[:1]]), state)
        state = jax.device_put(state, self._device)
        if keep_memory and self._state is not None:
            state = self._core.with_core_state(state, self._core.core_state(self._state))
        self._state = state

    def memory(self) -> PyTree:
        rows = self._num_envs
        return jax.tree.map(lambda c: np.asarray(c[:rows]), self._core.core_state(self._state))

    def set_memory(self, memory: PyTree) -> None:
        core = self._core.core_state(self._state)
        memory = as_structure(core, memory)
        core = jax.tree.map(lambda c, m: c.at[: len(m)].set(m), core, memory)
        self._state = self._core.with_core_state(self._state, core)

    def act(
        self, obs: np.ndarray, env_ids: np.ndarray, min_version: int = 0, first=None
    ) -> ActResult | None:
        got = wait_for_params(self._store, self._device, min_version, self._stop)
        if got is None:
            return None
        params, version = got
        n = len(env_ids)
        rows, first = env_ids.astype(np.int32, copy=False), episode_starts(first, n)
        if self._pad_to:
            obs, rows, first = pad_request(obs, rows, first, self._pad_to, self._num_envs)
        *out, self._state = self._step(params, obs, rows, first, self._state)
        action, env_action, extras, core_state = jax.tree.map(lambda x: x[:n], jax.device_get(out))
        return ActResult(action, env_action, extras, version, core_state)


def jit_inference_step(core: ActorCore, greedy: Any = False) -> Any:
    """The jitted, state-donating `make_inference_step(core, greedy)`: one per process, shared
    by every local client (jit caches a compile per device and shape)."""
    return jax.jit(make_inference_step(core, greedy), donate_argnums=4)
