"""What one `Trainer.run` holds around its engine, and how it is opened.

`open_session` settles which step a resume starts from (`resume.settle`: damaged newer steps
are moved aside, and named in one warning line, the log and the summary), has the engine restore
or initialise its state, then builds the parts every run has, whatever its engine: the counters
and the evaluation history, `config.json`, the logs, the evaluation monitor (process 0) and the
saver.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
import time
from collections.abc import Callable
from typing import Any

from jaxrl_dist.checkpoints.policy import describe_policy
from jaxrl_dist.checkpoints.store import Checkpointer, CheckpointSaveError
from jaxrl_dist.config import TrainConfig, jsonable
from jaxrl_dist.errors import RunError
from jaxrl_dist.learning.distributed import Cluster
from jaxrl_dist.run.best import BestPolicies
from jaxrl_dist.run.counters import Counters, EvalHistory
from jaxrl_dist.run.engine import Engine
from jaxrl_dist.run.hooks import Hooks
from jaxrl_dist.run.logger import MetricLogger, Progress
from jaxrl_dist.run.monitor import EvalMonitor
from jaxrl_dist.run.resume import ResumePlan, check_resumable, settle
from jaxrl_dist.run.saving import Saver
from jaxrl_dist.run.wandb_sink import make_sink


@dataclasses.dataclass
class Session:
    """The parts of a running run besides its engine (`Trainer.run`).

    Attributes:
      counters: what the run has done (checkpointed).
      history: every evaluation (`evals.jsonl`).
      saver: when to save, and the checkpointer.
      monitor, logger: process 0's evaluations and logs (None elsewhere).
      eval_beside: evaluations run beside training (the config's choice, or the engine's
        default), resolved once for the evaluator and the evaluation thread.
      progress: the status lines.
      clock: wall seconds of the whole run, resumed runs included.
      initial_digests: (policy params, whole state) as the run started.
      resumed_from: the update a resumed run started from (None for a fresh run).
      best: process 0's writer of the best evaluations' params (None elsewhere, or with
        `keep_best_checkpoints=0`).
      checkpoint_fallback: a resume that passed over damaged steps: which, and the step it
        resumed (`ResumePlan.record`; None otherwise).
    """

    counters: Counters
    history: EvalHistory
    saver: Saver
    monitor: EvalMonitor | None
    logger: MetricLogger | None
    eval_beside: bool
    progress: Progress
    clock: Callable[[], float]
    initial_digests: tuple[str, str]
    resumed_from: int | None
    best: BestPolicies | None = None
    checkpoint_fallback: dict[str, Any] | None = None

    def release(self, failed: bool = False, at_once: bool = False) -> None:
        """Closes the evaluator, the checkpointer (after its last save) and the logs; a failed
        run also closes the W&B sink (else the trainer does, after the learning curve).
        `at_once` (a lost process, a second Ctrl-C): only the logs, waiting for nothing. A
        failed run's writes that fail (the full disk that failed its save) are let go: the
        run's own error says what went wrong."""
        closes = []
        if not at_once:
            if self.monitor is not None:
                closes.append(self.monitor.close)
            if self.best is not None:  # a failed run's bests too: `--step best` reads them
                closes += [self.best.flush, self.best.close]
            closes.append(self.saver.ckpt.close)
        if self.logger is not None:
            closes.append(lambda: self.logger.close(failed=failed))
        for close in closes:
            try:
                close()
            except (OSError, CheckpointSaveError):
                if not failed:
                    raise


