"""Weights & Biases: the run's records, mirrored (`config.wandb`; process 0 only).

W&B gets what the work dir gets: every `metrics.jsonl` record (training logs, evaluations,
hyperparameter changes) against `env_steps`, the config, `summary.json` as the run summary and
`learning_curve.png`. wandb is imported only here, only when `config.wandb.project` is set. The
W&B run id is kept in the work dir (`wandb_run_id`), so `--resume` continues the same W&B run.
With `WANDB_MODE=offline` (or `config.wandb.mode="offline"`) nothing leaves the machine: the
records sit in `WORKDIR/wandb/offline-run-*/` until `wandb sync`.
"""

from __future__ import annotations

import os
import uuid
from typing import Any

from jaxrl_dist.config import ConfigError, TrainConfig, jsonable

RUN_ID_FILE = "wandb_run_id"
STEP_METRIC = "env_steps"


def _import_wandb():
    try:
        import wandb
    except ImportError:
        raise ConfigError(
            "config.wandb.project is set but wandb is not installed; pip install -e '.[wandb]', "
            "or leave config.wandb.project empty"
        ) from None
    return wandb


class WandbSink:
    """One W&B run mirroring a work dir's records; `log` per record, `finish` at the end."""

    def __init__(self, config: TrainConfig, workdir: str, resume: bool):
        wandb = _import_wandb()
        self._wandb = wandb
        settings = config.wandb
        id_path = os.path.join(workdir, RUN_ID_FILE)
        run_id = None
        if resume and os.path.exists(id_path):
            with open(id_path) as f:
                run_id = f.read().strip() or None
        run_id = run_id or uuid.uuid4().hex[:12]
        self.run = wandb.init(
            project=settings.project,
            entity=settings.entity or None,
            group=settings.group or None,
            tags=list(settings.tags) or None,
            name=settings.name or os.path.basename(os.path.normpath(workdir)),
            mode=settings.mode or None,
            dir=workdir,
            id=run_id,
            resume="allow",
            config=jsonable(config.to_dict()),
        )
        with open(id_path, "w") as f:  # after init: a failed init leaves no id behind
            f.write(run_id)
        # Every record is plotted against env steps (not W&B's own step, which must only grow:
        # a resumed run and background evaluations log earlier env steps).
        self.run.define_metric(STEP_METRIC)
        self.run.define_metric("*", step_metric=STEP_METRIC)

    def log(self, record: dict[str, Any]) -> None:
        """One record as written to `metrics.jsonl` (it holds `env_steps`)."""
        self.run.log({k: v for k, v in record.items() if v is not None})

    def finish(self, workdir: str, summary: dict | None, failed: bool) -> None:
        """The summary and the learning curve, then closes the W&B run."""
        if summary:
            flat = {k: v for k, v in summary.items() if isinstance(v, int | float | str | bool)}
            self.run.summary.update(flat)
        curve = os.path.join(workdir, "learning_curve.png")
        if os.path.exists(curve):
            self.run.log({"learning_curve": self._wandb.Image(curve)})
        self.run.finish(exit_code=1 if failed else 0)


def make_sink(config: TrainConfig, workdir: str, resume: bool) -> WandbSink | None:
    """The W&B sink of a run (process 0), or None when `config.wandb` is off."""
    return WandbSink(config, workdir, resume) if config.wandb.enabled else None
