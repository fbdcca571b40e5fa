"""Data that crosses a boundary: actor -> learner rollouts and the learner's state.

Rollouts are stored *time-step aligned*, the way EnvPool returns them: entry `i` of `obs`,
`reward`, `terminated` and `truncated` is one `recv()` result, so the reward and end flags at
index `i` belong to the transition that *arrived* at `obs[i]`. Transition `t` (for `t < T`) is

    obs[t] --action[t]--> obs[t + 1],  r_t = reward[t + 1],
    terminated_t = terminated[t + 1],  truncated_t = truncated[t + 1].

EnvPool resets automatically: after a step that ends an episode, the next step ignores the action
and returns the first observation of a new episode with reward 0. That transition starts at a
final observation, so it is recognised by `terminated[t] | truncated[t]` and masked out of losses.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import chex
import jax
import jax.numpy as jnp
import numpy as np

PyTree = Any


class Rollout(NamedTuple):
    """A batch of `B` independent env segments of `T` transitions, time-major.

    Multi-agent envs add an optional agents axis after B where the env gives one value per
    agent (`reward [T + 1, B, agents]`, per-agent observations); episode statistics and
    evaluation keep it (`[episodes, agents]` returns).

    Attributes:
      obs: `[T + 1, B, *obs_shape]` observations; `obs[T]` is the next segment's `obs[0]`.
      reward: `[T + 1, B]` float32 reward received on arriving at `obs[i]`.
      terminated: `[T + 1, B]` bool, `obs[i]` is terminal (bootstrap from zero).
      truncated: `[T + 1, B]` bool, the episode was cut at `obs[i]` (bootstrap from its value).
      action: `[T, B, ...]` action taken at `obs[t]`.
      agent_extras: dict of `[T, B, ...]` arrays the algorithm's act function returned (e.g.
        behaviour policy logits for V-trace). The runtime stores them without looking inside.
      policy_version: `[T, B]` int32 learner version of the params that chose `action[t]`.
      core_state: `[1, B, ...]` a recurrent policy's core state fed with `obs[0]` (after its
        reset where `obs[0]` starts an episode), what the learner unrolls from; a time axis of
        one keeps every leaf `[time, B, ...]`, so batching and storage treat it like the rest.
        `{}` for a memoryless policy (`ActorCore.core_state`).
    """

    obs: PyTree
    reward: Any
    terminated: Any
    truncated: Any
    action: Any
    agent_extras: dict[str, Any]
    policy_version: Any
    core_state: Any = {}  # noqa: RUF012  never mutated; NamedTuple defaults are shared

    @property
    def unroll_length(self) -> int:
        return self.action.shape[0]

    @property
    def batch_size(self) -> int:
        return self.action.shape[1]


def assert_rollout_shapes(rollout: Rollout) -> None:
    """Checks the `[T + 1, B]` / `[T, B]` layout where a rollout crosses into the learner."""
    t, b = rollout.action.shape[:2]
    chex.assert_tree_shape_prefix((rollout.obs, rollout.reward), (t + 1, b))
    chex.assert_tree_shape_prefix((rollout.terminated, rollout.truncated), (t + 1, b))
    chex.assert_tree_shape_prefix(
        (rollout.action, rollout.agent_extras, rollout.policy_version), (t, b)
    )
    chex.assert_tree_shape_prefix(rollout.core_state, (1, b))


def concatenate_rollouts(rollouts: list[Rollout]) -> Rollout:
    """Joins rollouts along the batch axis (axis 1); device arrays on one device stay there,
    arrays from several devices (actors on different devices) are joined on the host."""
    if len(rollouts) == 1:
        return rollouts[0]

    def join(*xs):
        on_device = [x for x in xs if isinstance(x, jax.Array)]
        if on_device and len(on_device) == len(xs):
            if len({d for x in on_device for d in x.devices()}) == 1:
                return jnp.concatenate(xs, axis=1)
        return np.concatenate([np.asarray(x) for x in xs], axis=1)  # mixed devices: via host

    return jax.tree.map(join, *rollouts)


def key_names(path) -> list[str]:
    """A key path's keys as strings: dict keys, NamedTuple field names, sequence indices."""
    return [str(getattr(k, "key", getattr(k, "name", getattr(k, "idx", k)))) for k in path]


