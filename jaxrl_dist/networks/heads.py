"""Actor-critic output heads. Both compute in float32 whatever the torso's dtype.

Init follows the PPO implementation details (Huang et al. 2022; Andrychowicz et al. 2021):
a tiny orthogonal gain (0.01) on the policy layer keeps the initial policy near uniform, and
gain 1.0 on the value layer.

Heads of the user's own: `network.head = "my_pkg.nets:make_head"` (imported) or a name given
to `register_head(name, factory)`. The factory is called once per head of the agent with a
`HeadSpec` (which head: `role`, and the shape of one row of its outputs) and returns a flax
linen module mapping features `[N, F]` to `[N, *outputs]`, checked on the agent's action space
when the network is built. Its params live under the head's name (`policy_head/<its class>_0`).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp

from jaxrl_dist.networks.user_parts import (
    PartError,
    built_module,
    part_factory,
    register_part,
    traced,
)

SHIPPED_HEADS = ("default",)  # the algorithm's own heads
# The heads a user's factory is asked for (`HeadSpec.role`).
HEAD_ROLES = ("policy", "value", "intrinsic_value", "q")


@dataclasses.dataclass(frozen=True)
class HeadSpec:
    """What a user's head factory is given: which of the agent's heads it builds (`role`: "policy"
    = logits `(A,)` for discrete actions or the Gaussian's mean `(D,)` for continuous ones,
    "value" and "intrinsic_value" = `()`, "q" = Q-values `(A,)` or C51 logits `(A, K)`), the
    shape of one row of its outputs, and the network config's fields a head may read."""

    role: str
    outputs: tuple[int, ...]
    hidden_sizes: tuple[int, ...]
    activation: str
    layer_norm: bool


def register_head(name: str, factory: Any) -> None:
    """Makes `network.head=name` build `factory(HeadSpec)` for each of an agent's heads in this
    process; a process that loads the policy registers it too (or use `MODULE:FACTORY`)."""
    register_part("head", name, factory, SHIPPED_HEADS)


def head_factory(name: str) -> Any:
    """The factory of the user's head `name`; ValueError (one line) when there is none."""
    return part_factory("head", name, SHIPPED_HEADS, "my_pkg.nets:make_head")


class UserHead(nn.Module):
    """The user's head `factory` (a `network.head` value) for head `role`: features `[N, F]`
    -> float32 `[N, *outputs]`; PartError (one line) naming the shapes when it does not fit."""

    factory: str
    role: str
    outputs: tuple[int, ...]
    hidden_sizes: tuple[int, ...] = ()
    activation: str = "relu"
    layer_norm: bool = False

    @nn.compact
    def __call__(self, features: jax.Array) -> jax.Array:
        spec = HeadSpec(
            self.role, self.outputs, self.hidden_sizes, self.activation, self.layer_norm
        )
        does = f"maps features [N, F] to [N, *{self.outputs}]"
        module = built_module("head", self.factory, head_factory(self.factory)(spec), does)
        out = module(features.astype(jnp.float32))
        want = (features.shape[0], *self.outputs)
        if getattr(out, "shape", None) != want:
            got = getattr(out, "shape", type(out).__name__)
            raise PartError(
                f"config.network.head={self.factory!r} maps features {list(features.shape)} to "
                f"{got} for the {self.role} head, which must be {want}; return [N, "
                f"*spec.outputs] (here {self.outputs}, the action space's shape per row)"
            )
        return out.astype(jnp.float32)


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


def check_user_heads(network: nn.Module, name: str, *inputs: Any) -> None:
    """PartError (one line) unless `network` (with the user's heads `network.head=name`) builds
    on `inputs` (`jax.ShapeDtypeStruct`s: a batch of 2 rows; shapes only, nothing computed)."""
    init = lambda *x: network.init(jax.random.PRNGKey(0), *x)  # noqa: E731
    traced(init, *inputs, fails=f"config.network.head={name!r} fails on the features")


def user_head_fields(config: Any, role: str, outputs: tuple[int, ...]) -> tuple:
    """`UserHead`'s fields for `config.head` (a `NetworkConfig`'s, a user's) as head `role`."""
    return (
        config.head,
        role,
        tuple(outputs),
        tuple(config.hidden_sizes),
        config.activation,
        config.layer_norm,
    )


class GaussianHead(nn.Module):
    """Features `[N, F]` -> `{"mean": [N, D], "log_std": [N, D]}` float32 (a diagonal Gaussian).

    The mean layer uses gain 0.01 (Andrychowicz et al. 2021: start near zero mean). `log_std` is
    one learned vector shared by all states (PPO's default, Schulman et al. 2017), or with
    `state_dependent=True` a linear layer of the features; clipped to [-20, 2] either way.
    """

    action_dim: int
    state_dependent: bool = False
    log_std_init: float = 0.0
    user_mean: tuple = ()  # a user's head for the mean: `UserHead`'s fields (`user_head_fields`)

    @nn.compact
    def __call__(self, features: jax.Array) -> dict[str, jax.Array]:
        features = features.astype(jnp.float32)
        if self.user_mean:
            mean = UserHead(*self.user_mean, name="mean")(features)
        else:
            mean = _head_dense(self.action_dim, 0.01)(features)
        if self.state_dependent:
            log_std = _head_dense(self.action_dim, 0.01)(features) + self.log_std_init
        else:
            init = nn.initializers.constant(self.log_std_init)
            log_std = self.param("log_std", init, (self.action_dim,), jnp.float32)
            log_std = jnp.broadcast_to(log_std, mean.shape)
        return {"mean": mean, "log_std": jnp.clip(log_std, -20.0, 2.0)}
