"""What one `Trainer.run` holds around its engine, and how it is opened.

`open_session` has the engine restore or initialise its state, then builds the parts every run
has, whatever its engine: the counters and the evaluation history, `config.json`, the logs, the
evaluation monitor (process 0) and the saver.
"""

from __future__ import annotations

import dataclasses
import json
import os
import time
from collections.abc import Callable
from typing import Any

from jaxrl_dist.config import TrainConfig, jsonable
from jaxrl_dist.config.agents import agent_views
from jaxrl_dist.errors import RunError
from jaxrl_dist.learning.distributed import Cluster
from jaxrl_dist.run.best import BestPolicies
from jaxrl_dist.run.checkpoint import Checkpointer
from jaxrl_dist.run.counters import Counters, EvalHistory
from jaxrl_dist.run.engine import Engine
from jaxrl_dist.run.hooks import Hooks
from jaxrl_dist.run.logger import MetricLogger, Progress
from jaxrl_dist.run.monitor import EvalMonitor
from jaxrl_dist.run.policy import describe_policy
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

    def release(self, failed: bool = False, at_once: bool = False) -> None:
        """Closes the evaluator, the checkpointer (after its last save) and the logs; a failed
        run also closes the W&B sink (else the trainer does, after the learning curve).
        `at_once` (a lost process, a second Ctrl-C): only the logs, waiting for nothing."""
        if not at_once:
            if self.monitor is not None:
                self.monitor.close()
            if self.best is not None:  # a failed run's bests too: `--step best` reads them
                self.best.flush()
                self.best.close()
            self.saver.ckpt.close()
        if self.logger is not None:
            self.logger.close(failed=failed)


def open_session(
    config: TrainConfig,
    engine: Engine,
    *,
    workdir: str,
    resume: bool,
    quiet: bool,
    hooks: Hooks,
    cluster: Cluster,
) -> tuple[Session, dict[str, Any] | None]:
    """The session of a run whose checks passed (the engine's state restored or fresh); and
    the resumed checkpoint's meta (None on a fresh start). RunError if the processes start
    from different params."""
    primary = cluster.is_primary
    ckpt_dir = os.path.join(workdir, "checkpoints")
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
    ), meta


def _best_policies(
    config: TrainConfig, engine: Engine, ckpt_dir: str, policy: dict[str, Any]
) -> BestPolicies:
    """The writer of the run's best params, with what a checkpoint's meta says of its policy
    (each agent's description, for several)."""
    names = list(engine.agents)
    if len(names) > 1:
        views = {view.name: view for view in agent_views(config)}
        policies = {name: describe_policy(views[name].config, engine.spec) for name in names}
        meta = {"policies": policies}
    else:
        meta = {"policy": policy}
    meta["config"] = jsonable(config.to_dict())
    return BestPolicies(
        ckpt_dir, config.keep_best_checkpoints, meta, names, engine.policy_params_of
    )
