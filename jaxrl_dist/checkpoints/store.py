"""A thin Orbax wrapper: the one file to change when Orbax's API moves.

Each checkpoint step holds the whole `LearnerState` (params, optimizer state, RNG key, update
counter) packed (`packing.py` says why): `packed` (a file of the replicated leaves' bytes, its
SHA-256 beside it), `state` (the leaves that are sharded, if any), `layout` (JSON: where each
leaf went); `meta` (JSON: counters, the run config); and `integrity` (JSON: the items saved and
the digests of the JSON ones), which `integrity.py` checks before a step is used.
Steps saved before packing (no `layout`) or before digests (no `integrity`) are read as they
were written. Saves are atomic (Orbax writes to a temporary directory and renames), so a killed
run resumes from the last complete step; a save that fails (a full disk) raises
`CheckpointSaveError` and deletes no older step. Only the main thread calls `save`.
"""

from __future__ import annotations

import os
from typing import Any

import jax
import numpy as np
import orbax.checkpoint as ocp

from jaxrl_dist.checkpoints import packing
from jaxrl_dist.checkpoints.orbax_items import (
    BytesHandler,
    BytesRestore,
    BytesSave,
    ProcessBytesHandler,
    ProcessBytesRestore,
    ProcessBytesSave,
)
from jaxrl_dist.checkpoints.trees import (  # noqa: F401  re-exported: the names users import
    abstract_like,
    first_line,
    restructure_like,
    tree_difference,
    tree_digest,
)
from jaxrl_dist.errors import RunError
from jaxrl_dist.types import local_replica

PROCESS_ITEMS = ("data", "pool", "lockstep")  # items every process saves its own file of
METRIC = "eval_metric"  # the monitored evaluation metric of a step's params; higher is better
INTEGRITY = "integrity"  # the item that says what a step holds (`packing.integrity_record`)
BEST_DIR = "best"  # beside the steps: the run's best params (`run/best.py` writes them)
BEST_STORE = "best_store"  # in a checkpoint's meta: its run writes its bests to BEST_DIR


def best_dir(ckpt_dir: str, agent: str | None = None) -> str:
    """Where a run whose checkpoints are in `ckpt_dir` keeps its best params (agent `agent`'s,
    for a run of several agents)."""
    return os.path.join(ckpt_dir, BEST_DIR, *([agent] if agent else []))


class CheckpointSaveError(RunError):
    """A save that failed (a full disk, a lost mount): the run stops; older steps are kept."""


