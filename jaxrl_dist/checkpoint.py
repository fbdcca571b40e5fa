"""A thin Orbax wrapper: the one file to change when Orbax's API moves.

Each checkpoint step holds `state` (the whole `LearnerState`: params, optimizer state, RNG key,
update counter) and `meta` (JSON: counters, the run config). Saves are atomic (Orbax writes to a
temporary directory and renames), so a killed run resumes from the last complete step. Only the
main thread calls `save`.
"""

from __future__ import annotations

import hashlib
import os
from typing import Any

import jax
import numpy as np
import orbax.checkpoint as ocp


class Checkpointer:
    """Save and restore `(state, meta)` pairs under `directory/<step>`."""

    def __init__(self, directory: str, max_to_keep: int | None = 3, create: bool = True):
        self.directory = os.path.abspath(directory)
        options = ocp.CheckpointManagerOptions(max_to_keep=max_to_keep, create=create)
        self._manager = ocp.CheckpointManager(self.directory, options=options)

    def latest_step(self) -> int | None:
        return self._manager.latest_step()

    def all_steps(self) -> list[int]:
        return list(self._manager.all_steps())

    def save(self, step: int, state: Any, meta: dict[str, Any]) -> None:
        self._manager.save(
            step,
            args=ocp.args.Composite(
                state=ocp.args.StandardSave(state), meta=ocp.args.JsonSave(meta)
            ),
            force=True,
        )

    def restore(self, abstract_state: Any, step: int | None = None) -> tuple[Any, dict[str, Any]]:
        """Restores against `abstract_state` (a tree of `jax.ShapeDtypeStruct` with shardings),
        so arrays come back with the caller's shardings. Defaults to the latest step."""
        step = self.latest_step() if step is None else step
        if step is None:
            raise FileNotFoundError(f"no checkpoint in {self.directory}")
        restored = self._manager.restore(
            step,
            args=ocp.args.Composite(
                state=ocp.args.StandardRestore(abstract_state), meta=ocp.args.JsonRestore()
            ),
        )
        return restored["state"], restored["meta"]

    def restore_meta(self, step: int | None = None) -> dict[str, Any]:
        step = self.latest_step() if step is None else step
        if step is None:
            raise FileNotFoundError(f"no checkpoint in {self.directory}")
        restored = self._manager.restore(step, args=ocp.args.Composite(meta=ocp.args.JsonRestore()))
        return restored["meta"]

    def delete(self, step: int) -> None:
        self._manager.delete(step)

    def wait(self) -> None:
        self._manager.wait_until_finished()

    def close(self) -> None:
        self._manager.close()

    def __enter__(self) -> Checkpointer:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def abstract_like(tree: Any) -> Any:
    """ShapeDtypeStructs (with shardings) of a tree of arrays: a restore target."""
    return jax.tree.map(
        lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=getattr(x, "sharding", None)),
        tree,
    )


def find_checkpoint_dir(path: str) -> str | None:
    """`path/checkpoints` (a run's work dir) or `path` itself, if it holds checkpoint steps."""
    for candidate in (os.path.join(path, "checkpoints"), path):
        if os.path.isdir(candidate) and any(n.isdigit() for n in os.listdir(candidate)):
            return candidate
    return None


def restore_params(path: str, step: int | None = None) -> Any:
    """The params of a run's checkpoint (host arrays), whatever its optimizer was and whatever
    devices and processes saved it (restored onto one local device, then fetched)."""
    directory = find_checkpoint_dir(path)
    if directory is None:
        raise FileNotFoundError(f"no checkpoint under {path}")
    handlers = {"state": ocp.StandardCheckpointHandler(), "meta": ocp.JsonCheckpointHandler()}
    manager = ocp.CheckpointManager(os.path.abspath(directory), item_handlers=handlers)
    try:
        step = manager.latest_step() if step is None else step
        saved = manager.item_metadata(step)["state"]
        device = jax.sharding.SingleDeviceSharding(jax.local_devices()[0])
        target = jax.tree.map(
            lambda m: jax.ShapeDtypeStruct(m.shape, m.dtype, sharding=device), saved
        )
        restored = manager.restore(
            step, args=ocp.args.Composite(state=ocp.args.StandardRestore(target))
        )
    finally:
        manager.close()
    return jax.device_get(restored["state"]["params"])


def restore_params_like(path: str, params_shapes: Any) -> Any:
    """Params of another run (its work dir or checkpoint dir) in the tree structure of
    `params_shapes`. Raises FileNotFoundError, or ValueError if they do not fit."""
    params = restore_params(path)
    # Orbax restores NamedTuples as dicts: match leaves by their key paths, not tree structure.
    want, treedef = jax.tree_util.tree_flatten_with_path(params_shapes)
    have = {_path_str(p): x for p, x in jax.tree_util.tree_flatten_with_path(params)[0]}
    leaves = [have.get(_path_str(p)) for p, _ in want]
    fits = len(have) == len(want) and all(
        x is not None and (x.shape, x.dtype) == (w.shape, w.dtype)
        for x, (_, w) in zip(leaves, want, strict=True)
    )
    if not fits:
        raise ValueError(f"the params under {path!r} do not match this network")
    return jax.tree_util.tree_unflatten(treedef, leaves)


def _path_str(path) -> str:
    keys = (getattr(k, "key", getattr(k, "name", getattr(k, "idx", k))) for k in path)
    return "/".join(str(k) for k in keys)


def tree_digest(tree: Any) -> str:
    """SHA-256 of a tree's array bytes: equal digests mean bit-identical arrays."""
    digest = hashlib.sha256()
    for leaf in jax.tree.leaves(jax.device_get(tree)):  # replicated arrays: the local copy
        digest.update(np.ascontiguousarray(leaf).tobytes())
    return digest.hexdigest()
