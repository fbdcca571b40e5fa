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


class GaussianHead(nn.Module):
    """Features `[N, F]` -> `{"mean": [N, D], "log_std": [N, D]}` float32 (a diagonal Gaussian).

    The mean layer uses gain 0.01 (Andrychowicz et al. 2021: start near zero mean). `log_std` is
    one learned vector shared by all states (PPO's default, Schulman et al. 2017), or with
    `state_dependent=True` a linear layer of the features; clipped to [-20, 2] either way.
    """

    action_dim: int
    state_dependent: bool = False
    log_std_init: float = 0.0

    @nn.compact
    def __call__(self, features: jax.Array) -> dict[str, jax.Array]:
        features = features.astype(jnp.float32)
        mean = _head_dense(self.action_dim, 0.01)(features)
        if self.state_dependent:
            log_std = _head_dense(self.action_dim, 0.01)(features) + self.log_std_init
        else:
            init = nn.initializers.constant(self.log_std_init)
            log_std = self.param("log_std", init, (self.action_dim,), jnp.float32)
            log_std = jnp.broadcast_to(log_std, mean.shape)
        return {"mean": mean, "log_std": jnp.clip(log_std, -20.0, 2.0)}
