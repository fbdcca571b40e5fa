"""A replay's contents as bytes, for checkpoints (`config.replay.save`).

A snapshot is a flat `{name: np.ndarray}`: the replay's rings under `ring/<leaf path>` (the
Rollout leaf's key path, so the ring tree is rebuilt without pickling its structure) and its
counters and RNG state under plain names. `to_bytes` / `from_bytes` store it as an uncompressed
`.npz` (NumPy's own format: no pickle, fast to write).
"""

from __future__ import annotations

import io
import json
from typing import Any

import jax
import numpy as np

from jaxrl_dist.types import Rollout, path_name

RING = "ring/"


def ring_arrays(treedef: Any, rings: list[np.ndarray]) -> dict[str, np.ndarray]:
    """`{"ring/<path>": ring}` for the rings of a `Rollout` tree (`treedef`'s leaves, in order)."""
    tree = jax.tree.unflatten(treedef, list(range(len(rings))))
    paths = jax.tree_util.tree_flatten_with_path(tree)[0]
    return {RING + path_name(path): rings[index] for path, index in paths}


def rings_from_arrays(arrays: dict[str, np.ndarray]) -> tuple[Any, list[np.ndarray]]:
    """The (treedef, rings) `ring_arrays` stored: a `Rollout` with nested dicts where the paths
    have more than one key (`agent_extras/log_prob`, dict observations), and tuples where the
    keys are the indices `0 .. n - 1` (an LSTM's `(c, h)` core state)."""
    fields: dict[str, Any] = {"agent_extras": {}}  # a Rollout field even with no extras
    for name, ring in arrays.items():
        if not name.startswith(RING):
            continue
        *parents, last = name[len(RING) :].split("/")
        node = fields
        for key in parents:
            node = node.setdefault(key, {})
        node[last] = ring
    rollout = Rollout(**{name: _tuples_back(node) for name, node in fields.items()})
    leaves, treedef = jax.tree.flatten(rollout)
    if len(leaves) != sum(name.startswith(RING) for name in arrays):
        raise ValueError("the saved replay's rings do not form a Rollout")
    return treedef, leaves


def tree_arrays(tree: Any, prefix: str) -> dict[str, np.ndarray]:
    """`{prefix + "<path>": leaf}` for a tree of arrays (dicts and tuples; `{}`: none)."""
    paths = jax.tree_util.tree_flatten_with_path(tree)[0]
    return {prefix + path_name(path): np.asarray(leaf) for path, leaf in paths}


def tree_from_arrays(arrays: dict[str, np.ndarray], prefix: str) -> Any:
    """The tree `tree_arrays` stored under `prefix` (`{}` when none was): nested dicts, and
    tuples where the keys are `0 .. n - 1` (an LSTM's `(c, h)`)."""
    tree: dict[str, Any] = {}
    for name, leaf in arrays.items():
        if name.startswith(prefix):
            *parents, last = name[len(prefix) :].split("/")
            node = tree
            for key in parents:
                node = node.setdefault(key, {})
            node[last] = leaf
    if list(tree) == [""]:  # the tree was one array
        return tree[""]
    return _tuples_back(tree)


def _tuples_back(node: Any) -> Any:
    """Dicts keyed `"0" .. "n-1"` (a sequence's paths) as tuples again, all the way down."""
    if not isinstance(node, dict):
        return node
    node = {key: _tuples_back(value) for key, value in node.items()}
    if node and sorted(node) == [str(i) for i in range(len(node))]:
        return tuple(node[str(i)] for i in range(len(node)))
    return node


def rng_array(rng: np.random.Generator) -> np.ndarray:
    """A NumPy generator's state as a uint8 array (its JSON)."""
    return np.frombuffer(json.dumps(rng.bit_generator.state).encode(), np.uint8)


def restore_rng(rng: np.random.Generator, saved: np.ndarray) -> None:
    rng.bit_generator.state = json.loads(saved.tobytes().decode())


def to_bytes(arrays: dict[str, np.ndarray]) -> bytes:
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    return buffer.getvalue()


def from_bytes(data: bytes | np.ndarray) -> dict[str, np.ndarray]:
    raw = data.tobytes() if isinstance(data, np.ndarray) else data
    with np.load(io.BytesIO(raw), allow_pickle=False) as npz:
        return {name: npz[name] for name in npz.files}
