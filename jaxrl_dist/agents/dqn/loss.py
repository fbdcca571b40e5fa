"""Rainbow's loss terms, pure, per transition: expected-value or C51 (double) Q-learning toward
an n-step target, and prioritized replay's importance weights."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import optax

from jaxrl_dist import ops
from jaxrl_dist.agents.dqn.config import RainbowConfig
from jaxrl_dist.agents.dqn.targets import NStepTarget


def expected_q(out: jax.Array, atoms: jax.Array | None) -> jax.Array:
    """Q-values `[..., A]` from a Q network's output: itself, or C51 logits `[..., A, K]`'s
    expectation over `atoms` `[K]`."""
    if atoms is None:
        return out
    return jnp.sum(jax.nn.softmax(out, axis=-1) * atoms, axis=-1)


def transition_losses(
    out_tm1: jax.Array,
    a_tm1: jax.Array,
    target: NStepTarget,
    out_t: jax.Array,
    q_t_selector: jax.Array,
    atoms: jax.Array | None,
    config: RainbowConfig,
) -> tuple[jax.Array, jax.Array]:
    """Each transition's loss and new priority.

    Args:
      out_tm1: `[B, A]` online Q-values (or `[B, A, K]` logits) at the sampled step.
      a_tm1: `[B]` int actions taken there.
      target: the n-step transitions (`r_t`, `discount_t` `[B]`).
      out_t: `[B, A]` (or `[B, A, K]`) target-network output at `target.obs_t`.
      q_t_selector: `[B, A]` Q-values that pick the bootstrap action: the online network's for
        double Q-learning, else the target network's.
      atoms: `[K]` C51 support, or None for expected-value Q-learning.
      config: `loss` ("huber" | "l2") applies without atoms.

    Returns:
      (loss `[B]`, priority `[B]` >= 0): the cross-entropy for C51 (used as its own priority,
      as Acme does; the Rainbow paper's KL differs by the target's entropy), else the Huber
      (delta 1) or half squared TD error with priority `|TD error|`.
    """
    a_tm1 = a_tm1.astype(jnp.int32)
    if atoms is not None:
        cross_entropy = jax.vmap(ops.categorical_double_q_learning, (None, 0, 0, 0, 0, None, 0, 0))(
            atoms, out_tm1, a_tm1, target.r_t, target.discount_t, atoms, out_t, q_t_selector
        )
        return cross_entropy, jax.lax.stop_gradient(cross_entropy)
    td = jax.vmap(ops.double_q_learning)(
        out_tm1, a_tm1, target.r_t, target.discount_t, out_t, q_t_selector
    )
    loss = optax.huber_loss(td) if config.loss == "huber" else 0.5 * jnp.square(td)
    return loss, jnp.abs(jax.lax.stop_gradient(td))


def importance_weights(
    probability: jax.Array, count: jax.Array, exponent: jax.Array | float
) -> jax.Array:
    """`(count * probability) ** -exponent`, divided by the batch's largest (Schaul et al. 2016,
    so the weights only ever scale updates down). `[B]` each."""
    log_w = -exponent * jnp.log(count * probability)
    return jnp.exp(log_w - jnp.max(log_w))
