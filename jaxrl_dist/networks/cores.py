"""Recurrent cores (LSTM, GRU) between a torso and the heads: a policy's memory.

A core maps a sequence of torso features `[T, B, F]`, the episode starts `first [T, B]` and the
core state before step 0 (`[B, ...]` leaves) to outputs `[T, B, H]` and the state after step
`T - 1`. Where `first[t]` is set, the state is reset to zeros before step `t` reads it, so a
sequence may hold the end of one episode and the start of the next (Espeholt et al. 2018's
IMPALA agent; Kapturowski et al. 2019's R2D2 stores the state at each sequence's start and
unrolls from it). Acting is the same unroll with `T = 1`, so the actor's step and the learner's
unroll are one function and agree to the last bit on the same inputs.

States: LSTM `(c [B, H], h [B, H])` (flax's order), GRU `h [B, H]`, no core `{}`.

A core of the user's own: `network.core = "my_pkg.nets:make_cell"` (imported) or a name given to
`register_core(name, factory)`. The factory is called with a `CoreSpec` and returns a flax
recurrent *cell*, the interface of flax's own (`nn.LSTMCell`, `nn.MGUCell`, ...): `cell(carry,
x [B, F]) -> (carry, y [B, H])` for one step, and `cell.initialize_carry(key, (B, F))` for the
carry an episode starts from (called with `PRNGKey(0)`: the same start every time). The core
scans it over T and puts a row's carry back at that start where `first` is set, so a cell of
the user's remembers within an episode exactly as the shipped ones do; its params live under
the core's name (`core/<its class>_0/...` in flax's naming of the scanned cell). Any carry
works (a window of past features for attention over time, say) as long as a step returns the
carry it was given in shape and dtype.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
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
from jaxrl_dist.ops.loops import time_unroll

CORES = ("none", "lstm", "gru")

PyTree = Any


@dataclasses.dataclass(frozen=True)
class CoreSpec:
    """What a user's core factory is given: `network.core_size` (the width a cell may take for
    its state and outputs, or ignore) and `input_size`, the width F of the torso's features it
    steps on."""

    core_size: int
    input_size: int


CellFactory = Callable[[CoreSpec], nn.Module]
_DOES = "steps cell(carry, x [B, F]) -> (carry, y [B, H]) and has initialize_carry(key, (B, F))"


def register_core(name: str, factory: CellFactory) -> None:
    """Makes `network.core=name` build the cell `factory(CoreSpec)` in this process (see the
    module docstring); a run's policy description saves the name, so a process that loads it
    registers it too (a `MODULE:FACTORY` core needs no registration)."""
    register_part("core", name, factory, CORES)


def core_factory(name: str) -> CellFactory:
    """The factory of the user's core `name`; ValueError (one line) when there is none."""
    return part_factory("core", name, CORES, "my_pkg.nets:make_cell")


def user_cell(name: str, size: int, input_size: int) -> nn.Module:
    """The user's cell `network.core=name` for `input_size`-wide features (PartError if the
    factory returns no module)."""
    cell = core_factory(name)(CoreSpec(size, input_size))
    return built_module("core", name, cell, _DOES)


def initial_core_state(kind: str, batch: int, size: int, input_size: int = 0) -> PyTree:
    """The state of `batch` rows an episode starts from (zeros for the shipped cores, the
    cell's `initialize_carry` for a user's, which steps on `input_size`-wide features); `{}`
    without a core."""

    def zeros():  # a buffer per leaf: a runtime may donate the state
        return jnp.zeros((batch, size), jnp.float32)

    if kind == "lstm":
        return (zeros(), zeros())
    if kind == "gru":
        return zeros()
    if kind == "none":
        return {}
    return start_carry(user_cell(kind, size, input_size), batch, input_size)


def start_carry(cell: nn.Module, batch: int, input_size: int) -> PyTree:
    """A user's `cell`'s carry of `batch` rows at an episode's start."""
    carry = cell.initialize_carry(jax.random.PRNGKey(0), (batch, input_size))
    return jax.tree.map(jnp.array, carry)  # copies: a runtime may donate the state


def reset_core_state(state: PyTree, first: jax.Array) -> PyTree:
    """`state` (`[B, ...]` leaves) with the rows where `first [B]` is set back at zeros."""

    def reset(x):
        where = first.reshape(first.shape + (1,) * (x.ndim - first.ndim))
        return jnp.where(where, jnp.zeros_like(x), x)

    return jax.tree.map(reset, state)


