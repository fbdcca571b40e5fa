"""Trees of saved arrays compared, digested and rebuilt, whatever their node types (Orbax
restores NamedTuples as dicts, so trees are matched by key path, not by structure)."""

from __future__ import annotations

import hashlib
from typing import Any

import jax
import numpy as np

from jaxrl_dist.checkpoints import packing


def abstract_like(tree: Any) -> Any:
    """ShapeDtypeStructs (with shardings) of a tree of arrays: a restore target."""
    return jax.tree.map(
        lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=getattr(x, "sharding", None)),
        tree,
    )


def tree_difference(saved: Any, wanted: Any) -> str | None:
    """One line naming the first leaf (by key path) whose shape or dtype differs between a saved
    tree and the wanted one, or that only one of them has; None if they match."""
    have, want = packing.leaves_by_path(saved), packing.leaves_by_path(wanted)
    for name in sorted(set(have) | set(want)):
        h, w = have.get(name), want.get(name)
        if h is None or w is None:
            where = "the checkpoint" if w is None else "this config"
            return f"{name} exists only in {where}"
        if (tuple(h.shape), _dtype_name(h)) != (tuple(w.shape), _dtype_name(w)):
            return (
                f"{name} is {_dtype_name(h)}{list(h.shape)} in the checkpoint but "
                f"{_dtype_name(w)}{list(w.shape)} with this config"
            )
    return None


def _dtype_name(leaf: Any) -> str:
    """`float32`, or `key<fry>` for a typed PRNG key (which NumPy cannot name)."""
    if jax.dtypes.issubdtype(leaf.dtype, jax.dtypes.prng_key):
        return str(leaf.dtype)
    return np.dtype(leaf.dtype).name


def first_line(error: BaseException) -> str:
    """`Type: the first line of the message` (at most 200 characters of it)."""
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0][:200]}" if text else type(error).__name__


def restructure_like(tree: Any, like: Any) -> Any:
    """`tree`'s leaves in `like`'s tree structure, matched by key path (Orbax restores
    NamedTuples as dicts). Check with `tree_difference` first."""
    have = packing.leaves_by_path(tree)
    want, treedef = jax.tree_util.tree_flatten_with_path(like)
    return jax.tree_util.tree_unflatten(treedef, [have[packing.path_name(p)] for p, _ in want])


def tree_digest(tree: Any) -> str:
    """SHA-256 of a tree's array bytes, leaves taken in the order of their key paths: equal
    digests mean bit-identical arrays, whether a node is a NamedTuple or (as Orbax restores it)
    a dict."""
    digest = hashlib.sha256()
    leaves = jax.tree_util.tree_flatten_with_path(jax.device_get(tree))[0]  # local copies
    for _, leaf in sorted(leaves, key=lambda item: packing.path_name(item[0])):
        digest.update(np.ascontiguousarray(leaf).tobytes())
    return digest.hexdigest()
