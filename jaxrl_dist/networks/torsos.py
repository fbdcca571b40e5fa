"""Feature extractors ("torsos") shared by the policy and value heads.

Every torso maps a flat batch `[N, *obs_shape]` to features `[N, F]` in its compute `dtype`;
parameters are always created in float32 (`param_dtype`), so `dtype=jnp.bfloat16` gives
mixed-precision compute with float32 master weights.

Image torsos take frames the way EnvPool returns them, uint8 `[N, C, H, W]` (channels first),
and do the preprocessing themselves: transpose to NHWC and scale to `[0, 1]` by 1/255.

A torso of the user's own: `network.torso = "my_pkg.nets:make_torso"` (imported), or a name
given to `register_torso(name, factory)` in the process that builds the network. The factory
is called with a `TorsoSpec` (the observation shape and the network config's MLP fields) inside
the network's own module, and returns a flax linen module mapping `[N, *obs_shape]` to `[N, F]`;
its params live under the torso's name (`torso/<its class>_0/...`).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
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

Activation = Callable[[jax.Array], jax.Array]

ACTIVATIONS: dict[str, Activation] = {"tanh": nn.tanh, "relu": nn.relu}
CONV_TORSOS = ("nature_cnn", "impala_resnet")  # the torsos that convolve
SHIPPED_TORSOS = ("mlp", *CONV_TORSOS)

# IMPALA ResNet convs use LeCun-normal (flax's default, as in Cleanba, Huang et al. 2023): with
# gain-sqrt(2) orthogonal init the six un-normalised residual blocks inflate activations ~50x.
_RESNET_CONV_INIT = nn.initializers.lecun_normal()


def _orthogonal(scale: float = math.sqrt(2.0)) -> nn.initializers.Initializer:
    """Orthogonal kernel init (Saxe et al. 2014); sqrt(2) is the usual gain for ReLU/tanh."""
    return nn.initializers.orthogonal(scale)


def frames_to_nhwc(frames: jax.Array, dtype: jnp.dtype) -> jax.Array:
    """uint8 `[N, C, H, W]` frames -> `[N, H, W, C]` in `dtype`, scaled to `[0, 1]`."""
    x = jnp.transpose(frames, (0, 2, 3, 1)).astype(dtype)
    return x * jnp.asarray(1.0 / 255.0, dtype)


class MLPTorso(nn.Module):
    """Fully connected torso: `[N, *obs_shape] -> [N, hidden_sizes[-1]]`.

    Dense layers with orthogonal init (gain sqrt(2)) and zero bias, each followed by
    `activation`, as in the PPO implementation details of Huang et al. (2022); with
    `layer_norm`, a LayerNorm between each Dense and its activation (as PQN's networks, Gallici
    et al. 2024). Observations with more than one trailing dim are flattened first.
    """

    hidden_sizes: Sequence[int] = (64, 64)
    activation: str = "tanh"
    dtype: jnp.dtype = jnp.float32
    layer_norm: bool = False

    @nn.compact
    def __call__(self, obs: jax.Array) -> jax.Array:
        act = ACTIVATIONS[self.activation]
        x = obs.reshape(obs.shape[0], -1).astype(self.dtype)
        for size in self.hidden_sizes:
            x = act(_normed(self.layer_norm, self.dtype, _dense(size, self.dtype)(x)))
        return x


class NatureCNNTorso(nn.Module):
    """DQN "Nature" CNN (Mnih et al. 2015): `[N, C, H, W] uint8 -> [N, 512]`.

    conv 32 8x8 stride 4 -> conv 64 4x4 stride 2 -> conv 64 3x3 stride 1 (VALID padding,
    ReLU after each) -> flatten -> Dense 512 -> ReLU. For 84x84 frames the conv stack gives
    `[N, 7, 7, 64]` (84 -> 20 -> 9 -> 7). Orthogonal init (gain sqrt(2)), zero bias.
    `layer_norm`: a LayerNorm before the last ReLU.
    """

    dtype: jnp.dtype = jnp.float32
    layer_norm: bool = False

    @nn.compact
    def __call__(self, frames: jax.Array) -> jax.Array:
        x = frames_to_nhwc(frames, self.dtype)
        for features, kernel, stride in ((32, 8, 4), (64, 4, 2), (64, 3, 1)):
            x = nn.relu(_conv(features, kernel, stride, "VALID", self.dtype, _orthogonal())(x))
        x = x.reshape(x.shape[0], -1)
        return nn.relu(_normed(self.layer_norm, self.dtype, _dense(512, self.dtype)(x)))


class ResidualBlock(nn.Module):
    """IMPALA residual block: `x + conv(relu(conv(relu(x))))`, 3x3 SAME convs, shape-preserving."""

    features: int
    dtype: jnp.dtype = jnp.float32

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        y = _conv(self.features, 3, 1, "SAME", self.dtype, _RESNET_CONV_INIT)(nn.relu(x))
        y = _conv(self.features, 3, 1, "SAME", self.dtype, _RESNET_CONV_INIT)(nn.relu(y))
        return x + y


class ImpalaStage(nn.Module):
    """conv 3x3 -> max-pool 3x3 stride 2 (SAME) -> `num_blocks` residual blocks.

    `[N, H, W, C_in] -> [N, ceil(H / 2), ceil(W / 2), features]`.
    """

    features: int
    num_blocks: int = 2
    dtype: jnp.dtype = jnp.float32

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        x = _conv(self.features, 3, 1, "SAME", self.dtype, _RESNET_CONV_INIT)(x)
        x = nn.max_pool(x, window_shape=(3, 3), strides=(2, 2), padding="SAME")
        for _ in range(self.num_blocks):
            x = ResidualBlock(self.features, self.dtype)(x)
        return x


class ImpalaResNetTorso(nn.Module):
    """IMPALA "deep" ResNet (Espeholt et al. 2018, Fig. 3 right): `[N, C, H, W] uint8 -> [N, 256]`.

    Three `ImpalaStage`s with 16, 32, 32 channels (each halves H and W, rounding up: 84 -> 42 ->
    21 -> 11), then ReLU -> flatten -> Dense 256 -> ReLU. The paper's optional LSTM is omitted.
    Convs use LeCun-normal init, the Dense layer orthogonal (gain sqrt(2)); zero biases.
    `layer_norm`: a LayerNorm before the last ReLU.
    """

    channels: Sequence[int] = (16, 32, 32)
    num_blocks: int = 2
    dense_size: int = 256
    dtype: jnp.dtype = jnp.float32
    layer_norm: bool = False

    @nn.compact
    def __call__(self, frames: jax.Array) -> jax.Array:
        x = frames_to_nhwc(frames, self.dtype)
        for features in self.channels:
            x = ImpalaStage(features, self.num_blocks, self.dtype)(x)
        x = nn.relu(x).reshape(x.shape[0], -1)
        dense = _dense(self.dense_size, self.dtype)(x)
        return nn.relu(_normed(self.layer_norm, self.dtype, dense))


@dataclasses.dataclass(frozen=True)
class TorsoSpec:
    """What a user's torso factory is given: the observation shape of one step (`obs_shape`;
    the torso sees `[N, *obs_shape]`) and the network config's fields a torso may read."""

    obs_shape: tuple[int, ...]
    hidden_sizes: tuple[int, ...]
    activation: str
    dtype: Any
    layer_norm: bool


