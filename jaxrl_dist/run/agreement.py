"""How the processes of a run agree on each step: one small all-gather of named fields.

Before each step of the engine (after Sebulba read its batch), each process reports its status
and what it counted since its last report; every process sums the counts and acts on every
status alike, so all step, or all stop, at the same update. Process 0 also carries the step's
length and its requests (save now, new hyperparameters). On one process this is local.
"""

from __future__ import annotations

import signal
from typing import NamedTuple

import numpy as np

CONTINUE, STOP, FAILED = 0, 1, 2
SIGNALLED = 100  # + the signal number: a stop by a signal, so the others know it was one


class Report(NamedTuple):
    """One process's report for one update (int64 fields, gathered as one row).

    Attributes:
      status: CONTINUE (its data is ready), STOP, FAILED, or SIGNALLED + the signal number.
      updates: the updates the step would make (process 0's is the step's).
      env_steps: env steps its data seam took in since its last report.
      dropped: rollouts it dropped as stragglers since its last report.
      restarts: actor and server restarts since its last report.
      episodes: training episodes its actors finished since its last report.
      save_now: process 0 asks every process to save before this update (a new best, or
        `checkpoint_every_s` due).
      new_hparams: process 0 has new hyperparameters for every process.
      ready: the learners (lanes) whose data is ready here, a bitmask (one learner: 1). The
        agreement holds their AND: a lane steps only when its batch is ready on every
        process (`sebulba/rotation.py` picks one in turn).
    """

    status: int
    updates: int = 1
    env_steps: int = 0
    dropped: int = 0
    restarts: int = 0
    episodes: int = 0
    save_now: int = 0
    new_hparams: int = 0
    ready: int = 1


class Agreement(NamedTuple):
    """What every process concluded from all reports.

    Attributes:
      totals: each count summed over the processes (a `Report` whose status is unused; its
        `ready` is the AND of the processes' masks).
      go: True to update; False to stop.
      stop_reason: why the run stops ("" when it goes on).
      failed: the first failed process, or None.
      requests: process 0's report (its `updates`, `save_now` and `new_hparams`).
    """

    totals: Report
    go: bool
    stop_reason: str
    failed: int | None
    requests: Report


def agree(rows: np.ndarray) -> Agreement:
    """Reads the gathered `[processes, len(Report._fields)]` rows."""
    reports = [Report(*map(int, row)) for row in rows]
    ready = int(np.bitwise_and.reduce(rows[:, Report._fields.index("ready")]))
    totals = Report(0, *(int(v) for v in rows[:, 1:].sum(axis=0)))._replace(ready=ready)
    status = rows[:, 0]
    failed = np.flatnonzero(status == FAILED)
    if failed.size:
        return Agreement(totals, False, "", int(failed[0]), reports[0])
    signalled = np.flatnonzero(status > SIGNALLED)
    if signalled.size:  # so every process skips the final evaluation, as after a signal
        name = signal.Signals(int(status[signalled[0]]) - SIGNALLED).name
        return Agreement(totals, False, f"{name} on process {signalled[0]}", None, reports[0])
    stopping = np.flatnonzero(status == STOP)
    if stopping.size:
        return Agreement(totals, False, f"process {stopping[0]} stopped", None, reports[0])
    return Agreement(totals, True, "", None, reports[0])