class Checkpointer:
    """Save and restore `(state, meta)` pairs under `directory/<step>`.

    Retention (Orbax preservation policies): a step survives while it is one of the newest
    `keep_latest` (0: none for being new), or one of the `keep_best` with the highest evaluation
    metric (only steps saved with a metric compete; 0 keeps none for being best).
    `primary_only`: only process 0 opens and writes this directory (the run's best params,
    `best.py`), so its saves wait for no other process.
    """

    def __init__(
        self,
        directory: str,
        keep_latest: int = 3,
        keep_best: int = 0,
        create: bool = True,
        primary_only: bool = False,
    ):
        self.directory = os.path.abspath(directory)
        policies = [ocp.checkpoint_managers.LatestN(n=keep_latest)] if keep_latest else []
        if keep_best:
            policies.append(
                ocp.checkpoint_managers.BestN(
                    get_metric_fn=_metric, n=keep_best, keep_checkpoints_without_metrics=False
                )
            )
        if primary_only and create:  # Orbax creates no directory for a subset of processes
            os.makedirs(self.directory, exist_ok=True)
        processes = ocp.options.MultiprocessingOptions(primary_host=0, active_processes={0})
        options = ocp.CheckpointManagerOptions(
            create=create and not primary_only,
            preservation_policy=ocp.checkpoint_managers.AnyPreservationPolicy(policies),
            best_fn=_metric,  # so Orbax writes and reads each step's metrics
            **({"multiprocessing_options": processes} if primary_only else {}),
        )
        self._manager = ocp.CheckpointManager(
            self.directory, options=options, item_handlers=item_handlers()
        )
        self._saving: int | None = None  # the step whose save may still be finishing

    def latest_step(self) -> int | None:
        return self._manager.latest_step()

    def all_steps(self) -> list[int]:
        return list(self._manager.all_steps())

    def metric(self, step: int) -> float | None:
        """The evaluation metric saved beside `step` (None if it was saved without one)."""
        metrics = self._manager.metrics(step)
        return metrics[METRIC] if metrics and METRIC in metrics else None

    def delete(self, step: int) -> None:
        self._manager.delete(step)

    def best_step(self) -> int | None:
        """The kept step with the highest evaluation metric, the earliest of a tie (as the run's
        best evaluation: a tie does not beat; Orbax's `best_step` takes the latest); None if no
        step has one."""
        scored = []
        for step in self._manager.all_steps():
            metric = self.metric(step)
            if metric is not None:
                scored.append((metric, step))
        if not scored:
            return None
        top = max(score for score, _ in scored)
        return min(step for score, step in scored if score == top)

    def save(
        self,
        step: int,
        state: Any,
        meta: dict[str, Any],
        replay: Any = None,
        metric: float | None = None,
        process_items: dict[str, bytes] | None = None,
    ) -> None:
        """`replay`: an optional tree of global arrays (deterministic mode's recorded actions),
        kept as a third item. `metric`: the evaluation metric of exactly this state, if it was
        evaluated; Orbax keeps it beside the step, and it ranks the step for `keep_best`.
        `process_items`: byte strings each process saves its own of, as `<item>/bytes.<process>`
        (`PROCESS_ITEMS`: "data", the replay's contents; "pool", the seats' opponent pools;
        "lockstep", deterministic mode's rounds of an agent among several)."""
        stored, layout = packing.pack(state)
        items = {"layout": ocp.args.JsonSave(layout), "meta": ocp.args.JsonSave(meta)}
        if packing.PACKED in stored:
            items["packed"] = BytesSave(stored[packing.PACKED].tobytes())
        if packing.SHARDED in stored:
            items["state"] = ocp.args.StandardSave({packing.SHARDED: stored[packing.SHARDED]})
        if replay is not None:
            items["replay"] = ocp.args.StandardSave(replay)
        for name, item in (process_items or {}).items():
            if name not in PROCESS_ITEMS:
                raise ValueError(f"unknown per-process item {name!r}; known: {PROCESS_ITEMS}")
            items[name] = ProcessBytesSave(item)
        names = [*items, INTEGRITY]
        record = packing.integrity_record(names, {"layout": layout, "meta": meta})
        items[INTEGRITY] = ocp.args.JsonSave(record)
        metrics = None if metric is None else {METRIC: float(metric)}
        self._saving = step
        try:
            self._manager.save(step, args=ocp.args.Composite(**items), metrics=metrics, force=True)
        except OSError as e:  # a full disk (the step's directory, a file written at once)
            raise self._save_failed(e) from None

    def restore(self, abstract_state: Any, step: int | None = None) -> tuple[Any, dict[str, Any]]:
        """Restores against `abstract_state` (a tree of `jax.ShapeDtypeStruct` with shardings),
        so arrays come back with the caller's shardings. Defaults to the latest step."""
        step = self.latest_step() if step is None else step
        if step is None:
            raise FileNotFoundError(f"no checkpoint in {self.directory}")
        layout = _layout(self._manager, step)
        if layout is None:  # saved before packing
            restored = self._manager.restore(
                step,
                args=ocp.args.Composite(
                    state=ocp.args.StandardRestore(abstract_state), meta=ocp.args.JsonRestore()
                ),
            )
            return restored["state"], restored["meta"]
        stored = _read_stored(self._manager, step, layout, abstract_state)
        return packing.unpack(stored, layout, abstract_state), self.restore_meta(step)

    def restore_replay(self, step: int) -> Any:
        """The `replay` item of `step` as host arrays, whole (every process gets all of it)."""
        target = on_one_local_device(self._manager.item_metadata(step)["replay"])
        restored = self._manager.restore(
            step, args=ocp.args.Composite(replay=ocp.args.StandardRestore(target))
        )
        return jax.device_get(restored["replay"])

    def restore_data(self, step: int, item: str = "data") -> np.ndarray | None:
        """This process's bytes of per-process `item` saved at `step` (uint8), or None if that
        step holds none."""
        if not os.path.isdir(os.path.join(self.directory, str(step), item)):
            return None
        args = ocp.args.Composite(**{item: ProcessBytesRestore()})
        return self._manager.restore(step, args=args)[item]

    def restore_meta(self, step: int | None = None) -> dict[str, Any]:
        step = self.latest_step() if step is None else step
        if step is None:
            raise FileNotFoundError(f"no checkpoint in {self.directory}")
        restored = self._manager.restore(step, args=ocp.args.Composite(meta=ocp.args.JsonRestore()))
        return restored["meta"]

    def wait(self) -> None:
        """Waits for the last save to finish; CheckpointSaveError (one line) if it failed."""
        try:
            self._manager.wait_until_finished()
        except Exception as e:  # noqa: BLE001  what the commit thread raised
            raise self._save_failed(e) from None
        self._saving = None

    def close(self) -> None:
        try:
            self._manager.close()
        except Exception as e:  # noqa: BLE001  a last save that failed
            raise self._save_failed(e) from None

    def _save_failed(self, error: BaseException) -> CheckpointSaveError:
        """A failed save as one line: which step, why, and what is kept (read from the disk:
        Orbax forgets the steps it meant to delete once the save completed, but deleted none)."""
        step, self._saving = self._saving, None
        kept = complete_steps(self.directory)
        newest = f"newest complete step {kept[-1]}" if kept else "no complete step"
        return CheckpointSaveError(
            f"checkpoint step {step} could not be saved ({first_line(error)}); the run stopped "
            f"and deleted no older step ({newest} in {self.directory}); free space or fix the "
            "cause, then continue with --resume"
        )

    def __enter__(self) -> Checkpointer:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _metric(metrics: dict[str, float]) -> float:
    return metrics[METRIC]


