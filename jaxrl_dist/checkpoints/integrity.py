"""Whether a checkpoint step is whole, checked before the step is used.

`--resume` (`resume.py`) and "latest" (`steps.locate_step`: `RUN@latest`, a warm
start, `scripts/evaluate.py RUN`, `load_policy(RUN)`) take the newest intact step and name the
damaged newer ones. Damage, by `Damage.kind`:

- `half-written`: Orbax's temporary directory of a step whose save was cut short (a kill, a full
  disk). Only `--resume`, which owns the directory, counts it: beside a live run it is a save
  in progress.
- `uncommitted`: a step directory without Orbax's commit marker (a copy cut short).
- `missing`: an item the step's record (`packing.integrity_record`) or layout names, a byte
  item's digest, or this process's file of a per-process item, is not there.
- `truncated`: the packed state is not the size its layout says.
- `checksum`: a byte item or a JSON item differs from the SHA-256 saved with it.
- `unreadable`: an item does not parse, or Orbax or TensorStore cannot read it (TensorStore
  checksums its own chunks: a flipped byte there reads as DATA_LOSS).

Steps saved before records and digests are checked for what they have. Without `deep`, what a
policy needs is checked (the JSON items, the packed state and its digest, the sharded arrays'
metadata); `deep` (`--resume`) adds what a resume reads besides (deterministic mode's recorded
actions, read whole; this process's per-process files and their digests). Each process checks
on its own (no barrier between processes); `resume.agree` makes them agree. A step of other
shapes than the caller's is not damage: `StateMismatch`. Steps are read one by one (a damaged
step's files must not stop Orbax from opening the others).
"""

from __future__ import annotations

import dataclasses
import json
import os
import pathlib
from typing import Any

import jax
import orbax.checkpoint as ocp

from jaxrl_dist.checkpoints import packing
from jaxrl_dist.checkpoints.orbax_items import BytesHandler, digest_path, digest_problem
from jaxrl_dist.checkpoints.store import (
    INTEGRITY,
    PROCESS_ITEMS,
    complete_steps,
    item_handlers,
    on_one_local_device,
)
from jaxrl_dist.checkpoints.trees import first_line, tree_difference

TMP_MARKER = ".orbax-checkpoint-tmp"  # Orbax's temporary step directory: `<step>` + this
COMMIT_MARKER = "commit_success.txt"  # written by Orbax into a step before it is renamed
STEP_METADATA = "_CHECKPOINT_METADATA"  # Orbax's own JSON of a step (timestamps)
DETAIL_CHARS = 120  # of a reader's own message (TensorStore's run long)
KINDS = ("half-written", "uncommitted", "missing", "truncated", "checksum", "unreadable")


@dataclasses.dataclass(frozen=True)
class Damage:
    """Why step `step` cannot be used: `kind` (one of `KINDS`) and a short `detail`."""

    step: int
    kind: str
    detail: str

    @property
    def clause(self) -> str:
        return f"step {self.step} ({self.detail})"


def damaged_clause(damaged: list[Damage]) -> str:
    """`step 6 (why) is damaged`, or `steps 6 (why), 4 (why) are damaged`."""
    if len(damaged) == 1:
        return f"{damaged[0].clause} is damaged"
    return f"steps {', '.join(d.clause.removeprefix('step ') for d in damaged)} are damaged"


class CheckpointReadError(RuntimeError):
    """A checkpoint step that cannot be read (a partial copy, a damaged file); one line."""


class StateMismatch(ValueError):
    """A step whose state has other shapes than the caller's (the message names the leaf)."""


class _Damaged(Exception):
    def __init__(self, kind: str, detail: str):
        super().__init__(detail)
        self.kind, self.detail = kind, detail


def half_written(directory: str) -> dict[int, list[str]]:
    """Orbax's temporary directories in a checkpoint dir, by the step they were saving."""
    found: dict[int, list[str]] = {}
    names = os.listdir(directory) if os.path.isdir(directory) else []
    for name in sorted(names):
        step, marker, _ = name.partition(TMP_MARKER)
        if marker and step.isdigit():
            found.setdefault(int(step), []).append(name)
    return found