TorsoError = PartError  # a user's torso that cannot be built (one line, with the fix)
TorsoFactory = Callable[[TorsoSpec], nn.Module]
_USER_NAMES = ("auto", *SHIPPED_TORSOS)  # the names a user's torso cannot take


def register_torso(name: str, factory: TorsoFactory) -> None:
    """Makes `network.torso=name` build `factory(TorsoSpec)` in this process (a second
    registration of `name` replaces the first). A run's policy description saves the name, so
    the process that loads it must register it too; a `MODULE:FACTORY` torso needs no
    registration."""
    register_part("torso", name, factory, _USER_NAMES)


def torso_factory(name: str) -> TorsoFactory:
    """The factory of the user's torso `name` (registered, or `MODULE:FACTORY` imported);
    ValueError (one line) when there is none."""
    return part_factory("torso", name, _USER_NAMES, "my_pkg.nets:make_torso")


class UserTorso(nn.Module):
    """The user's torso `factory` (a `network.torso` value), built inside this module with the
    spec of the observations it is called on: `[N, *obs_shape] -> [N, F]`."""

    factory: str
    hidden_sizes: Sequence[int]
    activation: str
    dtype: Any
    layer_norm: bool

    @nn.compact
    def __call__(self, obs: jax.Array) -> jax.Array:
        spec = TorsoSpec(
            tuple(obs.shape[1:]),
            tuple(self.hidden_sizes),
            self.activation,
            self.dtype,
            self.layer_norm,
        )
        module = torso_factory(self.factory)(spec)
        does = "maps [N, *obs_shape] to [N, F]"
        return built_module("torso", self.factory, module, does)(obs)


