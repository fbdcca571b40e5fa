"""Recurrent cores (LSTM, GRU) between a torso and the heads: a policy's memory.

A core maps a sequence of torso features `[T, B, F]`, the episode starts `first [T, B]` and the
core state before step 0 (`[B, ...]` leaves) to outputs `[T, B, H]` and the state after step
`T - 1`. Where `first[t]` is set, the state is reset to zeros before step `t` reads it, so a
sequence may hold the end of one episode and the start of the next (Espeholt et al. 2018's
IMPALA agent; Kapturowski et al. 2019's R2D2 stores the state at each sequence's start and
unrolls from it). Acting is the same unroll with `T = 1`, so the actor's step and the learner's
unroll are one function and agree to the last bit on the same inputs.

States: LSTM `(c [B, H], h [B, H])` (flax's order), GRU `h [B, H]`, no core `{}`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp

from jaxrl_dist.ops.loops import time_unroll

CORES = ("none", "lstm", "gru")

PyTree = Any


def initial_core_state(kind: str, batch: int, size: int) -> PyTree:
    """The zero state of `batch` rows (what an episode starts from); `{}` without a core."""

    def zeros():  # a buffer per leaf: a runtime may donate the state
        return jnp.zeros((batch, size), jnp.float32)

    if kind == "lstm":
        return (zeros(), zeros())
    if kind == "gru":
        return zeros()
    return {}


def reset_core_state(state: PyTree, first: jax.Array) -> PyTree:
    """`state` (`[B, ...]` leaves) with the rows where `first [B]` is set back at zeros."""

    def reset(x):
        where = first.reshape(first.shape + (1,) * (x.ndim - first.ndim))
        return jnp.where(where, jnp.zeros_like(x), x)

    return jax.tree.map(reset, state)


def unroll_one_step(unroll: Callable, obs: Any, core_state: PyTree) -> tuple:
    """An acting step as an unroll of length 1: `unroll(obs [1, B, ...], first [1, B],
    core_state) -> (*outputs [1, B, ...], core_state)` called on `obs [B, ...]` (no reset: the
    runtime's `start_episodes` made it) -> `(*outputs [B, ...], core_state)`."""
    rows = jax.tree.leaves(obs)[0].shape[0]
    obs = jax.tree.map(lambda x: x[None], obs)
    *outputs, core_state = unroll(obs, jnp.zeros((1, rows), bool), core_state)
    return (*jax.tree.map(lambda x: x[0], outputs), core_state)


class RecurrentCore(nn.Module):
    """`(state [B, ...], features [T, B, F], first [T, B]) -> (state, outputs [T, B, size])`,
    float32; one `lax.scan` over T with the cell's params shared by every step."""

    kind: str
    size: int

    @nn.compact
    def __call__(self, state: PyTree, features: jax.Array, first: jax.Array):
        if self.kind == "lstm":
            cell = nn.OptimizedLSTMCell(self.size, name="lstm")
        else:
            cell = nn.GRUCell(self.size, name="gru")

        def step(cell, state, inputs):
            x, first_t = inputs
            return cell(reset_core_state(state, first_t), x)

        scan = nn.scan(
            step,
            variable_broadcast="params",
            split_rngs={"params": False},
            in_axes=0,
            out_axes=0,
            unroll=time_unroll(features.shape[0]),  # a GPU's loop costs: see ops/loops.py
        )
        return scan(cell, state, (features.astype(jnp.float32), first))
