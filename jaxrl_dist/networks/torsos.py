"""Feature extractors ("torsos") shared by the policy and value heads.

Every torso maps a flat batch `[N, *obs_shape]` to features `[N, F]` in its compute `dtype`;
parameters are always created in float32 (`param_dtype`), so `dtype=jnp.bfloat16` gives
mixed-precision compute with float32 master weights.

Image torsos take frames the way EnvPool returns them, uint8 `[N, C, H, W]` (channels first),
and do the preprocessing themselves: transpose to NHWC and scale to `[0, 1]` by 1/255.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp

Activation = Callable[[jax.Array], jax.Array]

ACTIVATIONS: dict[str, Activation] = {"tanh": nn.tanh, "relu": nn.relu}
CONV_TORSOS = ("nature_cnn", "impala_resnet")  # the torsos that convolve

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
    `activation`, as in the PPO implementation details of Huang et al. (2022).
    Observations with more than one trailing dim are flattened first.
    """

    hidden_sizes: Sequence[int] = (64, 64)
    activation: str = "tanh"
    dtype: jnp.dtype = jnp.float32

    @nn.compact
    def __call__(self, obs: jax.Array) -> jax.Array:
        act = ACTIVATIONS[self.activation]
        x = obs.reshape(obs.shape[0], -1).astype(self.dtype)
        for size in self.hidden_sizes:
            x = act(_dense(size, self.dtype)(x))
        return x


class NatureCNNTorso(nn.Module):
    """DQN "Nature" CNN (Mnih et al. 2015): `[N, C, H, W] uint8 -> [N, 512]`.

    conv 32 8x8 stride 4 -> conv 64 4x4 stride 2 -> conv 64 3x3 stride 1 (VALID padding,
    ReLU after each) -> flatten -> Dense 512 -> ReLU. For 84x84 frames the conv stack gives
    `[N, 7, 7, 64]` (84 -> 20 -> 9 -> 7). Orthogonal init (gain sqrt(2)), zero bias.
    """

    dtype: jnp.dtype = jnp.float32

    @nn.compact
    def __call__(self, frames: jax.Array) -> jax.Array:
        x = frames_to_nhwc(frames, self.dtype)
        for features, kernel, stride in ((32, 8, 4), (64, 4, 2), (64, 3, 1)):
            x = nn.relu(_conv(features, kernel, stride, "VALID", self.dtype, _orthogonal())(x))
        x = x.reshape(x.shape[0], -1)
        return nn.relu(_dense(512, self.dtype)(x))


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
    """

    channels: Sequence[int] = (16, 32, 32)
    num_blocks: int = 2
    dense_size: int = 256
    dtype: jnp.dtype = jnp.float32

    @nn.compact
    def __call__(self, frames: jax.Array) -> jax.Array:
        x = frames_to_nhwc(frames, self.dtype)
        for features in self.channels:
            x = ImpalaStage(features, self.num_blocks, self.dtype)(x)
        x = nn.relu(x).reshape(x.shape[0], -1)
        return nn.relu(_dense(self.dense_size, self.dtype)(x))


def flatten_obs(obs: jax.Array, obs_shape: tuple[int, ...]) -> tuple[tuple[int, ...], jax.Array]:
    """(leading dims, `[N, *obs_shape]` observations): a torso sees one flat batch whatever
    the leading dims (`[B]`, `[T, B]`, ...)."""
    rank = len(obs_shape)
    if tuple(obs.shape[obs.ndim - rank :]) != tuple(obs_shape):
        raise ValueError(f"obs shape {obs.shape} does not end with obs_shape {obs_shape}")
    lead = tuple(obs.shape[: obs.ndim - rank])
    return lead, obs.reshape((math.prod(lead), *obs_shape))


def make_torso(
    name: str,
    hidden_sizes: Sequence[int],
    activation: str,
    dtype: jnp.dtype,
    module_name: str = "torso",
) -> nn.Module:
    """The torso called `name` ("mlp" | "nature_cnn" | "impala_resnet"), as module `module_name`."""
    if name == "mlp":
        return MLPTorso(tuple(hidden_sizes), activation, dtype, name=module_name)
    if name == "nature_cnn":
        return NatureCNNTorso(dtype, name=module_name)
    return ImpalaResNetTorso(dtype=dtype, name=module_name)


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