def complete_steps(directory: str) -> list[int]:
    """The complete (renamed) steps in a checkpoint dir, ascending."""
    try:
        return sorted(int(name) for name in os.listdir(directory) if name.isdigit())
    except FileNotFoundError:
        return []


def find_checkpoint_dir(path: str) -> str | None:
    """`path/checkpoints` (a run's work dir) or `path` itself, if it holds checkpoint steps."""
    for candidate in (os.path.join(path, "checkpoints"), path):
        if os.path.isdir(candidate) and any(n.isdigit() for n in os.listdir(candidate)):
            return candidate
    return None


def on_one_local_device(saved_metadata: Any) -> Any:
    """A restore target that puts every saved array whole on this process's first device."""
    device = jax.sharding.SingleDeviceSharding(jax.local_devices()[0])
    return jax.tree.map(
        lambda m: jax.ShapeDtypeStruct(m.shape, m.dtype, sharding=device), saved_metadata
    )


def item_handlers() -> dict[str, ocp.CheckpointHandler]:
    """Every item a step may hold, so any subset restores without Orbax's warnings."""
    return {
        "state": ocp.StandardCheckpointHandler(),
        "packed": BytesHandler(),
        "layout": ocp.JsonCheckpointHandler(),
        "meta": ocp.JsonCheckpointHandler(),
        "replay": ocp.StandardCheckpointHandler(),
        INTEGRITY: ocp.JsonCheckpointHandler(),
        **{name: ProcessBytesHandler() for name in PROCESS_ITEMS},
    }