def restart_rows(state: PyTree, first: jax.Array, start: PyTree) -> PyTree:
    """`state` with the rows where `first [B]` is set taken from `start` (the same tree)."""

    def pick(x, x0):
        where = first.reshape(first.shape + (1,) * (x.ndim - first.ndim))
        return jnp.where(where, x0, x)

    return jax.tree.map(pick, state, start)


def unroll_one_step(unroll: Callable, obs: Any, core_state: PyTree) -> tuple:
    """An acting step as an unroll of length 1: `unroll(obs [1, B, ...], first [1, B],
    core_state) -> (*outputs [1, B, ...], core_state)` called on `obs [B, ...]` (no reset: the
    runtime's `start_episodes` made it) -> `(*outputs [B, ...], core_state)`."""
    rows = jax.tree.leaves(obs)[0].shape[0]
    obs = jax.tree.map(lambda x: x[None], obs)
    *outputs, core_state = unroll(obs, jnp.zeros((1, rows), bool), core_state)
    return (*jax.tree.map(lambda x: x[0], outputs), core_state)


class RecurrentCore(nn.Module):
    """`(state [B, ...], features [T, B, F], first [T, B]) -> (state, outputs [T, B, H])`,
    float32; one `lax.scan` over T with the cell's params shared by every step. `kind`: "lstm",
    "gru" (H = `size`) or a user's core (module docstring)."""

    kind: str
    size: int

    @nn.compact
    def __call__(self, state: PyTree, features: jax.Array, first: jax.Array):
        rows, width = features.shape[1:]
        if self.kind == "lstm":
            cell, reset = nn.OptimizedLSTMCell(self.size, name="lstm"), reset_core_state
        elif self.kind == "gru":
            cell, reset = nn.GRUCell(self.size, name="gru"), reset_core_state
        else:
            cell = user_cell(self.kind, self.size, width)
            start = start_carry(cell, rows, width)
            reset = lambda state, first_t: restart_rows(state, first_t, start)  # noqa: E731

        def step(cell, state, inputs):
            x, first_t = inputs
            return cell(reset(state, first_t), x)

        scan = nn.scan(
            step,
            variable_broadcast="params",
            split_rngs={"params": False},
            in_axes=0,
            out_axes=0,
            unroll=time_unroll(features.shape[0]),  # a GPU's loop costs: see ops/loops.py
        )
        return scan(cell, state, (features.astype(jnp.float32), first))


def check_user_core(name: str, size: int, input_size: int) -> None:
    """PartError (one line) unless the user's cell `network.core=name` starts a carry of 2 rows
    on `input_size`-wide features, and one step maps that carry and `x [2, input_size]` to the
    same carry (shapes and dtypes) and outputs `[2, H]` (shapes only: nothing is computed)."""
    field = f"config.network.core={name!r}"
    cell = user_cell(name, size, input_size)
    x = jax.ShapeDtypeStruct((2, input_size), jnp.float32)
    fails = f"{field} fails on a carry of 2 rows and features [2, {input_size}] float32"
    fix = f"; a cell {_DOES}"
    carry = traced(lambda: initial_core_state(name, 2, size, input_size), fails=fails, fix=fix)
    step = lambda c, x: cell.init_with_output(jax.random.PRNGKey(0), c, x)  # noqa: E731
    (new_carry, y), _ = traced(step, carry, x, fails=fails, fix=fix)
    shapes = lambda tree: jax.tree.map(lambda a: (a.shape, str(a.dtype)), tree)  # noqa: E731
    if jax.tree.structure(carry) != jax.tree.structure(new_carry) or shapes(carry) != shapes(
        new_carry
    ):
        raise PartError(
            f"{field} takes the carry {shapes(carry)} and returns {shapes(new_carry)}; a step "
            "must return the carry it was given in shape and dtype"
        )
    if not isinstance(y, jax.ShapeDtypeStruct) or len(y.shape) != 2 or y.shape[0] != 2:
        got = getattr(y, "shape", type(y).__name__)
        raise PartError(
            f"{field} maps features [2, {input_size}] to outputs {got}; a step returns "
            "(carry, y [B, H])"
        )