def newest_intact(
    directory: str,
    steps: list[int] | None = None,
    *,
    deep: bool = False,
    abstract_state: Any = None,
) -> tuple[int | None, list[Damage]]:
    """The newest intact step of `steps` (default: every complete step in `directory`) and the
    damage of the newer ones, newest first. Steps deleted meanwhile (a live run's retention) are
    passed over. `abstract_state`: StateMismatch when the step found has other shapes."""
    steps = complete_steps(directory) if steps is None else steps
    damaged = []
    with StepReader() as reader:
        for step in sorted(steps, reverse=True):
            try:
                damage = reader.damage(directory, step, deep=deep, abstract_state=abstract_state)
            except FileNotFoundError:  # the step itself is gone
                continue
            if damage is None:
                return step, damaged
            damaged.append(damage)
    return None, damaged


def state_mismatch(directory: str, abstract_state: Any, step: int | None = None) -> str | None:
    """Compares the saved state of `step` (default: the latest) with `abstract_state` (shapes and
    dtypes, leaf by leaf, by key path). Returns None if they match, else one line naming the
    first leaf that differs. Raises FileNotFoundError (no step) or CheckpointReadError."""
    step = (complete_steps(directory) or [None])[-1] if step is None else step
    if step is None:
        raise FileNotFoundError(f"no checkpoint in {directory}")
    with StepReader() as reader:
        try:
            damage = reader.damage(directory, step, abstract_state=abstract_state)
        except StateMismatch as e:
            return str(e)
    if damage is not None:
        raise CheckpointReadError(f"step {step} cannot be read ({damage.detail})")
    return None


class StepReader:
    """Reads one step's items from its own directory (an Orbax `Checkpointer`, not a manager
    of the whole directory, which another step's damaged files can stop from opening)."""

    def __init__(self):
        handlers = {**item_handlers(), "metrics": ocp.JsonCheckpointHandler("metrics")}
        # This process alone: processes check steps apart (and may stop at different ones),
        # so Orbax's barrier after each restore must not wait for the others.
        me = jax.process_index()
        alone = ocp.options.MultiprocessingOptions(primary_host=me, active_processes={me})
        handler = ocp.CompositeCheckpointHandler(**handlers)
        self._reader = ocp.Checkpointer(handler, multiprocessing_options=alone)

    def __enter__(self) -> StepReader:
        return self

    def __exit__(self, *exc) -> None:
        self._reader.close()

    def damage(
        self, directory: str, step: int, *, deep: bool = False, abstract_state: Any = None
    ) -> Damage | None:
        """What is wrong with `step` (None: intact). FileNotFoundError if its directory is
        gone; StateMismatch if it is whole but of other shapes than `abstract_state`."""
        path = os.path.join(directory, str(step))
        if not os.path.isdir(path):
            raise FileNotFoundError(f"step {step} is not in {directory}")
        damage = None
        try:
            self._check(path, deep, abstract_state)
        except _Damaged as d:
            damage = Damage(step, d.kind, d.detail)
        except StateMismatch:
            raise
        except Exception as e:  # noqa: BLE001  Orbax and TensorStore raise many kinds here
            kind = "missing" if isinstance(e, FileNotFoundError) else "unreadable"
            damage = Damage(step, kind, first_line(e)[:DETAIL_CHARS])
        if not os.path.isdir(path):  # deleted while it was read (retention): not damage
            raise FileNotFoundError(f"step {step} is no longer in {directory}")
        return damage

    # ------------------------------------------------------------------ the checks
    def _check(self, path: str, deep: bool, abstract_state: Any) -> None:
        if not os.path.exists(os.path.join(path, COMMIT_MARKER)):
            raise _Damaged("uncommitted", "no commit marker: a save or a copy cut short")
        _parse_file(os.path.join(path, STEP_METADATA))
        record = self._json(path, INTEGRITY) if _has(path, INTEGRITY) else None
        names = (
            record["items"] if record else ["meta", "layout" if _has(path, "layout") else "state"]
        )
        missing = [name for name in names if not _has(path, name)]
        if missing:
            raise _Damaged("missing", f"item {missing[0]} is missing")
        json_items = {
            n: self._json(path, n) for n in ("layout", "meta", "metrics") if _has(path, n)
        }
        for name, digest in (record or {}).get("sha256", {}).items():
            if packing.json_digest(json_items[name]) != digest:
                raise _Damaged("checksum", f"{name} fails its SHA-256 checksum")
        layout = json_items.get("layout")
        if layout is None:  # saved before packing
            self._check_unpacked(path, abstract_state)
            return
        if abstract_state is not None:
            problem = tree_difference(packing.abstract_from_layout(layout), abstract_state)
            if problem:
                raise StateMismatch(problem)
        _check_packed(path, layout, digested=record is not None)
        self._check_sharded(path, layout)
        if deep:
            self._check_replay(path)
            _check_process_items(path, digested=record is not None)

    def _json(self, path: str, name: str) -> Any:
        try:
            args = ocp.args.Composite(**{name: ocp.args.JsonRestore()})
            return self._reader.restore(path, args=args)[name]
        except (ValueError, TypeError) as e:  # json.JSONDecodeError is a ValueError
            raise _Damaged("unreadable", f"{name}: {first_line(e)}") from None

    def _metadata(self, path: str, name: str) -> Any:
        saved = self._reader.metadata(path).item_metadata[name]
        if saved is None:
            raise _Damaged("unreadable", f"{name}: no array metadata")
        return saved

    def _check_unpacked(self, path: str, abstract_state: Any) -> None:
        saved = self._metadata(path, "state")
        problem = None if abstract_state is None else tree_difference(saved, abstract_state)
        if problem:
            raise StateMismatch(problem)

    def _check_sharded(self, path: str, layout: list[dict]) -> None:
        """The sharded leaves' metadata against the layout. Their arrays are not read here (the
        big ones of a sharded model, read by every process's shards): TensorStore's checksums
        fail the run's own restore of a damaged one, in one line."""
        target = packing.sharded_target(layout, None)
        if not target:
            return
        if not _has(path, "state"):
            raise _Damaged("missing", "item state is missing")
        problem = tree_difference(self._metadata(path, "state"), {packing.SHARDED: target})
        if problem:
            raise _Damaged("unreadable", f"the state does not match its layout: {problem}")

    def _check_replay(self, path: str) -> None:
        """Deterministic mode's recorded actions, read whole onto one local device."""
        if _has(path, "replay"):
            target = on_one_local_device(self._metadata(path, "replay"))
            args = ocp.args.Composite(replay=ocp.args.StandardRestore(target))
            jax.block_until_ready(self._reader.restore(path, args=args)["replay"])


