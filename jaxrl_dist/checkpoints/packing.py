"""A learner state as one byte array: the form checkpoints store it in.

TensorStore keeps 1-2 KiB of native memory per array written, for the life of the process
(measured under Orbax 0.12.8, TensorStore 0.1.86), so a run that saved a 49-leaf CartPole state
every few seconds grew ~37 MiB an hour. Saving every replicated leaf's bytes in one flat host
array makes that cost per save, not per leaf or per dtype, and the save ~4x faster. Leaves that
are not fully replicated (a sharded replay, sharded params) stay global arrays, one each, so
every process writes only its own shards.

`layout` (JSON, one entry per leaf in key-path order) says where each leaf went: `path` (its
key names), `shape`, `dtype`, and either `offset` (bytes, 16-aligned) into `packed` or `index`
into `sharded`, in the host's byte order (little-endian wherever JAX runs). Typed PRNG keys
are stored as their key data, with `key_impl` naming the impl.

`integrity_record` is what a step keeps to be checked before it is used (`integrity`):
the items saved, and the SHA-256 of its JSON items; the byte items keep theirs beside them.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import jax
import numpy as np

from jaxrl_dist.types import key_names, path_name

PACKED, SHARDED = "packed", "sharded"
ALIGN = 16  # bytes: every packed leaf starts at a multiple, so its view is aligned
INTEGRITY_FORMAT = 1
DIGESTED_JSON = ("layout", "meta")  # the JSON items whose digest the record keeps


def pack(state: Any) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """`state` (any pytree of arrays) -> (`{"packed": [N] uint8, "sharded": [jax.Array, ...]}`,
    layout). Replicated leaves are copied to the host."""
    chunks: list[np.ndarray] = []
    size = 0
    sharded: list[jax.Array] = []
    layout = []
    for path, leaf in jax.tree_util.tree_flatten_with_path(state)[0]:
        entry: dict[str, Any] = {"path": key_names(path)}
        if _is_typed_key(leaf):
            entry["key_impl"] = str(jax.random.key_impl(leaf))
            leaf = jax.random.key_data(leaf)
        entry.update(shape=list(np.shape(leaf)), dtype=np.dtype(leaf.dtype).name)
        if _is_replicated(leaf):
            host = np.asarray(leaf.addressable_data(0) if isinstance(leaf, jax.Array) else leaf)
            raw = np.ascontiguousarray(host).reshape(-1).view(np.uint8)
            entry["offset"] = size
            padding = -raw.size % ALIGN
            chunks += [raw, np.zeros(padding, np.uint8)]
            size += raw.size + padding
        else:
            if "key_impl" in entry:
                raise ValueError(
                    f"{'/'.join(entry['path'])}: a sharded typed PRNG key cannot be "
                    "checkpointed; keep keys replicated (or store jax.random.key_data)"
                )
            entry["index"] = len(sharded)
            sharded.append(leaf)
        layout.append(entry)
    packed = np.concatenate(chunks) if chunks else np.zeros(0, np.uint8)
    return _without_empty({PACKED: packed, SHARDED: sharded}), layout


def integrity_record(items: list[str], json_items: dict[str, Any]) -> dict[str, Any]:
    """What a step keeps to be checked: the names of every item saved, and the SHA-256 of each
    of `json_items` (`{"layout": ..., "meta": ...}`) as `json_digest` gives it."""
    digests = {name: json_digest(value) for name, value in json_items.items()}
    return {"format": INTEGRITY_FORMAT, "items": sorted(items), "sha256": digests}


def json_digest(value: Any) -> str:
    """SHA-256 of `value` as `json.dumps` writes it (as Orbax's JSON items are written): the
    same for the saved value and for its JSON read back (key order, float text and string keys
    survive the trip)."""
    return hashlib.sha256(json.dumps(value).encode()).hexdigest()


def packed_size(layout: list[dict]) -> int:
    """Bytes of the packed leaves' array that `layout` describes (0 if none is packed)."""
    ends = [e["offset"] + _nbytes(e) + (-_nbytes(e) % ALIGN) for e in layout if "offset" in e]
    return max(ends, default=0)


def sharded_target(layout: list[dict], abstract_state: Any | None) -> list[jax.ShapeDtypeStruct]:
    """What Orbax restores the sharded leaves into, in `sharded` order: the shardings of
    `abstract_state`'s leaves (matched by path), or each leaf whole on every device when
    `abstract_state` is None."""
    entries = [e for e in layout if "index" in e]
    if not entries:
        return []
    wanted = {} if abstract_state is None else leaves_by_path(abstract_state)
    whole = jax.sharding.NamedSharding(
        jax.sharding.Mesh(np.array(jax.devices()), ("all",)), jax.sharding.PartitionSpec()
    )
    return [
        jax.ShapeDtypeStruct(
            tuple(e["shape"]),
            np.dtype(e["dtype"]),
            sharding=getattr(wanted.get("/".join(e["path"])), "sharding", None) or whole,
        )
        for e in entries
    ]


def unpack(stored: dict[str, Any], layout: list[dict], abstract_state: Any | None) -> Any:
    """The state back from what `pack` returned (or Orbax restored of it). With
    `abstract_state` (ShapeDtypeStructs with shardings), in its tree structure and on its
    shardings; without, a nested dict of host arrays keyed by the saved key names."""
    leaves = {}
    for entry in layout:
        shape = tuple(entry["shape"])
        if "offset" in entry:
            raw = np.asarray(stored[PACKED])[entry["offset"] : entry["offset"] + _nbytes(entry)]
            leaf = raw.view(np.dtype(entry["dtype"])).reshape(shape)
        else:
            leaf = stored[SHARDED][entry["index"]]
        leaves["/".join(entry["path"])] = (leaf, entry.get("key_impl"))
    if abstract_state is None:
        return _nested({name: _as_key(*value) for name, value in leaves.items()})
    paths, treedef = jax.tree_util.tree_flatten_with_path(abstract_state)
    placed = [_place(*leaves[path_name(path)], like) for path, like in paths]
    return jax.tree_util.tree_unflatten(treedef, placed)


def abstract_from_layout(layout: list[dict]) -> dict[str, jax.ShapeDtypeStruct]:
    """The saved leaves' shapes and dtypes by key path."""
    return {"/".join(e["path"]): _abstract_leaf(e) for e in layout}


def _abstract_leaf(entry: dict) -> jax.ShapeDtypeStruct:
    data = jax.ShapeDtypeStruct(tuple(entry["shape"]), np.dtype(entry["dtype"]))
    if "key_impl" not in entry:
        return data
    return jax.eval_shape(lambda d: jax.random.wrap_key_data(d, impl=entry["key_impl"]), data)


def leaves_by_path(tree: Any) -> dict[str, Any]:
    """Leaves by key path: Orbax restores NamedTuples as dicts, so trees are matched this way,
    not by their structure."""
    return {path_name(p): x for p, x in jax.tree_util.tree_flatten_with_path(tree)[0]}


def _place(leaf: Any, key_impl: str | None, like: Any) -> Any:
    """A restored leaf on `like`'s sharding (host copies are the same on every process)."""
    sharding = getattr(like, "sharding", None)
    if isinstance(leaf, np.ndarray):
        if sharding is None:
            leaf = jax.numpy.asarray(leaf)
        else:
            host = leaf
            leaf = jax.make_array_from_callback(host.shape, sharding, lambda index: host[index])
    return _as_key(leaf, key_impl)


def _as_key(leaf: Any, key_impl: str | None) -> Any:
    return leaf if key_impl is None else jax.random.wrap_key_data(leaf, impl=key_impl)


def _nested(flat: dict[str, Any]) -> dict[str, Any]:
    tree: dict[str, Any] = {}
    for name, leaf in flat.items():
        *parents, last = name.split("/")
        node = tree
        for key in parents:
            node = node.setdefault(key, {})
        node[last] = leaf
    return tree


def _nbytes(entry: dict) -> int:
    return int(np.prod(entry["shape"], dtype=np.int64)) * np.dtype(entry["dtype"]).itemsize


def _without_empty(stored: dict[str, Any]) -> dict[str, Any]:
    """Orbax drops empty containers, so neither side of a save or restore names them."""
    return {part: value for part, value in stored.items() if len(value)}


def _is_typed_key(leaf: Any) -> bool:
    return hasattr(leaf, "dtype") and jax.dtypes.issubdtype(leaf.dtype, jax.dtypes.prng_key)


def _is_replicated(leaf: Any) -> bool:
    return not isinstance(leaf, jax.Array) or leaf.is_fully_replicated
