"""Actor-critic output heads. Both compute in float32 whatever the torso's dtype.

Init follows the PPO implementation details (Huang et al. 2022; Andrychowicz et al. 2021):
a tiny orthogonal gain (0.01) on the policy layer keeps the initial policy near uniform, and
gain 1.0 on the value layer.
"""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp


def _head_dense(features: int, scale: float) -> nn.Dense:
    return nn.Dense(
        features,
        kernel_init=nn.initializers.orthogonal(scale),
        bias_init=nn.initializers.zeros,
        dtype=jnp.float32,
        param_dtype=jnp.float32,
    )


class PolicyHead(nn.Module):
    """Features `[N, F]` -> float32 logits `[N, num_actions]` (orthogonal init, gain 0.01)."""

    num_actions: int

    @nn.compact
    def __call__(self, features: jax.Array) -> jax.Array:
        return _head_dense(self.num_actions, 0.01)(features.astype(jnp.float32))


class ValueHead(nn.Module):
    """Features `[N, F]` -> float32 state values `[N]` (orthogonal init, gain 1.0)."""

    @nn.compact
    def __call__(self, features: jax.Array) -> jax.Array:
        return _head_dense(1, 1.0)(features.astype(jnp.float32))[..., 0]
