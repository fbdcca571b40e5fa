"""Torsos of a user's own, as a user's package would ship them: `network.torso =
"user_networks:attention_torso"` (this folder on the path) builds them in the tests."""

import flax.linen as nn
import jax.numpy as jnp

from jaxrl_dist.networks import TorsoSpec


class FeatureAttention(nn.Module):
    """Each observation feature a token: embedded, one self-attention layer, mean-pooled:
    `[N, D] -> [N, width]`."""

    width: int
    layer_norm: bool

    @nn.compact
    def __call__(self, obs):
        tokens = nn.Dense(self.width)(obs.reshape(obs.shape[0], -1, 1).astype(jnp.float32))
        tokens = tokens + nn.MultiHeadDotProductAttention(num_heads=2)(tokens, tokens)
        if self.layer_norm:
            tokens = nn.LayerNorm()(tokens)
        return nn.relu(nn.Dense(self.width)(tokens.mean(axis=1)))


def attention_torso(spec: TorsoSpec) -> nn.Module:
    return FeatureAttention(width=spec.hidden_sizes[-1], layer_norm=spec.layer_norm)


def not_a_module(spec: TorsoSpec):
    return "a string"


def frames_unflattened(spec: TorsoSpec) -> nn.Module:
    return nn.Dense(8)  # [N, H, W, C] -> [N, H, W, 8]: no flattening


class InvertedBits(nn.Module):
    """Bool frames, their bits flipped (`bitwise_xor` takes integers and bools, not floats),
    then a Dense layer: `[N, *obs_shape] -> [N, 16]`."""

    @nn.compact
    def __call__(self, frames):
        bits = jnp.bitwise_xor(frames, True).astype(jnp.float32)
        return nn.relu(nn.Dense(16)(bits.reshape(frames.shape[0], -1)))


def inverted_bits(spec: TorsoSpec) -> nn.Module:
    return InvertedBits()
