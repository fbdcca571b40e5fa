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
    """The params of a run's checkpoint, as saved (host arrays), whatever its optimizer was."""
    directory = find_checkpoint_dir(path)
    if directory is None:
        raise FileNotFoundError(f"no checkpoint under {path}")
    manager = ocp.CheckpointManager(os.path.abspath(directory))
    try:
        step = manager.latest_step() if step is None else step
        restored = manager.restore(step, args=ocp.args.Composite(state=ocp.args.StandardRestore()))
    finally:
        manager.close()
    return jax.device_get(restored["state"]["params"])


def tree_digest(tree: Any) -> str:
    """SHA-256 of a tree's array bytes: equal digests mean bit-identical arrays."""
    digest = hashlib.sha256()
    for leaf in jax.tree.leaves(jax.device_get(tree)):
        digest.update(np.ascontiguousarray(leaf).tobytes())
    return digest.hexdigest()
