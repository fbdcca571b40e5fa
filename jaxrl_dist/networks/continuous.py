"""The networks of the off-policy continuous-control agents (SAC, TD3, DDPG): a policy of the
observation and an ensemble of critics of the observation and the action, each with a torso
of its own (`config.torso`, the shipped ones or the user's), over any leading dims.

- `ContinuousPolicy`: `obs [..., *obs_shape]` -> a squashed Gaussian's `{"mean", "log_std"}`
  `[..., D]` (SAC; the log-std is a layer of the features, clipped to [-20, 2]), or the
  deterministic action `tanh(.)` `[..., D]` in `[-1, 1]` (TD3, DDPG).
- `CriticEnsemble`: `(obs [..., *obs_shape], action [..., D]) -> [E, ...]`, `E` critics with
  params of their own (stacked on a leading axis, one `nn.vmap`). With the MLP torso a critic
  reads the observation and the action concatenated (as the papers' and CleanRL's); with an
  image or a user's torso it reads the torso's features and the action through an MLP of
  `hidden_sizes`.

Heads of the user's own (`config.head`) build the policy's mean or action (role "policy",
outputs `(D,)`) and each critic's value (role "q", outputs `()`).
"""

from __future__ import annotations

from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp

from jaxrl_dist.networks import NetworkConfig, config_torso
from jaxrl_dist.networks.heads import (
    GaussianHead,
    UserHead,
    ValueHead,
    check_user_heads,
    user_head_fields,
)
from jaxrl_dist.networks.torsos import flatten_obs, torso_input


class ContinuousPolicy(nn.Module):
    """The policy: a squashed Gaussian (`gaussian`) or a deterministic tanh action (see the
    module), over `action_dim` dimensions."""

    config: NetworkConfig
    obs_shape: tuple[int, ...]
    action_dim: int
    torso_name: str
    gaussian: bool

    @nn.compact
    def __call__(self, obs: jax.Array) -> Any:
        lead, flat = flatten_obs(obs, self.obs_shape)
        features = config_torso(self.torso_name, self.config)(flat).astype(jnp.float32)
        n, config = self.action_dim, self.config
        user = user_head_fields(config, "policy", (n,)) if config.user_head else ()
        if self.gaussian:
            out = GaussianHead(n, True, config.log_std_init, user, name="policy_head")(features)
        elif user:
            out = jnp.tanh(UserHead(*user, name="policy_head")(features))
        else:
            dense = nn.Dense(n, kernel_init=nn.initializers.orthogonal(0.01), name="policy_head")
            out = jnp.tanh(dense(features))
        return jax.tree.map(lambda x: x.reshape((*lead, n)), out)


class Critic(nn.Module):
    """One critic: `(obs [N, *obs_shape], action [N, D]) -> [N]` float32."""

    config: NetworkConfig
    torso_name: str

    @nn.compact
    def __call__(self, obs: jax.Array, action: jax.Array) -> jax.Array:
        action = action.astype(jnp.float32)
        if self.torso_name == "mlp":
            joined = jnp.concatenate(
                [obs.reshape(obs.shape[0], -1).astype(jnp.float32), action], -1
            )
            features = config_torso("mlp", self.config)(joined)
        else:
            seen = config_torso(self.torso_name, self.config)(obs).astype(jnp.float32)
            features = config_torso("mlp", self.config, "mixer")(
                jnp.concatenate([seen, action], -1)
            )
        if self.config.user_head:
            head = UserHead(*user_head_fields(self.config, "q", ()), name="q_head")
        else:
            head = ValueHead(name="q_head")
        return head(features.astype(jnp.float32)).reshape(obs.shape[0])


class CriticEnsemble(nn.Module):
    """`num_critics` critics with params of their own: `(obs [..., *obs_shape], action [...,
    D]) -> [num_critics, ...]` float32; their params stacked `[num_critics, ...]` under
    `"critics"`."""

    config: NetworkConfig
    obs_shape: tuple[int, ...]
    torso_name: str
    num_critics: int

    @nn.compact
    def __call__(self, obs: jax.Array, action: jax.Array) -> jax.Array:
        lead, flat = flatten_obs(obs, self.obs_shape)
        action = action.reshape((flat.shape[0], action.shape[-1]))
        critics = nn.vmap(
            Critic,
            variable_axes={"params": 0},
            split_rngs={"params": True},
            in_axes=None,
            out_axes=0,
            axis_size=self.num_critics,
        )(self.config, self.torso_name, name="critics")
        return critics(flat, action).reshape((self.num_critics, *lead))


def make_continuous_networks(
    config: NetworkConfig,
    obs_shape: tuple[int, ...],
    obs_dtype: Any,
    action_dim: int,
    torso_name: str,
    *,
    gaussian: bool,
    num_critics: int,
) -> tuple[ContinuousPolicy, CriticEnsemble]:
    """The policy and the critics for `obs_shape` observations of `obs_dtype` and `action_dim`
    action dimensions; a user's heads are checked on them (PartError, one line, when they do
    not fit)."""
    policy = ContinuousPolicy(config, tuple(obs_shape), action_dim, torso_name, gaussian)
    critics = CriticEnsemble(config, tuple(obs_shape), torso_name, num_critics)
    if config.user_head:
        obs = torso_input(obs_shape, obs_dtype, config.normalize_obs)
        action = jax.ShapeDtypeStruct((2, action_dim), jnp.float32)
        check_user_heads(policy, config.head, obs)
        check_user_heads(critics, config.head, obs, action)
    return policy, critics
