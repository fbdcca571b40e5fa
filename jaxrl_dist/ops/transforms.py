"""R2D2's invertible value rescaling (Pohlen et al. 2018; Kapturowski et al. 2019), rlax's
names: `signed_hyperbolic` is `h`, `signed_parabolic` its inverse."""

from __future__ import annotations

import jax
import jax.numpy as jnp


def signed_hyperbolic(x: jax.Array, eps: float = 1e-3) -> jax.Array:
    """`h(x) = sign(x) (sqrt(|x| + 1) - 1) + eps x`, elementwise."""
    return jnp.sign(x) * (jnp.sqrt(jnp.abs(x) + 1.0) - 1.0) + eps * x


def signed_parabolic(x: jax.Array, eps: float = 1e-3) -> jax.Array:
    """`h^-1(x) = sign(x) (((sqrt(1 + 4 eps (eps + 1 + |x|)) - 1) / (2 eps))^2 - 1)`."""
    z = jnp.sqrt(1.0 + 4.0 * eps * (eps + 1.0 + jnp.abs(x)))
    return jnp.sign(x) * (jnp.square((z - 1.0) / (2.0 * eps)) - 1.0)
