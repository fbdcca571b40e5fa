"""Pieces every actor-critic loss shares: episode boundaries and categorical policies."""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import optax

from jaxrl_dist.types import Rollout


class Transitions(NamedTuple):
    """Per-transition views of a time-step-aligned `[T + 1, B]` rollout (see `types.py`).

    Attributes:
      r_t: `[T, B]` rewards; on a truncated transition `discount * V(final obs)` is folded in
        (stop-gradiented), so the bootstrap happens there and nothing of the next episode leaks.
      discount_t: `[T, B]` zero where the episode ended (terminated or truncated), else gamma.
      mask: `[T, B]` float32, zero on EnvPool's reset transitions (they carry no signal).
    """

    r_t: jax.Array
    discount_t: jax.Array
    mask: jax.Array


def transitions(rollout: Rollout, values: jax.Array, discount: float) -> Transitions:
    """Rewards, discounts and masks of `rollout`'s `T` transitions given `values` `[T + 1, B]`."""
    terminated_t = rollout.terminated[1:]
    truncated_t = jnp.logical_and(rollout.truncated[1:], ~terminated_t)
    ended_tm1 = jnp.logical_or(rollout.terminated[:-1], rollout.truncated[:-1])
    discount_t = discount * (1.0 - jnp.logical_or(terminated_t, truncated_t))
    r_t = rollout.reward[1:] + discount * truncated_t * jax.lax.stop_gradient(values[1:])
    return Transitions(r_t, discount_t, (~ended_tm1).astype(jnp.float32))


def categorical_log_prob(logits: jax.Array, action: jax.Array) -> jax.Array:
    """log pi(action) for logits `[..., A]` and integer actions `[...]`."""
    log_pi = jax.nn.log_softmax(logits)
    return jnp.take_along_axis(log_pi, action[..., None].astype(jnp.int32), axis=-1)[..., 0]


def categorical_entropy(logits: jax.Array) -> jax.Array:
    log_pi = jax.nn.log_softmax(logits)
    return -jnp.sum(jnp.exp(log_pi) * log_pi, axis=-1)


def masked_mean(x: jax.Array, mask: jax.Array) -> jax.Array:
    """Mean of `x` over the entries where `mask` is 1 (global under sharding)."""
    return jnp.sum(x * mask) / jnp.maximum(mask.sum(), 1.0)


def linear_or_constant(value: float, anneal: bool, steps: int) -> optax.Schedule:
    """Linear decay to 0 over `steps` optimizer steps, or a constant."""
    return (
        optax.linear_schedule(value, 0.0, max(1, steps))
        if anneal
        else optax.constant_schedule(value)
    )