def _has(path: str, item: str) -> bool:
    return os.path.isdir(os.path.join(path, item))


def _parse_file(path: str) -> None:
    """A JSON file Orbax keeps, if there: it must parse (Orbax reads it to open the step)."""
    if not os.path.exists(path):
        return
    try:
        with open(path) as f:
            json.load(f)
    except ValueError as e:
        raise _Damaged("unreadable", f"{os.path.basename(path)}: {first_line(e)}") from None


def _check_packed(path: str, layout: list[dict], digested: bool) -> None:
    """The packed state: there, of its layout's size, and of its digest."""
    size = packing.packed_size(layout)
    if not size:
        return
    data_path = os.path.join(path, "packed", BytesHandler.FILENAME)
    _check_bytes(data_path, digested, size)


def _check_process_items(path: str, digested: bool) -> None:
    """This process's file of each per-process item the step holds, and its digest."""
    for name in PROCESS_ITEMS:
        if _has(path, name):
            own = f"{BytesHandler.FILENAME}.{jax.process_index()}"
            _check_bytes(os.path.join(path, name, own), digested)


def _check_bytes(data_path: str, digested: bool, size: int | None = None) -> None:
    """A byte item's file: there, of `size` bytes if given, and equal to its digest (which
    must be there when the step was saved with digests)."""
    path = pathlib.Path(data_path)
    where = os.path.join(path.parent.name, path.name)
    if not path.exists():
        raise _Damaged("missing", f"{where} is missing")
    have = path.stat().st_size
    if size is not None and have != size:
        raise _Damaged("truncated", f"{where}: {have} bytes, its layout says {size}")
    digest = digest_path(path)
    if digested and not digest.exists():
        raise _Damaged("missing", f"{path.parent.name}/{digest.name} is missing")
    problem = digest_problem(path, path.read_bytes())
    if problem:
        raise _Damaged("checksum", problem)
