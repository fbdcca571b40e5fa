"""Weights & Biases: the run's records, mirrored (`config.wandb`; process 0 only).

W&B gets what the work dir gets: every `metrics.jsonl` record (training logs, evaluations,
hyperparameter changes) against `env_steps`, the config, `summary.json` as the run summary and
`learning_curve.png`. wandb is imported only here, only when `config.wandb.project` is set. The
W&B run id is kept in the work dir (`wandb_run_id`), so `--resume` continues the same W&B run.
With `WANDB_MODE=offline` (or `config.wandb.mode="offline"`) nothing leaves the machine: the
records sit in `WORKDIR/wandb/offline-run-*/` until `wandb sync`.
"""

from __future__ import annotations

import importlib.util
import json
import os
import uuid
from typing import Any

from jaxrl_dist.config import ConfigError, TrainConfig, jsonable
from jaxrl_dist.errors import RunError

RUN_ID_FILE = "wandb_run_id"
STEP_METRIC = "env_steps"


MISSING = (
    "config.wandb.project is set but wandb is not installed; pip install -e '.[wandb]', or "
    "leave config.wandb.project empty"
)


def wandb_problem(config: TrainConfig) -> str | None:
    """One line when W&B is asked for and wandb cannot be imported (checked by every process
    before the run, so all refuse together), else None."""
    if config.wandb.enabled and importlib.util.find_spec("wandb") is None:
        return MISSING
    return None


def _import_wandb():
    try:
        import wandb
    except ImportError:
        raise ConfigError(MISSING) from None
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
        try:
            self.run = self._init(wandb, settings, workdir, run_id, config)
        except Exception as e:  # noqa: BLE001  no API key, no network, ...: one line
            first = str(e).splitlines()[0] if str(e) else type(e).__name__
            raise RunError(
                f"wandb.init failed: {first}; fix it, or set WANDB_MODE=offline"
            ) from None
        with open(id_path, "w") as f:  # after init: a failed init leaves no id behind
            f.write(run_id)
        # Every record is plotted against env steps (not W&B's own step, which must only grow:
        # a resumed run and background evaluations log earlier env steps).
        self.run.define_metric(STEP_METRIC)
        self.run.define_metric("*", step_metric=STEP_METRIC)

    @staticmethod
    def _init(wandb, settings, workdir: str, run_id: str, config: TrainConfig):
        return wandb.init(
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

    def log(self, record: dict[str, Any]) -> None:
        """One record as written to `metrics.jsonl` (it holds `env_steps`)."""
        self.run.log({k: v for k, v in record.items() if v is not None})

    def finish(self, workdir: str, summary: dict | None, failed: bool) -> None:
        """The summary and the learning curve, then closes the W&B run."""
        if summary:  # nested entries (evals, best_eval, ...) as JSON text: W&B keeps scalars
            plain = (int, float, str, bool, type(None))
            self.run.summary.update(
                {k: v if isinstance(v, plain) else json.dumps(v) for k, v in summary.items()}
            )
        curve = os.path.join(workdir, "learning_curve.png")
        if os.path.exists(curve):
            self.run.log({"learning_curve": self._wandb.Image(curve)})
        self.run.finish(exit_code=1 if failed else 0)


def make_sink(config: TrainConfig, workdir: str, resume: bool) -> WandbSink | None:
    """The W&B sink of a run (process 0), or None when `config.wandb` is off."""
    return WandbSink(config, workdir, resume) if config.wandb.enabled else None
