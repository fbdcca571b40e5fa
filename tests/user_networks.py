"""Torsos, cores and heads of a user's own that the tests build by `network.torso` /
`network.core` / `network.head = "user_networks:NAME"` (this folder on the path): the ones a run
refuses, a torso that needs the env's own dtype, a cell with a carry of its own, a head that
fits every head. The guide's attention torso and core and its
CNN are its own `my_nets.py` (`test_user_networks.py` saves it)."""

import math

import flax.linen as nn
import jax.numpy as jnp

from jaxrl_dist.networks import CoreSpec, HeadSpec, TorsoSpec


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


# Cores (`network.core = "user_networks:NAME"`): one that remembers, and the ones a run refuses.


class LeakyMemory(nn.Module):
    """A cell of the tests' own: a leaky sum of its inputs and a step count (a `[B]` leaf),
    starting from a carry that is not zeros, so a reset to zeros instead of the cell's own
    start shows."""

    size: int

    def initialize_carry(self, key, input_shape):
        batch, features = input_shape
        return {"sum": jnp.full((batch, features), 0.5), "steps": jnp.zeros((batch,))}

    @nn.compact
    def __call__(self, carry, x):
        total, steps = 0.9 * carry["sum"] + x, carry["steps"] + 1.0
        y = nn.tanh(nn.Dense(self.size)(jnp.concatenate([total, steps[:, None]], axis=-1)))
        return {"sum": total, "steps": steps}, y


def leaky_memory(spec: CoreSpec) -> nn.Module:
    return LeakyMemory(spec.core_size)


class GrowingCarry(LeakyMemory):
    """Returns a carry wider than the one it was given."""

    @nn.compact
    def __call__(self, carry, x):
        return {"sum": jnp.concatenate([carry["sum"], x], -1), "steps": carry["steps"]}, x


def growing_carry(spec: CoreSpec) -> nn.Module:
    return GrowingCarry(spec.core_size)


class UnflattenedOutputs(LeakyMemory):
    """Outputs `[B, F, 2]`, not `[B, H]`."""

    @nn.compact
    def __call__(self, carry, x):
        return carry, jnp.stack([x, x], axis=-1)


def unflattened_outputs(spec: CoreSpec) -> nn.Module:
    return UnflattenedOutputs(spec.core_size)


def no_initialize_carry(spec: CoreSpec) -> nn.Module:
    return nn.Dense(spec.core_size)  # a step, but no carry to start from


# Heads (`network.head = "user_networks:NAME"`): one that fits every head, one that does not.


class MLPHead(nn.Module):
    """A hidden layer, then the head's outputs `[N, *outputs]`."""

    outputs: tuple[int, ...]

    @nn.compact
    def __call__(self, features):
        x = nn.relu(nn.Dense(32)(features))
        return nn.Dense(math.prod(self.outputs))(x).reshape(x.shape[0], *self.outputs)


def mlp_head(spec: HeadSpec) -> nn.Module:
    return MLPHead(spec.outputs)


def three_outputs(spec: HeadSpec) -> nn.Module:
    return nn.Dense(3)  # [N, 3] whatever the head asks for
