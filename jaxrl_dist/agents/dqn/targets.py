"""The n-step target of a replay window's first transition, pure.

A prioritized replay hands the learner `[N + 1, B]` windows (`jaxrl_dist.data.prioritized`):
column j is `obs[t .. t + N]` of a stored segment, time-step aligned (`jaxrl_dist.types`), its
transition 0 the one that was sampled. Its n-step target (n <= N, traced, so a run can change it
without new windows or a recompile) stops at the first episode end inside the window:

    m   = min(n, first k >= 1 with terminated[k] | truncated[k])
    r_t = sum_{k=1..m} gamma^(k-1) reward[k]
    discount_t = gamma^m * (1 - terminated[m])        # a truncation bootstraps from obs[m]
    obs_t = obs[m]

so `target = r_t + discount_t * value(obs_t)` (or, for C51, the atoms shifted to
`r_t + discount_t * z`): the same n-step return as `ops.n_step_bootstrapped_returns` on the
window's transitions, in the form the single-transition ops take.
"""

from __future__ import annotations

from typing import NamedTuple

import chex
import jax
import jax.numpy as jnp

from jaxrl_dist.types import Rollout


class NStepTarget(NamedTuple):
    """The n-step transition of each window's first step.

    Attributes:
      r_t: `[B]` float32 discounted reward sum over the `m` steps taken.
      discount_t: `[B]` float32 `gamma^m`, 0 where the window's episode terminated at step `m`.
      obs_t: `[B, ...]` the observation to bootstrap from (`obs[m]`).
      steps: `[B]` int32 `m`, the steps the return covers (1..n).
    """

    r_t: jax.Array
    discount_t: jax.Array
    obs_t: jax.Array
    steps: jax.Array


def n_step_target(window: Rollout, n: jax.Array | int, discount: float) -> NStepTarget:
    """The n-step target of transition 0 of each `[N + 1, B]` window (see the module).

    Args:
      window: `[N + 1, B]` rollout (`action` `[N, B]`).
      n: the return length, clipped to `[1, N]`; an int or a traced scalar.
      discount: gamma.
    """
    num_steps, batch = window.action.shape[:2]
    chex.assert_shape([window.reward, window.terminated, window.truncated], (num_steps + 1, batch))
    n = jnp.clip(jnp.asarray(n, jnp.int32), 1, num_steps)
    k = jnp.arange(1, num_steps + 1)[:, None]  # [N, 1]
    ended = (window.terminated[1:] | window.truncated[1:]).astype(jnp.int32)  # [N, B]
    ended_before = (jnp.cumsum(ended, axis=0) - ended) > 0  # an end strictly before step k
    taken = (k <= n) & ~ended_before  # [N, B]: step k's reward counts
    steps = jnp.sum(taken, axis=0).astype(jnp.int32)  # [B], >= 1: step 1 always counts
    gamma_k = jnp.asarray(discount, jnp.float32) ** (k - 1).astype(jnp.float32)
    r_t = jnp.sum(jnp.where(taken, gamma_k * window.reward[1:].astype(jnp.float32), 0.0), axis=0)
    columns = jnp.arange(batch)
    terminated = jnp.asarray(window.terminated)[steps, columns]
    discount_t = jnp.where(terminated, 0.0, jnp.asarray(discount, jnp.float32) ** steps)
    obs_t = jax.tree.map(lambda x: jnp.asarray(x)[steps, columns], window.obs)
    return NStepTarget(r_t, discount_t.astype(jnp.float32), obs_t, steps)
