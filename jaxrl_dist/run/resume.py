"""What a resume needs beyond the learner state: checks before anything is written, and the
replay log that lets deterministic mode resume exactly.

Deterministic mode's actors start new envs at every multiple of `env_epoch_updates` (see
`runtime.actor.Lockstep`), so the env state at update `u` follows from the epoch's seed and the
env actions sent since the epoch began. The learner sees every one of those actions (each update
takes one unroll of every actor), keeps them in a `ReplayLog`, and each checkpoint saves them;
a resumed actor replays them, without inference, before it acts again.
"""

from __future__ import annotations

import logging
import os
import sys
from typing import Any

import jax
import numpy as np

from jaxrl_dist.config import ConfigError
from jaxrl_dist.data import snapshot
from jaxrl_dist.run.checkpoint import (
    Checkpointer,
    CheckpointReadError,
    abstract_like,
    first_line,
    state_mismatch,
)

log = logging.getLogger(__name__)


def check_resumable(ckpt_dir: str, abstract_state: Any) -> None:
    """Raises ConfigError (one line, nothing written) if the latest checkpoint in `ckpt_dir`
    cannot be read, or holds a state of other shapes than this config's."""
    names = os.listdir(ckpt_dir) if os.path.isdir(ckpt_dir) else []
    steps = sorted(int(n) for n in names if n.isdigit())
    if not steps:
        partial = f" (only incomplete saves: {', '.join(sorted(names))})" if names else ""
        raise ConfigError(
            f"--resume: no complete checkpoint in {ckpt_dir}{partial}; drop --resume and start "
            "anew in another --workdir"
        )
    try:
        problem = state_mismatch(ckpt_dir, abstract_state, steps[-1])
    except CheckpointReadError as e:
        fallback = (
            f"delete {os.path.join(ckpt_dir, str(steps[-1]))} to resume from step {steps[-2]}"
            if len(steps) > 1
            else "no earlier step to fall back to: start anew in another --workdir"
        )
        raise ConfigError(f"--resume: checkpoint {e}; {fallback}") from None
    if problem:
        raise ConfigError(
            f"--resume: the checkpoint in {ckpt_dir} does not fit this config ({problem}); "
            "resume with the run's own config (its config.json), or start anew in another "
            "--workdir (nothing was overwritten)"
        )


def restore_checkpoint(
    ckpt: Checkpointer, template: Any, replay: ReplayLog | None, process_columns: slice
) -> tuple[Any, dict, np.ndarray | None]:
    """The latest step's (state, with `template`'s shardings; meta; the whole replay, its
    `process_columns` loaded into `replay`). Raises ConfigError when the arrays cannot be read
    (`check_resumable` found their metadata in order)."""
    step = ckpt.latest_step()
    try:
        state, meta = ckpt.restore(abstract_like(template), step)
        full = replay.restore(ckpt, step, meta, process_columns) if replay is not None else None
    except Exception as e:  # noqa: BLE001  Orbax and tensorstore raise many kinds here
        raise ConfigError(
            f"--resume: checkpoint {step} in {ckpt.directory} cannot be restored "
            f"({first_line(e)}); delete that step's directory to resume from an earlier one"
        ) from None
    return state, meta, full


def restore_replay_contents(ckpt: Checkpointer, data: Any, min_size: int, primary: bool) -> None:
    """Refills this process's replay from the latest step's saved contents; when the step
    holds none (`config.replay.save` off), says in one warning line that the replay refills
    to `min_size` before learning goes on. ConfigError if they cannot be taken back."""
    step = ckpt.latest_step()
    try:
        saved = ckpt.restore_data(step)
        if saved is not None:
            data.restore(snapshot.from_bytes(saved))
    except Exception as e:  # noqa: BLE001  Orbax, a cut file, another replay's shapes
        raise ConfigError(
            f"--resume: the replay saved at checkpoint {step} cannot be taken back "
            f"({first_line(e)}); resume with the run's own config, or delete that step's "
            "data/ directory to refill the replay instead"
        ) from None
    if saved is None and primary:
        print(
            f"warning: checkpoint {step} holds no replay contents (config.replay.save is off); "
            f"the replay refills to config.replay.min_size={min_size} before learning goes on",
            file=sys.stderr,
        )


class ReplayLog:
    """This process's env actions since the current env epoch began, one `[T, B_process, ...]`
    array per update (columns: its actors in order, each actor's envs by env id)."""

    def __init__(self, epoch_updates: int, layout: dict[str, int]):
        """`layout`: what the recorded arrays' shapes follow from (unroll length, envs per
        actor, ...); a checkpoint with another layout is not replayed."""
        self._epoch = epoch_updates
        self._layout = layout
        self._start = 0  # the update the kept unrolls start at
        self._unrolls: list[np.ndarray] = []

    def _epoch_start(self, update: int) -> int:
        return update - update % self._epoch

    def record(self, update: int, env_actions: np.ndarray) -> None:
        """Adds the env actions of the unrolls update `update` (0-based) learned from."""
        if update % self._epoch == 0 or update != self._start + len(self._unrolls):
            self._start, self._unrolls = update, []  # a new epoch (or a gap: see `window`)
        self._unrolls.append(env_actions)

    def window(self, updates: int) -> np.ndarray | None:
        """`[n, T, B_process, ...]`: what a run resumed after `updates` updates replays (the
        unrolls of its epoch before it). None when it starts a new epoch, or when the log lacks
        part of the epoch (after a resume that could not replay): that resume is not exact."""
        first = self._epoch_start(updates)
        if updates == first or self._start != first or len(self._unrolls) != updates - first:
            return None
        return np.stack(self._unrolls)

    def meta(self, updates: int) -> dict[str, int]:
        """What a checkpoint with a replay window after `updates` updates records of it."""
        first = self._epoch_start(updates)
        return {"epoch_updates": self._epoch, "first_update": first, **self._layout}

    def restore(self, ckpt: Checkpointer, step: int, meta: dict, process_columns: slice) -> Any:
        """Loads the unrolls of checkpoint `step` (saved after `step` updates): this process's
        columns into the log; returns the whole `[n, T, B, ...]` array (None if nothing to
        replay). An unusable replay (another `env_epoch_updates`, a checkpoint saved outside
        deterministic mode) is logged: the resume then continues, but not exactly."""
        saved = meta.get("replay")
        first = self._epoch_start(step)
        if first == step:
            return None
        if saved != self.meta(step):
            log.warning(
                "deterministic resume is not exact: checkpoint %d holds no replay for this "
                "config (saved: %s, wanted: %s); the actors start new envs",
                step, saved, self.meta(step),
            )  # fmt: skip
            return None
        full = np.asarray(ckpt.restore_replay(step)["env_actions"])
        self._start = first
        self._unrolls = list(full[:, :, process_columns])
        return full


def replay_for_actors(full: np.ndarray | None, envs_per_actor: int) -> dict[int, np.ndarray]:
    """Splits `[n, T, B, ...]` replay columns by global actor index (`envs_per_actor` each)."""
    if full is None:
        return {}
    count = full.shape[2] // envs_per_actor
    return {g: full[:, :, g * envs_per_actor : (g + 1) * envs_per_actor] for g in range(count)}


def put_replay(window: np.ndarray, sharding: jax.sharding.Sharding) -> dict[str, jax.Array]:
    """This process's `[n, T, B_process, ...]` window as its slice of a global array (columns
    split over the learner devices of all processes), for Orbax to save."""
    return {"env_actions": jax.make_array_from_process_local_data(sharding, window)}