def flatten_obs(obs: jax.Array, obs_shape: tuple[int, ...]) -> tuple[tuple[int, ...], jax.Array]:
    """(leading dims, `[N, *obs_shape]` observations): a torso sees one flat batch whatever
    the leading dims (`[B]`, `[T, B]`, ...)."""
    rank = len(obs_shape)
    if tuple(obs.shape[obs.ndim - rank :]) != tuple(obs_shape):
        raise ValueError(f"obs shape {obs.shape} does not end with obs_shape {obs_shape}")
    lead = tuple(obs.shape[: obs.ndim - rank])
    return lead, obs.reshape((math.prod(lead), *obs_shape))


def check_user_torso(
    torso: nn.Module,
    name: str,
    obs_shape: tuple[int, ...],
    obs_dtype: Any = jnp.float32,
    normalize_obs: bool = False,
) -> None:
    """TorsoError (one line) unless the user's torso module `torso` (`network.torso=name`) maps
    a batch of 2 observations `[2, *obs_shape]` to features `[2, F]` (shapes only: nothing is
    computed). The observations have the dtype the torso is given: the env's, or float32 where
    they are floats or normalised first (`normalize_obs`)."""
    obs = torso_input(obs_shape, obs_dtype, normalize_obs)
    fails = f"config.network.torso={name!r} fails on observations {list(obs.shape)} {obs.dtype}"
    features = traced(_init_output(torso), obs, fails=fails)
    if (
        not isinstance(features, jax.ShapeDtypeStruct)
        or features.shape[:1] != (2,)
        or len(features.shape) != 2
    ):
        got = getattr(features, "shape", type(features).__name__)
        raise TorsoError(
            f"config.network.torso={name!r} maps observations [2, *{obs_shape}] to {got}; a "
            "torso returns features [N, F] (flatten them in the torso)"
        )


def torso_input(
    obs_shape: tuple[int, ...], obs_dtype: Any, normalize_obs: bool
) -> jax.ShapeDtypeStruct:
    """A batch of 2 observations as a network is given them: the env's dtype, or float32
    where they are floats or normalised first."""
    floats = normalize_obs or jnp.issubdtype(obs_dtype, jnp.floating)
    return jax.ShapeDtypeStruct((2, *obs_shape), jnp.float32 if floats else obs_dtype)


def _init_output(torso: nn.Module) -> Callable[[jax.Array], jax.Array]:
    return lambda obs: torso.init_with_output(jax.random.PRNGKey(0), obs)[0]


def torso_width(
    torso: nn.Module, obs_shape: tuple[int, ...], obs_dtype: Any, normalize_obs: bool
) -> int:
    """The width F of the features `[N, F]` `torso` makes of `obs_shape` observations (shapes
    only: nothing is computed)."""
    obs = torso_input(obs_shape, obs_dtype, normalize_obs)
    return int(jax.eval_shape(_init_output(torso), obs).shape[-1])


def make_torso(
    name: str,
    hidden_sizes: Sequence[int],
    activation: str,
    dtype: jnp.dtype,
    module_name: str = "torso",
    layer_norm: bool = False,
) -> nn.Module:
    """The torso called `name` ("mlp" | "nature_cnn" | "impala_resnet", or a user's: the
    module docstring), as module `module_name`."""
    if name == "mlp":
        return MLPTorso(tuple(hidden_sizes), activation, dtype, layer_norm, name=module_name)
    if name == "nature_cnn":
        return NatureCNNTorso(dtype, layer_norm, name=module_name)
    if name == "impala_resnet":
        return ImpalaResNetTorso(dtype=dtype, layer_norm=layer_norm, name=module_name)
    return UserTorso(name, tuple(hidden_sizes), activation, dtype, layer_norm, name=module_name)


def _normed(layer_norm: bool, dtype: jnp.dtype, x: jax.Array) -> jax.Array:
    """`x` through a LayerNorm (float32 params) when `layer_norm`, else as it is."""
    return nn.LayerNorm(dtype=dtype, param_dtype=jnp.float32)(x) if layer_norm else x


def _dense(features: int, dtype: jnp.dtype) -> nn.Dense:
    return nn.Dense(
        features,
        kernel_init=_orthogonal(),
        bias_init=nn.initializers.zeros,
        dtype=dtype,
        param_dtype=jnp.float32,
    )


def _conv(
    features: int,
    kernel: int,
    stride: int,
    padding: str,
    dtype: jnp.dtype,
    kernel_init: nn.initializers.Initializer,
) -> nn.Conv:
    return nn.Conv(
        features,
        kernel_size=(kernel, kernel),
        strides=(stride, stride),
        padding=padding,
        kernel_init=kernel_init,
        bias_init=nn.initializers.zeros,
        dtype=dtype,
        param_dtype=jnp.float32,
    )