def path_name(path) -> str:
    """A key path as `"agent_extras/log_prob"`: how checkpoints name a tree's leaves."""
    return "/".join(key_names(path))


# An observation with a legal-action mask (a board game's) is the dict
# `{AGENT_VIEW: [..., *obs_shape], ACTION_MASK: [..., A] bool}`; any other observation is the view.
AGENT_VIEW, ACTION_MASK = "agent_view", "action_mask"


def split_observation(obs: PyTree) -> tuple[Any, Any]:
    """`(view, action_mask or None)` of an observation (see `AGENT_VIEW`)."""
    if isinstance(obs, dict) and ACTION_MASK in obs:
        return obs[AGENT_VIEW], obs[ACTION_MASK]
    return obs, None


def pad_rows(obs: PyTree, rows: int) -> PyTree:
    """`obs` (`[n, ...]` NumPy leaves) padded with zero rows to `rows` (one compiled batch shape
    for every batch); in a padded row of an action mask every action is legal, so a masked
    policy there is well defined."""

    def pad(x: np.ndarray) -> np.ndarray:
        out = np.zeros((rows, *x.shape[1:]), x.dtype)
        out[: len(x)] = x
        return out

    out = jax.tree.map(pad, obs)
    mask = split_observation(out)[1]
    if mask is not None:
        mask[len(jax.tree.leaves(obs)[0]) :] = True
    return out


def pad_request(
    obs: PyTree, rows: np.ndarray, first: np.ndarray, size: int, pad_row: int
) -> tuple[PyTree, np.ndarray, np.ndarray]:
    """A request of `n` rows of a per-row state (`obs [n, ...]`, the state rows `rows [n]`,
    the episode starts `first [n]`) padded to `size` rows, one compiled shape for every
    request: zero observations (`pad_rows`) acting from the state's padding row `pad_row`,
    starting nothing; the caller drops their results."""
    pad = size - len(rows)
    rows = np.concatenate([np.asarray(rows, np.int32), np.full(pad, pad_row, np.int32)])
    first = np.concatenate([np.asarray(first, bool), np.zeros(pad, bool)])
    return pad_rows(obs, size), rows, first


def windows(held: Rollout, slots: Any, t: Any, n: int, xp: Any = np) -> Rollout:
    """The `[n + 1, B]` windows starting at transition `t[j]` of ring slot `slots[j]`, cut at
    the segment end (`data/prioritized.py` says how). `held`: the ring, `[T + 1 or T, slots, ...]`;
    `xp`: the array module (NumPy for the host replay, `jax.numpy` for the device replay of the
    Anakin runtime and for R2D2's n-step targets inside a sequence), so all of them cut windows
    by this one function."""
    unroll = held.action.shape[0]
    times = t[None, :] + xp.arange(n + 1)[:, None]  # [n + 1, B]
    past_end = times >= unroll  # at and after obs[T]: the cut

    def gather(ring: Any, steps: int) -> Any:
        return ring[xp.minimum(times[:steps], ring.shape[0] - 1), slots[None, :]]

    window = jax.tree.map(
        lambda ring: gather(ring, n + 1),
        held._replace(action=None, agent_extras=None, policy_version=None, core_state={}),
    )
    per_step = jax.tree.map(
        lambda ring: gather(ring, n),
        {"action": held.action, "extras": held.agent_extras, "version": held.policy_version},
    )
    beyond = times > unroll  # after obs[T]: no reward there
    return window._replace(
        reward=xp.where(beyond, 0, window.reward).astype(held.reward.dtype),
        truncated=window.truncated | past_end,
        action=per_step["action"],
        agent_extras=per_step["extras"],
        policy_version=per_step["version"],
    )


def local_replica(tree: PyTree) -> PyTree:
    """This process's copy of replicated arrays (on one of its devices); other leaves as they
    are. `jax.device_put(x, device)` refuses arrays that span other processes."""
    return jax.tree.map(lambda x: x.addressable_data(0) if isinstance(x, jax.Array) else x, tree)


def keys_under(values: dict[str, Any], prefix: str) -> dict[str, Any]:
    """The entries of `values` whose key starts with `prefix`, the prefix removed: one part of
    a flat dict keyed "NAME/<key>" (an agent's hyperparameters or metrics, a pool's arrays);
    every entry for the prefix ""."""
    return {k[len(prefix) :]: v for k, v in values.items() if k.startswith(prefix)}
