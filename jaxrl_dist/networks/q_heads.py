"""Value-based heads for the DQN family: plain, dueling and distributional (C51), each with
ordinary or noisy linear layers. Outputs are float32 whatever the torso's dtype.

- `NoisyDense`: factorised Gaussian noisy layer (Fortunato et al. 2018, eq. 10-11):
  `w = mu_w + sigma_w * (f(eps_in) f(eps_out)^T)`, `f(x) = sign(x) sqrt(|x|)`, with
  `mu ~ U(-1/sqrt(p), 1/sqrt(p))` and `sigma = sigma0 / sqrt(p)` at init (`p` inputs). The noise
  is drawn from the `"noise"` RNG stream (`apply(..., rngs={"noise": key})`), once per call, shared
  by the batch; `deterministic=True` uses the means alone.
- `QHead`: features `[N, F]` -> Q-values `[N, A]`, or with `num_atoms > 1` logits `[N, A, K]`
  over a fixed support (the agent turns them into Q-values with the atoms). `dueling=True`
  splits the last layer into a value stream and an advantage stream combined as
  `V + A - mean_a A` (Wang et al. 2016), per atom for C51 (as in Rainbow, Hessel et al. 2018).
- `QNetwork`: a torso (`torsos.make_torso`) and a `QHead`, over any leading dims.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp

from jaxrl_dist.networks.cores import RecurrentCore, initial_core_state
from jaxrl_dist.networks.heads import SHIPPED_HEADS, UserHead
from jaxrl_dist.networks.torsos import flatten_obs, make_torso


def _scaled_noise(key: jax.Array, size: int) -> jax.Array:
    x = jax.random.normal(key, (size,), jnp.float32)
    return jnp.sign(x) * jnp.sqrt(jnp.abs(x))


class NoisyDense(nn.Module):
    """A linear layer with factorised Gaussian noise on its weights and bias (see module)."""

    features: int
    sigma0: float = 0.5

    @nn.compact
    def __call__(self, x: jax.Array, deterministic: bool = False) -> jax.Array:
        x = x.astype(jnp.float32)
        fan_in = x.shape[-1]
        bound = 1.0 / jnp.sqrt(fan_in)

        def uniform(key, shape, dtype=jnp.float32):
            return jax.random.uniform(key, shape, dtype, -bound, bound)

        sigma = nn.initializers.constant(self.sigma0 / jnp.sqrt(fan_in))
        mu_w = self.param("mu_kernel", uniform, (fan_in, self.features))
        mu_b = self.param("mu_bias", uniform, (self.features,))
        sigma_w = self.param("sigma_kernel", sigma, (fan_in, self.features))
        sigma_b = self.param("sigma_bias", sigma, (self.features,))
        if deterministic:
            return x @ mu_w + mu_b
        key_in, key_out = jax.random.split(self.make_rng("noise"))
        eps_in, eps_out = _scaled_noise(key_in, fan_in), _scaled_noise(key_out, self.features)
        w = mu_w + sigma_w * jnp.outer(eps_in, eps_out)
        return x @ w + mu_b + sigma_b * eps_out


class QHead(nn.Module):
    """Features `[N, F]` -> Q-values `[N, num_actions]` or, with `num_atoms > 1`, logits
    `[N, num_actions, num_atoms]`; float32."""

    num_actions: int
    num_atoms: int = 1
    dueling: bool = False
    noisy: bool = False
    sigma0: float = 0.5

    def _dense(self, features: int, name: str):
        if self.noisy:
            return NoisyDense(features, self.sigma0, name=name)
        return nn.Dense(features, name=name, dtype=jnp.float32, param_dtype=jnp.float32)

    def _layer(self, features: int, name: str, x: jax.Array, deterministic: bool) -> jax.Array:
        layer = self._dense(features, name)
        return layer(x, deterministic) if self.noisy else layer(x)

    @nn.compact
    def __call__(self, features: jax.Array, deterministic: bool = False) -> jax.Array:
        x = features.astype(jnp.float32)
        shape = (self.num_actions, self.num_atoms)
        advantage = self._layer(self.num_actions * self.num_atoms, "advantage", x, deterministic)
        out = advantage.reshape(*x.shape[:-1], *shape)
        if self.dueling:
            value = self._layer(self.num_atoms, "value", x, deterministic)
            value = value.reshape(*x.shape[:-1], 1, self.num_atoms)
            out = value + out - jnp.mean(out, axis=-2, keepdims=True)
        return out[..., 0] if self.num_atoms == 1 else out


class QNetwork(nn.Module):
    """Observations `[..., *obs_shape]` -> Q-values `[..., A]` or C51 logits `[..., A, K]`.

    Leading dims are flattened to one batch dim for the torso and restored on the output. Build
    it with `jaxrl_dist.networks.make_q_network`, which validates the shapes. Params:
    `{"torso", "head"}`; with `noisy`, `apply` needs `rngs={"noise": key}` unless
    `deterministic=True`.
    """

    obs_shape: tuple[int, ...]
    num_actions: int
    torso_name: str
    hidden_sizes: Sequence[int] = (64, 64)
    activation: str = "relu"
    dtype: jnp.dtype = jnp.float32
    num_atoms: int = 1
    dueling: bool = False
    noisy: bool = False
    sigma0: float = 0.5
    layer_norm: bool = False
    head: str = "default"  # or a user's head (`network.head`), built as the "q" head

    def _torso(self) -> nn.Module:
        """The torso module (called inside a compact `__call__`)."""
        args = (self.hidden_sizes, self.activation, self.dtype, "torso", self.layer_norm)
        return make_torso(self.torso_name, *args)

    def _user_head(self) -> nn.Module | None:
        """The user's Q head (`[N, F]` -> `[N, A]`, or C51's `[N, A, K]`), or None."""
        if self.head in SHIPPED_HEADS:
            return None
        outputs = (self.num_actions,) + ((self.num_atoms,) if self.num_atoms > 1 else ())
        fields = (self.head, "q", outputs, tuple(self.hidden_sizes), self.activation)
        return UserHead(*fields, self.layer_norm, name="head")

    @nn.compact
    def __call__(self, obs: jax.Array, deterministic: bool = False) -> jax.Array:
        lead, flat = flatten_obs(obs, self.obs_shape)
        if jnp.issubdtype(flat.dtype, jnp.floating):
            flat = flat.astype(jnp.float32)  # e.g. float64 observations; frames stay uint8
        features = self._torso()(flat)
        user = self._user_head()
        if user is not None:
            out = user(features)
        else:
            head = QHead(
                self.num_actions, self.num_atoms, self.dueling, self.noisy, self.sigma0, name="head"
            )
            out = head(features, deterministic)
        return out.reshape(*lead, *out.shape[1:])


class RecurrentQNetwork(QNetwork):
    """A torso, a recurrent core and the Q head over a sequence (R2D2, Kapturowski et al.
    2019): `__call__(obs [T, B, *obs_shape], first [T, B], state [B, ...]) -> (Q-values
    `[T, B, A]`, state)`, `first` and `state` as `RecurrentActorCritic`'s (`networks/cores.py`).
    Params: `{"torso", "core", "head"}`. Scalar Q-values, no noisy layers."""

    core: str = "lstm"
    core_size: int = 128
    core_input: int = 0  # the torso's feature width (a user's core starts its carry for it)

    @nn.compact
    def __call__(self, obs: jax.Array, first: jax.Array, state):  # type: ignore[override]
        lead, flat = flatten_obs(obs, self.obs_shape)
        if len(lead) != 2:
            raise ValueError(f"a core unrolls obs [T, B, *{self.obs_shape}], got {obs.shape}")
        if jnp.issubdtype(flat.dtype, jnp.floating):
            flat = flat.astype(jnp.float32)
        torso = self._torso()
        features = torso(flat).reshape((*lead, -1))
        state, out = RecurrentCore(self.core, self.core_size, name="core")(state, features, first)
        head = self._user_head() or QHead(self.num_actions, 1, self.dueling, name="head")
        q = head(out.reshape(math.prod(lead), -1))
        return q.reshape(*lead, self.num_actions), state

    @nn.nowrap  # no module context: a user's cell is built here as a module of its own
    def initial_state(self, batch: int):
        """The core state of `batch` rows an episode starts from."""
        return initial_core_state(self.core, batch, self.core_size, self.core_input)