def open_session(
    config: TrainConfig,
    engine: Engine,
    *,
    workdir: str,
    resume: bool,
    quiet: bool,
    hooks: Hooks,
    cluster: Cluster,
    resume_plan: ResumePlan | None = None,
) -> tuple[Session, dict[str, Any] | None]:
    """The session of a run whose checks passed (the engine's state restored or fresh); and
    the resumed checkpoint's meta (None on a fresh start). `resume_plan`: what
    `check_resumable` found on this process (found here when not given). RunError if the
    processes start from different params; ConfigError if no step is intact on all."""
    primary = cluster.is_primary
    ckpt_dir = os.path.join(workdir, "checkpoints")
    plan = None
    if resume:  # before Orbax lists the steps: the damaged ones go aside first
        plan = resume_plan or check_resumable(ckpt_dir, engine.saved_abstract())
        plan = settle(plan, cluster)
    ckpt = Checkpointer(ckpt_dir, config.keep_checkpoints)
    history = EvalHistory(workdir, primary)
    try:
        meta = engine.begin(ckpt, resume)
        counters = Counters() if meta is None else Counters.from_meta(meta)
        if meta is not None:
            history.resume(counters.updates, meta.get("evals"))
        if primary:  # the first write to the work dir (besides checkpoints/)
            with open(os.path.join(workdir, "config.json"), "w") as f:
                json.dump(jsonable(config.to_dict()), f, indent=2)
        digests = engine.digests()
        differ = cluster.disagreeing(digests[0])
        if differ:  # the same config and seed must give every process the same params
            raise RunError(f"process(es) {differ} start from other params than process 0")
        logger = None
        if primary:
            sink = make_sink(config, workdir, resume)  # a failing wandb.init says why
            logger = MetricLogger(workdir, wall_time_offset=counters.wall_time_s, sink=sink)
            _tell_fallback(plan, logger, counters.env_steps)
    except BaseException:
        ckpt.close()
        raise
    progress = Progress(config.total_env_steps, quiet=quiet or not primary)
    monitor = best = None
    beside = config.evaluates_in_background(engine.evaluates_beside_by_default)
    policy = describe_policy(config, engine.spec)
    if primary:
        if config.keep_best_checkpoints:
            best = _best_policies(config, engine, ckpt_dir, policy)
            if meta is not None:
                best.resume(counters.updates)
        evaluator, videos = engine.evaluator(beside, workdir)
        monitor = EvalMonitor(
            config,
            evaluator,
            hooks=hooks,
            logger=logger,
            progress=progress,
            history=history,
            videos=videos,
            best=best,
        )
    start, base_wall = time.monotonic(), counters.wall_time_s
    saver = Saver(config, cluster, ckpt, policy, base_wall)
    return Session(
        counters=counters,
        history=history,
        saver=saver,
        monitor=monitor,
        logger=logger,
        eval_beside=beside,
        progress=progress,
        clock=lambda: base_wall + time.monotonic() - start,
        initial_digests=digests,
        resumed_from=counters.updates if resume else None,
        best=best,
        checkpoint_fallback=None if plan is None else plan.record(),
    ), meta


def _tell_fallback(plan: ResumePlan | None, logger: MetricLogger, env_steps: int) -> None:
    """Process 0: a resume that passed over damaged steps says so in one warning line and in
    the log (`checkpoint/` keys: the step resumed, how many were passed over)."""
    note = None if plan is None else plan.note()
    if note is None:
        return
    print(f"warning: {note}", file=sys.stderr)
    record = {"checkpoint/resumed_step": plan.step, "checkpoint/damaged_steps": len(plan.damaged)}
    logger.write(env_steps, record)


def _best_policies(
    config: TrainConfig, engine: Engine, ckpt_dir: str, policy: dict[str, Any]
) -> BestPolicies:
    """The writer of the run's best params, with what a checkpoint's meta says of its policy
    (each agent's description, for several)."""
    names = list(engine.agents)
    if engine.layout.alone(names) is not None:
        meta: dict[str, Any] = {"policy": policy}
    else:
        views = engine.views
        policies = {name: describe_policy(views[name].config, engine.spec) for name in names}
        meta = {"policies": policies}
    meta["config"] = jsonable(config.to_dict())
    return BestPolicies(
        ckpt_dir, config.keep_best_checkpoints, meta, names, engine.policy_params_of
    )
