"""The run's counters (checkpointed in every step's meta) and its evaluation history (not).

The history grows with every evaluation, so it lives in `RUN/evals.jsonl` (process 0 appends
a line per evaluation) instead of in each checkpoint's meta, which a long run would otherwise
carry, and hold in memory, once per save.
"""

from __future__ import annotations

import dataclasses
import json
import os
from typing import Any


@dataclasses.dataclass
class Counters:
    """What the run has done, summed over processes; checkpointed whole (`to_meta`).

    Attributes:
      env_steps: env steps that entered the data seam.
      updates: learner updates.
      wall_time_s: wall time of the whole run, resumes included.
      episodes: training episodes the actors finished.
      dropped_rollouts: rollouts the data seam dropped as stragglers.
      actor_restarts: restarts of actors and inference servers.
      best_eval: the evaluation with the best metric so far (an `EvalHistory` entry).
      last_eval: the newest evaluation.
      max_eval_return: the highest mean evaluation return so far (for `stop_at_eval_return`).
      hparam_changes: run-time hyperparameter changes (few; kept in the summary).
    """

    env_steps: int = 0
    updates: int = 0
    wall_time_s: float = 0.0
    episodes: int = 0
    dropped_rollouts: int = 0
    actor_restarts: int = 0
    best_eval: dict | None = None
    last_eval: dict | None = None
    max_eval_return: float | None = None
    hparam_changes: list = dataclasses.field(default_factory=list)

    def to_meta(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_meta(cls, meta: dict[str, Any]) -> Counters:
        """The counters of a checkpoint's meta (older checkpoints kept every evaluation in
        `meta["evals"]`: the newest and the highest return are taken from it)."""
        known = {f.name for f in dataclasses.fields(cls)}
        counters = cls(**{k: v for k, v in meta.items() if k in known})
        evals = meta.get("evals") or []
        if evals and counters.last_eval is None:
            counters.last_eval = evals[-1]
            counters.max_eval_return = max(e["return"] for e in evals)
        return counters

    def record_eval(self, entry: dict[str, Any]) -> bool:
        """Notes an evaluation; True if its metric beats every earlier one (a tie does not)."""
        best = self.best_eval is None or entry["metric"] > self.best_eval["metric"]
        if best:
            self.best_eval = entry
        self.last_eval = entry
        top = self.max_eval_return
        self.max_eval_return = entry["return"] if top is None else max(top, entry["return"])
        return best


class EvalHistory:
    """Every evaluation of the run, in `RUN/evals.jsonl` and in memory (process 0 only)."""

    FILE = "evals.jsonl"

    def __init__(self, workdir: str, writable: bool):
        self._path = os.path.join(workdir, self.FILE)
        self._writable = writable
        self.entries: list[dict[str, Any]] = []

    def resume(self, up_to_update: int, saved: list[dict[str, Any]] | None = None) -> None:
        """Loads the history of the run being resumed from its checkpoint at `up_to_update`:
        evaluations after that step were of a state the resume discards. `saved` (an older
        checkpoint's `meta["evals"]`) is used when the file does not exist."""
        entries = list(saved or [])
        if os.path.exists(self._path):
            with open(self._path) as f:
                entries = [json.loads(line) for line in f if line.strip()]
        # A background evaluation is part of the state from the update it landed at.
        self.entries = [
            e for e in entries if e.get("landed_at_updates", e["updates"]) <= up_to_update
        ]
        if self._writable:
            with open(self._path, "w") as f:
                f.writelines(json.dumps(e) + "\n" for e in self.entries)

    def append(self, entry: dict[str, Any]) -> None:
        self.entries.append(entry)
        if self._writable:
            with open(self._path, "a") as f:
                f.write(json.dumps(entry) + "\n")
