"""When a run saves a checkpoint, and what a save holds.

A save is due by updates or env steps (the same on every process, so all save together), or by
seconds (process 0's clock decides and asks the others through the trainer's agreement). Every
process takes part in every save. (The best evaluations' params are process 0's, `best.py`.)

A save that fails (a full disk: Orbax finishes saves in the background, so a failure shows at
the next save or at the end) stops the run on every process with one line
(`CheckpointSaveError`); no older step was deleted, and nothing more is saved.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from jaxrl_dist.checkpoints.store import BEST_STORE, METRIC, Checkpointer, CheckpointSaveError
from jaxrl_dist.config import TrainConfig, jsonable
from jaxrl_dist.learning.distributed import Cluster
from jaxrl_dist.run.counters import Counters
from jaxrl_dist.run.engine import Saved


class Saver:
    """Decides and writes the run's saves into `ckpt`."""

    def __init__(
        self,
        config: TrainConfig,
        cluster: Cluster,
        ckpt: Checkpointer,
        policy: dict[str, Any],
        wall_time_s: float,
    ):
        """`policy`: how to rebuild the acting network (`checkpoints/policy.describe_policy`)."""
        self._config, self._cluster = config, cluster
        self.ckpt = ckpt
        self._policy = policy  # how to rebuild the acting network (jaxrl_dist.checkpoints.policy)
        self._last_save_s = wall_time_s  # run wall time of the last save (or of the start)
        self.failed: CheckpointSaveError | None = None  # a save failed: nothing more is saved

    def due(self, counters: Counters, env_steps_before: int) -> bool:
        """A save by updates or env steps is due after this update (which took the run from
        `env_steps_before` to `counters.env_steps`)."""
        cfg = self._config
        every = cfg.checkpoint_every_env_steps
        crossed = every and counters.env_steps // every > env_steps_before // every
        every_updates = cfg.checkpoint_every_updates
        return bool(crossed or (every_updates and counters.updates % every_updates == 0))

    def time_due(self, wall_time_s: float) -> bool:
        every = self._config.checkpoint_every_s
        return bool(every) and wall_time_s - self._last_save_s >= every

    def save(
        self, counters: Counters, saved: Callable[[], Saved], params_update: int | None = None
    ) -> None:
        """Every process saves what `saved()` gives (the engine's state at this update;
        `counters.wall_time_s` up to date), with its evaluation metric if its params were just
        evaluated (as process 0 says), unless a save at this update exists already.
        `params_update`: the state's params are those of that earlier update (taken back at a
        stop): a save at this update is then replaced, and the meta says so."""
        step, last = counters.updates, counters.last_eval
        if self.failed is not None:  # the run is stopping for it: the disk may still be full
            return
        self.wait()  # a save may still be finalising in the background: never race it
        if self.ckpt.latest_step() == step:
            if params_update is None:
                # The same state is saved already (a periodic save at this update). Replacing
                # it would open a window with no checkpoint at all; its meta only lacks what
                # followed (a final evaluation, which a resume from it runs again).
                return
            self.ckpt.delete(step)  # of other params: the final state replaces it
        params_of = step if params_update is None else params_update
        evaluated = last is not None and last["updates"] == params_of
        local = last["metric"] if evaluated else np.nan
        # Process 0 evaluates; every process ranks the step by the same float32 copy (Orbax's
        # retention runs on each), and the meta keeps process 0's exact value.
        metric = float(self._cluster.gather(np.float32(local))[0])
        metric = None if np.isnan(metric) else metric
        contents = saved()
        meta = {
            **counters.to_meta(),
            "config": jsonable(self._config.to_dict()),
            "policy": self._policy,
            BEST_STORE: self._config.keep_best_checkpoints,
            **contents.meta,
        }
        if params_update is not None:
            meta["params_update"] = params_update
        if metric is not None:
            meta[METRIC] = float(local) if self._cluster.is_primary else metric
        try:
            self.ckpt.save(
                step,
                contents.state,
                meta,
                contents.replay,
                metric=metric,
                process_items=contents.process_items,
            )
        except CheckpointSaveError as e:
            self.failed = e
            raise
        self._last_save_s = counters.wall_time_s

    def wait(self) -> None:
        """Every process: waits for the last save; if it failed on any process, all raise
        CheckpointSaveError (one line: the failing process's, or which process failed), once."""
        known = self.failed
        try:
            self.ckpt.wait()
        except CheckpointSaveError as e:
            self.failed = e
        if self._cluster.count > 1:
            failed = self._cluster.gather(np.int32(self.failed is not None))
            first = np.flatnonzero(failed)
            if first.size and self.failed is None:
                self.failed = CheckpointSaveError(
                    f"process {first[0]} could not save its checkpoint (see its log); the run "
                    "stopped and deleted no older step"
                )
        if self.failed is not None and known is None:
            raise self.failed
