"""Torsos of a user's own that the tests build by `network.torso = "user_networks:NAME"` (this
folder on the path): the ones a run refuses, and one that needs the env's own dtype. The guide's
attention torso and CNN are its own `my_nets.py` (`test_user_networks.py` saves it)."""

import flax.linen as nn
import jax.numpy as jnp

from jaxrl_dist.networks import TorsoSpec


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
