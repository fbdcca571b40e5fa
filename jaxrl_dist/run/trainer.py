"""Wires a `TrainConfig` into a run: acting, the data seam, the learner, evaluation, checkpoints.

The trainer never names an agent nor a data flow: it looks the config's `algorithm` up in the
registry, reads batches from whichever data seam the agent's entry names, and calls the learner
half's pure functions. Only the main thread updates, evaluates and saves.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from typing import Any

import jax
import numpy as np

from jaxrl_dist.config import ConfigError, TrainConfig, jsonable
from jaxrl_dist.data.base import Batch
from jaxrl_dist.determinism import set_deterministic_xla_flags
from jaxrl_dist.errors import NonFiniteError, RunError
from jaxrl_dist.learning.distributed import Cluster, ProcessLostError, lost_message
from jaxrl_dist.learning.learner import host_metrics
from jaxrl_dist.run.agreement import CONTINUE, FAILED, SIGNALLED, STOP, Report, agree
from jaxrl_dist.run.checkpoint import tree_digest
from jaxrl_dist.run.curves import draw_learning_curve
from jaxrl_dist.run.hooks import Hooks
from jaxrl_dist.run.hparams import HyperparamControl
from jaxrl_dist.run.logger import LogWindow, MetricLogger
from jaxrl_dist.run.preflight import prepare
from jaxrl_dist.run.run_evaluation import RunEvaluation
from jaxrl_dist.run.session import Session, start_acting, start_session
from jaxrl_dist.run.stopping import StopControl
from jaxrl_dist.run.summary import RunResult, run_summary
from jaxrl_dist.threads import switch_interval

ACTOR_JOIN_TIMEOUT_S = 10.0  # at a stop, for all actors together


class Trainer:
    """One training run in `workdir` (`checkpoints/`, `metrics.jsonl`, `evals.jsonl`, `tb/`,
    `summary.json`, `learning_curve.png`): `Trainer(config, workdir, hooks=...).run()`.

    In a multi-process run every process builds a Trainer on the same (shared) `workdir`: each
    runs its own actors and its part of the update; process 0 evaluates, calls the hooks and
    writes the logs and the summary; every process takes part in each checkpoint save (Orbax's
    multi-process rules).
    """

    def __init__(
        self,
        config: TrainConfig,
        workdir: str,
        resume: bool = False,
        quiet: bool = False,
        hooks: Hooks | None = None,
    ):
        if config.deterministic:  # in effect only if JAX has not started yet (else a warning)
            set_deterministic_xla_flags()
        self.config = config
        self.hooks = hooks or Hooks()
        self.workdir = os.path.abspath(workdir)
        self.cluster = Cluster()
        launch = json.dumps(
            {"config": jsonable(config.to_dict()), "resume": resume}, sort_keys=True
        )
        differ = self.cluster.disagreeing(hashlib.sha256(launch.encode()).hexdigest())
        if differ:
            raise ConfigError(
                f"process(es) {differ} have a different config from process 0; give every "
                "process the same config, overrides and resume flag"
            )
        self._resume, self._quiet = resume, quiet
        self.stop = StopControl()
        # Checks that read this machine (devices, files) may fail on one process only: all
        # processes learn of it, so none goes on alone into a collective.
        try:
            self._prepared = prepare(config, self.workdir, resume)
            self.devices, self.agent = self._prepared.devices, self._prepared.agent
            problem = ""
        except ConfigError as e:
            problem = str(e)
        failed = np.flatnonzero(self.cluster.gather(np.array(bool(problem), np.int32)))
        if problem:
            raise ConfigError(problem)
        if failed.size:
            raise ConfigError(f"process {failed[0]} refused the run (see its error)")
        self.hparams = HyperparamControl.for_run(
            config, self.agent.hyperparams, self.workdir, self.cluster.is_primary
        )
        self._save_now = False  # process 0: a new best to save, or checkpoint_every_s is due
        self._save_after_update = False  # every process: new hyperparameters must reach disk
        self._reported = {"restarts": 0, "episodes": 0}
        self._evals = RunEvaluation(config, self.stop, self._prepared.devices.actor_devices[0])

    def set_hyperparams(self, **values: float) -> None:
        """Changes run-time hyperparameters (`Agent.hyperparams`, e.g. learning_rate) from the
        next update on; call it from a hook (process 0). Raises HyperparamError (one line) for
        a name that cannot change or a value the agent's config refuses."""
        self.hparams.request(values, source="set_hyperparams")

    def request_stop(self, reason: str) -> None:
        """Asks the run to stop after the current update (any thread)."""
        self.stop.request(reason)

    # ----------------------------------------------------------------------------- run
    def run(self) -> RunResult:
        """Trains until a stop condition; returns the result (its summary is `summary.json`)."""
        with self.stop.signal_handlers(), switch_interval(self.config.switch_interval_s):
            return self._run()

    def _run(self) -> RunResult:
        cfg = self.config
        run, meta = start_session(
            cfg, self._prepared, self.workdir, self._resume, self._quiet, self.hooks, self.cluster,
            self.stop.requested,
        )  # fmt: skip
        if meta is not None:
            learner = run.learner
            self.hparams.resume(learner.core.hparams(run.state), meta["config"]["algo"])
            target, top = cfg.stop_at_eval_return, run.counters.max_eval_return
            if target is not None and top is not None and top >= target:
                self.request_stop(f"an earlier evaluation already reached {target}")
        error: RunError | None = None
        self._evals.start(run)
        try:
            start_acting(run, cfg, self._prepared)
            self._loop(run)
        except RunError as e:
            error = e
            self.request_stop(f"error: {e}")
        except ProcessLostError:  # no collective can succeed: no final save, leave at once
            self._evals.stop_thread(run)
            if run.logger is not None:
                run.logger.close(failed=True)
            raise
        except Exception:  # a bug or a hook's exception: no final save; release what it holds
            self._evals.stop_thread(run)
            run.release(failed=True)
            raise
        finally:
            run.stop_actors.set()
            if run.fleet is not None:
                run.fleet.join(timeout_s=ACTOR_JOIN_TIMEOUT_S)
        try:
            summary = self._finish(run, error)
        except BaseException:
            run.release(failed=True)
            raise
        run.release()
        if self.cluster.is_primary and cfg.learning_curve:
            draw_learning_curve(self.workdir, run.progress.message)
        if run.logger is not None:
            run.logger.finish_sink(summary, failed=error is not None)
        if error is not None:
            raise error
        return RunResult.from_summary(summary, self.workdir)

    def _finish(self, run: Session, error: RunError | None) -> dict:
        """The final evaluation, save, summary and `save_last` hook."""
        counters = run.counters
        counters.wall_time_s = run.clock()
        self._evals.finish(
            run, land=error is None, evaluate=error is None and not self.stop.by_signal
        )
        donated = isinstance(error, NonFiniteError)  # no valid state to save or hand over
        if not donated:
            self._save(run)
        run.saver.ckpt.wait()
        summary = self._final_summary(run, error)
        if not donated and self.cluster.is_primary and self.hooks.save_last is not None:
            last = counters.last_eval["metric"] if counters.last_eval else None
            params = run.learner.actor_params(run.state)
            self.hooks.save_last(params, last, counters.env_steps)
        return summary

    def _final_summary(self, run: Session, error) -> dict:
        """The summary (`summary.json`, written by process 0), params digests of every process."""
        history = run.monitor.history.entries if run.monitor is not None else []
        summary = run_summary(
            run.counters, history, self.config.stop_at_eval_return, self.stop.reason,
            run.saver.ckpt,
        )  # fmt: skip
        summary["initial_params_sha256"], summary["initial_state_sha256"] = run.initial_digests
        summary["resumed_from_update"] = run.resumed_from
        if not isinstance(error, NonFiniteError):  # else run.state was donated to the update
            summary["params_sha256"] = tree_digest(run.learner.actor_params(run.state))
            summary["state_sha256"] = tree_digest(run.state)
            # Each process digests its own copy: equal digests mean bit-identical params.
            summary["params_sha256_by_process"] = self.cluster.gather_digests(
                summary["params_sha256"]
            )
        if self.cluster.is_primary:
            with open(os.path.join(self.workdir, "summary.json"), "w") as f:
                json.dump(summary, f, indent=2)
        run.progress.message(
            f"done ({summary['stop_reason']}): {summary['env_steps']:,} env steps, "
            f"{summary['updates']:,} updates in {summary['wall_time_s']:.1f}s, "
            f"final eval return {summary['final_eval_return']}"
        )
        return summary

    def _save(self, run: Session) -> None:
        run.counters.wall_time_s = run.clock()
        run.saver.save(run.counters, run.state, run.replay)

    # ----------------------------------------------------------------------------- the loop
    def _loop(self, run: Session) -> None:
        cfg, counters = self.config, run.counters
        window = LogWindow(counters.env_steps)
        while True:
            # ---- stop conditions (the same on every process, or agreed below)
            reached = cfg.ends_at(counters.env_steps, counters.episodes)
            if reached:
                self.request_stop(reached)
                return
            if cfg.max_wall_time_s and run.clock() >= cfg.max_wall_time_s:
                self.request_stop("max_wall_time_s reached")
            if self.cluster.is_primary:
                self.hparams.poll()
                due = self._evals.best_to_save or run.saver.time_due(run.clock())
                self._save_now, self._evals.best_to_save = self._save_now or due, False
            # ---- data: this process's batch, then every process agrees to update or stop
            t0 = time.perf_counter()
            batch, failure = self._read(run)
            steps_before = counters.env_steps
            if not self._agree(run, batch, failure):
                return
            t1 = time.perf_counter()
            if run.replay is not None:
                run.replay.record(counters.updates, batch.env_actions)
            window.lags.append(counters.updates - float(np.mean(batch.data.policy_version)))
            # ---- learn and publish
            device_batch = run.learner.put_batch(batch.data)
            t2 = time.perf_counter()
            metrics, priorities = self._update(run, device_batch)
            if priorities is not None:  # a prioritized replay takes them back
                run.data.update_priorities(batch.sample_ids, run.learner.process_rows(priorities))
            t3 = time.perf_counter()
            params = run.learner.actor_params(run.state)
            run.store.publish(params, counters.updates + 1)
            if run.pools:  # self-play opponents: a snapshot every pool_every_updates
                run.pools.offer(params, counters.updates + 1)
            window.add_timers(
                queue_get_s=t1 - t0, transfer_s=t2 - t1, update_s=t3 - t2,
                publish_s=time.perf_counter() - t3,
            )  # fmt: skip
            counters.updates += 1
            # ---- around the update: hooks, evaluation, logs, saves
            if self.cluster.is_primary and self.hooks.on_iteration is not None:
                self.hooks.on_iteration(counters.episodes, counters.env_steps)
            self._evals.after_update(run)
            if counters.updates % cfg.log_every_updates == 0:
                self._log(run, window, metrics)
            # At the last update (the same on every process) the final save follows the final
            # evaluation, after the actors stopped: a save now would leave that one without its
            # metric (a save at an update that has one is not made twice).
            last = cfg.ends_at(counters.env_steps, counters.episodes)
            if not last and (run.saver.due(counters, steps_before) or self._save_after_update):
                self._save_after_update = False
                self._save_now = self._evals.best_to_save = False  # a new best is in this save
                self._save(run)

    def _read(self, run: Session) -> tuple[Batch | None, RunError | None]:
        """This process's next batch (None on a stop request: the data seam reads the trainer's
        stop flag), or the failure that ended it."""
        try:
            return run.data.read(run.counters.updates), None
        except RunError as e:
            return None, e

    def _update(self, run: Session, device_batch) -> tuple[dict[str, float], Any]:
        """One update of the learner state (donated) -> (metrics, the batch's priorities or
        None); raises NonFiniteError on a bad metric."""
        try:
            new_state, metrics, priorities = run.learner.update(run.state, device_batch)
            metrics = host_metrics(metrics)
        except jax.errors.JaxRuntimeError as e:
            if self.cluster.count == 1:
                raise
            raise ProcessLostError(lost_message(e)) from None
        bad = MetricLogger.nonfinite(metrics)
        if bad:  # keep the last good checkpoint; run.state was donated, nothing to save
            raise NonFiniteError(
                f"non-finite {', '.join(bad)} at update {run.counters.updates + 1}; "
                "the last checkpoint is kept"
            )
        run.state = new_state
        return metrics, priorities

    def _agree(self, run: Session, batch: Batch | None, failure: RunError | None) -> bool:
        """Every process reports its status and counts (`agreement.Report`); all act alike:
        True = update, False = stop. Raises this process's failure, or a RunError naming the
        failed process."""
        status = FAILED if failure else CONTINUE if batch is not None else STOP
        if status == STOP and self.stop.signal:
            status = SIGNALLED + self.stop.signal
        restarts = run.fleet.restarts - self._reported["restarts"]
        episodes = run.stats.episodes_finished - self._reported["episodes"]
        self._reported = {"restarts": run.fleet.restarts, "episodes": run.stats.episodes_finished}
        report = Report(
            status, batch.env_steps if batch else 0, batch.dropped if batch else 0, restarts,
            episodes, int(self._save_now), int(self.hparams.has_pending),
        )  # fmt: skip
        outcome = agree(self.cluster.gather(np.array(report, np.int64)))
        counters, totals = run.counters, outcome.totals
        counters.dropped_rollouts += totals.dropped
        counters.actor_restarts += totals.restarts
        counters.episodes += totals.episodes
        if failure is not None:
            raise failure
        if outcome.failed is not None:
            raise RunError(f"process {outcome.failed} failed (see its log); all processes stopped")
        if not outcome.go:
            self.request_stop(outcome.stop_reason)
            return False
        # Saves and hyperparameter changes before this update belong to the state before it:
        # the batch's env steps count from the update that learns from it.
        self._serve_requests(run, outcome.requests)
        counters.env_steps += totals.env_steps
        return True

    def _serve_requests(self, run: Session, requests: Report) -> None:
        """Before the next update: a save process 0 asked for (a new best, or
        checkpoint_every_s due), then its new hyperparameters (a gather of their values)."""
        if requests.save_now:
            self._save_now = False
            self._save(run)
        if requests.new_hparams:
            row = self.cluster.gather(self.hparams.pending_row())[0]
            core = run.learner.core
            hparams, changes, sources = self.hparams.apply(
                core.hparams(run.state), row, run.learner.put_state
            )
            run.state = core.with_hparams(run.state, hparams)
            record, line = self.hparams.record(run.counters, changes, sources)
            if run.logger is not None:
                run.logger.write(run.counters.env_steps, record)
                run.progress.message(line)
            # Saved after the next update, so a crash cannot lose a change whose control file
            # is already renamed (a save now would be skipped: this update may be saved already).
            self._save_after_update = True

    def _log(self, run: Session, window: LogWindow, metrics: dict[str, float]) -> None:
        """One log line from every process's window (a gather), written by process 0."""
        totals = window.totals(run.stats.drain(), run.data.size)
        record = window.record(metrics, run.counters, self.cluster.gather(totals))
        record.update(run.fleet.inference_record())  # this process's servers, if any
        record.update(self._evals.log_record())
        if run.logger is not None:
            run.logger.write(run.counters.env_steps, record)
            run.progress.line(run.counters.env_steps, record)