def _reader(directory: str) -> ocp.CheckpointManager:
    """A manager that reads any step's items without knowing how they were saved."""
    options = ocp.CheckpointManagerOptions(create=False)
    return ocp.CheckpointManager(
        os.path.abspath(directory), options=options, item_handlers=item_handlers()
    )


def restore_params(path: str, step: int | None = None, agent: str | None = None) -> Any:
    """The params of a run's checkpoint (host arrays), whatever its optimizer was and whatever
    devices and processes saved it (restored onto one local device, then fetched); of agent
    `agent` where the run had several (`config.agents`; ValueError without one)."""
    directory = find_checkpoint_dir(path)
    if directory is None:
        raise FileNotFoundError(f"no checkpoint under {path}")
    manager = _reader(directory)
    try:
        step = manager.latest_step() if step is None else step
        layout = _layout(manager, step)
        if layout is None:  # saved before packing
            target = on_one_local_device(manager.item_metadata(step)["state"])
            restored = manager.restore(
                step, args=ocp.args.Composite(state=ocp.args.StandardRestore(target))
            )
            return jax.device_get(saved_params(restored["state"]))
        stored = local_replica(_read_stored(manager, step, layout, None))
    finally:
        manager.close()
    return jax.device_get(saved_params(agent_state(packing.unpack(stored, layout, None), agent)))


class AgentNotSavedError(ValueError):
    """A run of several agents read without naming one of them (the message names them)."""


def saved_params(state: dict) -> Any:
    """The acting params of a saved learner state: its `params`, in the agent's own state
    where an intrinsic reward's learner wraps it (`agents.intrinsic.IntrinsicLearnerState`)."""
    while "params" not in state and "agent" in state:
        state = state["agent"]
    return state["params"]


def agent_state(state: Any, agent: str | None) -> Any:
    """Agent `agent`'s learner state in a saved state: the state itself for a one-agent run,
    `state["agents"][agent]` for several (AgentNotSavedError naming them when `agent` is not
    one)."""
    if not (isinstance(state, dict) and "agents" in state):
        return state
    names = sorted(state["agents"])
    if agent not in state["agents"]:
        given = f"has no agent {agent!r}" if agent else "holds several agents"
        raise AgentNotSavedError(f"the run {given} ({', '.join(names)}); name one of them")
    return state["agents"][agent]


def _read_stored(
    manager: ocp.CheckpointManager, step: int, layout: list[dict], abstract_state: Any
) -> dict[str, Any]:
    """What `packing.pack` stored at `step`, sharded leaves on `abstract_state`'s shardings
    (whole on every device when None). Raises ValueError when the packed bytes are cut."""
    size, sharded = packing.packed_size(layout), packing.sharded_target(layout, abstract_state)
    args = {}
    if size:
        args["packed"] = BytesRestore()
    if sharded:
        args["state"] = ocp.args.StandardRestore({packing.SHARDED: sharded})
    restored = manager.restore(step, args=ocp.args.Composite(**args))
    stored = {}
    if size:
        stored[packing.PACKED] = restored["packed"]
        _check_packed_size(restored["packed"].size, size)
    if sharded:
        stored[packing.SHARDED] = restored["state"][packing.SHARDED]
    return stored


def _layout(manager: ocp.CheckpointManager, step: int) -> list[dict] | None:
    """Step `step`'s packing layout; None for a step saved before packing (no `layout` item)."""
    if not os.path.isdir(os.path.join(manager.directory, str(step), "layout")):
        return None
    restored = manager.restore(step, args=ocp.args.Composite(layout=ocp.args.JsonRestore()))
    return restored["layout"]


def _check_packed_size(have: int | None, want: int) -> None:
    if have != want:
        raise ValueError(f"packed state: {have} bytes, its layout says {want}")
