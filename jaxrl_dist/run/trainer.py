"""Wires a `TrainConfig` into a run: actors, learner, evaluation, checkpoints, logs.

The trainer never names an algorithm: it looks the config's `algorithm` up in the registry and
calls the returned pure functions. Only the main thread updates, evaluates and saves.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import queue
import signal
import threading
import time
from typing import Any

import jax
import numpy as np

from jaxrl_dist.agents.base import LearnerState
from jaxrl_dist.run.checkpoint import Checkpointer, tree_digest
from jaxrl_dist.config import ConfigError, TrainConfig, jsonable
from jaxrl_dist.errors import NonFiniteError, RunError
from jaxrl_dist.run.evaluation import Evaluator
from jaxrl_dist.run.hooks import Hooks
from jaxrl_dist.run.hparams import HyperparamControl
from jaxrl_dist.run.logger import LogWindow, MetricLogger, Progress
from jaxrl_dist.run.monitor import EvalMonitor
from jaxrl_dist.tools.plotting import draw_learning_curve
from jaxrl_dist.tools.policy import describe_policy
from jaxrl_dist.run.preflight import prepare
from jaxrl_dist.run.resume import ReplayLog, replay_for_actors, restore_checkpoint
from jaxrl_dist.acting.actor import ActorStats
from jaxrl_dist.learning.learner import Learner
from jaxrl_dist.acting.params_store import ParamsStore
from jaxrl_dist.acting.actor import QueueItem, actor_spawner
from jaxrl_dist.data.on_policy import collect_rollouts
from jaxrl_dist.learning.distributed import Cluster, ProcessLostError, lost_message
from jaxrl_dist.learning.learner import host_metrics
from jaxrl_dist.acting.supervisor import ActorSupervisor, RestartBudget
from jaxrl_dist.run.saving import Saver
from jaxrl_dist.run.stopping import StopControl
from jaxrl_dist.run.summary import RunResult, run_summary
from jaxrl_dist.types import concatenate_rollouts

# What each process reports after gathering its batch; every process acts on all reports.
# A stop by a signal reports SIGNALLED + the signal number, so the others know it was one.
CONTINUE, STOP, FAILED, SIGNALLED = 0, 1, 2, 100
# Process 0's requests to every process, as bits of its report: save now, new hyperparameters.
SAVE_NOW, NEW_HPARAMS = 1, 2
ACTOR_JOIN_TIMEOUT_S = 10.0  # at a stop, for all actors together


@dataclasses.dataclass
class _Run:
    """What one `Trainer.run` call holds while it runs."""

    learner: Learner
    store: ParamsStore
    rollouts: queue.Queue
    supervisor: ActorSupervisor | None  # None until the actors start
    stats: ActorStats
    monitor: EvalMonitor | None  # process 0 only
    saver: Saver
    logger: MetricLogger | None  # process 0 only
    progress: Progress
    counters: dict
    clock: Any  # () -> wall seconds of the whole run, resumed runs included
    state: LearnerState  # the newest state; the one before it was donated to the update
    replay: ReplayLog | None  # deterministic mode: env actions since the env epoch began


class Trainer:
    """One training run in `workdir` (`checkpoints/`, `metrics.jsonl`, `tb/`, `summary.json`,
    `learning_curve.png`): `Trainer(config, workdir, hooks=Hooks(...)).run() -> RunResult`.

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
                "process the same --config, overrides and --resume"
            )
        self._resume = resume
        self._quiet = quiet
        self.stop = StopControl()
        self._restarts_reported = 0
        # Checks that read this machine (devices, files) may fail on one process only: all
        # processes learn of it, so none goes on alone into a collective.
        try:
            self._prepared = prepare(config, self.workdir, resume)
            self.devices, self.algorithm = self._prepared.devices, self._prepared.algorithm
            problem = ""
        except ConfigError as e:
            problem = str(e)
        failed = np.flatnonzero(self.cluster.gather(np.array(bool(problem), np.int32)))
        if problem:
            raise ConfigError(problem)
        if failed.size:
            raise ConfigError(f"process {failed[0]} refused the run (see its error)")
        self.hparams = HyperparamControl(
            config.algo, self.algorithm.hyperparams, self.workdir, self.cluster.is_primary
        )
        self._save_now = False  # process 0: a new best to save, or checkpoint_every_s is due
        self._save_after_update = False  # every process: new hyperparameters must reach disk
        self._episodes_reported = 0

    def set_hyperparams(self, **values: float) -> None:
        """Changes run-time hyperparameters (`Algorithm.hyperparams`, e.g. learning_rate) from
        the next update on; call it from a hook (process 0). Raises HyperparamError (one line)
        for a name that cannot change or a value the algorithm's config refuses."""
        self.hparams.request(values, source="set_hyperparams")

    # ----------------------------------------------------------------------------- signals
    def request_stop(self, reason: str) -> None:
        """Asks the run to stop after the current update (any thread)."""
        self.stop.request(reason)

    # ----------------------------------------------------------------------------- state
    def _initial_state(self, learner: Learner, ckpt: Checkpointer, replay: ReplayLog | None):
        """(state, counters, the replay for the actors {global actor index: env actions})."""
        cfg = self.config
        state = learner.init_state(lambda: self.algorithm.init(jax.random.PRNGKey(cfg.seed)))
        counters = {
            "env_steps": 0, "updates": 0, "wall_time_s": 0.0, "evals": [], "dropped_rollouts": 0,
            "actor_restarts": 0, "episodes": 0, "best_eval": None, "hparam_changes": [],
        }  # fmt: skip
        if self._resume:
            columns = cfg.process_batch_size(self.cluster.count)
            columns = slice(self.cluster.index * columns, (self.cluster.index + 1) * columns)
            state, meta, full = restore_checkpoint(ckpt, state, replay, columns)
            counters.update({k: meta[k] for k in counters if k in meta})
            self.hparams.resume(state.hparams, meta["config"]["algo"])  # kept unless re-set
            target = cfg.stop_at_eval_return
            if target is not None and any(e["return"] >= target for e in counters["evals"]):
                self.request_stop(f"an earlier evaluation already reached {target}")
            return state, counters, replay_for_actors(full, cfg.envs_per_actor)
        if self._prepared.warm_params is not None:
            state = state._replace(params=learner.put_state(self._prepared.warm_params))
        return state, counters, {}

    # ----------------------------------------------------------------------------- run
    def run(self) -> RunResult:
        """Trains until a stop condition; returns the result (its summary is `summary.json`)."""
        with self.stop.signal_handlers():
            return self._run()

    def _run(self) -> RunResult:
        cfg, cluster = self.config, self.cluster
        ckpt = Checkpointer(
            os.path.join(self.workdir, "checkpoints"), cfg.keep_checkpoints,
            cfg.keep_best_checkpoints,
        )  # fmt: skip
        learner = Learner(self.algorithm, self.devices)
        replay = None
        if cfg.deterministic:
            layout = {"unroll_length": cfg.unroll_length, "envs_per_actor": cfg.envs_per_actor}
            replay = ReplayLog(cfg.env_epoch_updates, {**layout, "batch_size": cfg.batch_size})
        try:
            state, counters, actor_replay = self._initial_state(learner, ckpt, replay)
        except BaseException:
            ckpt.close()
            raise
        self._resumed_from = counters["updates"] if self._resume else None
        if cluster.is_primary:  # the first write to the work dir (besides checkpoints/)
            with open(os.path.join(self.workdir, "config.json"), "w") as f:
                json.dump(jsonable(cfg.to_dict()), f, indent=2)
        initial_digests = tree_digest(state.params), tree_digest(state.opt_state)
        differ = cluster.disagreeing(initial_digests[0])
        if differ:  # the same config and seed must give every process the same params
            raise RunError(f"process(es) {differ} start from other params than process 0")
        start, base_wall = time.monotonic(), counters["wall_time_s"]
        store = ParamsStore(self.devices.actor_devices)
        store.publish(state.params, counters["updates"])
        primary = cluster.is_primary
        logger = MetricLogger(self.workdir, wall_time_offset=base_wall) if primary else None
        progress = Progress(cfg.total_env_steps, quiet=self._quiet or not primary)
        run = _Run(
            learner=learner,
            store=store,
            rollouts=queue.Queue(maxsize=cfg.queue_size * cfg.num_actor_threads),
            supervisor=None,
            stats=ActorStats(),
            monitor=EvalMonitor(cfg, Evaluator(
                cfg.env_id, cfg.env_kwargs, cfg.eval_episodes, cfg.seed, self.algorithm,
                self.devices.actor_devices[0],
            ), self.hooks, logger, progress) if primary else None,
            saver=Saver(
                cfg, cluster, self.devices, ckpt, describe_policy(cfg, self._prepared.spec),
                wall_time_s=base_wall,
            ),
            logger=logger,
            progress=progress,
            counters=counters,
            clock=lambda: base_wall + time.monotonic() - start,
            state=state,
            replay=replay,
        )  # fmt: skip
        del state  # from here on run.state is the only live state
        stop_actors = threading.Event()
        error: RunError | None = None
        try:
            spawn = actor_spawner(
                cfg, self.algorithm, self.devices.actor_devices, run.store, run.rollouts,
                stop_actors, run.stats, start_update=counters["updates"],
                process_index=cluster.index, replay=actor_replay,
            )  # fmt: skip
            budget = RestartBudget(cfg.actor_max_restarts, cfg.actor_restart_window_s)
            run.supervisor = ActorSupervisor(spawn, cfg.num_actor_threads, budget)
            self._loop(run)
        except RunError as e:
            error = e
            self.request_stop(f"error: {e}")
        except ProcessLostError:  # no collective can succeed: no final save, leave at once
            if run.logger is not None:
                run.logger.close()
            raise
        except Exception:  # a bug or a hook's exception: no final save; release what it holds
            self._release(run)
            raise
        finally:
            stop_actors.set()
            if run.supervisor is not None:
                run.supervisor.join(timeout_s=ACTOR_JOIN_TIMEOUT_S)
        try:
            counters["wall_time_s"] = run.clock()
            if error is None and not self.stop.by_signal:
                last = counters["evals"][-1]["updates"] if counters["evals"] else None
                if last != counters["updates"]:
                    self._evaluate(run)
            if not isinstance(error, NonFiniteError):
                self._save(run)
            ckpt.wait()
            summary = self._final_summary(run, initial_digests, error)
            donated = isinstance(error, NonFiniteError)  # no valid params to hand over
            if not donated and primary and self.hooks.save_last is not None:
                last = counters["evals"][-1]["metric"] if counters["evals"] else None
                self.hooks.save_last(run.state.params, last, counters["env_steps"])
        finally:
            self._release(run)
        if primary and cfg.learning_curve:
            draw_learning_curve(self.workdir, run.progress.message)
        if error is not None:
            raise error
        return RunResult.from_summary(summary, self.workdir)

    def _release(self, run: _Run) -> None:
        """Closes the evaluator, the checkpointer (after its last save) and the logs."""
        if run.monitor is not None:
            run.monitor.close()
        run.saver.ckpt.close()
        if run.logger is not None:
            run.logger.close()

    def _final_summary(self, run: _Run, initial_digests, error) -> dict[str, Any]:
        """The summary (`summary.json`, written by process 0), params digests of every process."""
        summary = run_summary(
            run.counters, self.config.stop_at_eval_return, self.stop.reason, run.saver.ckpt
        )
        summary["initial_params_sha256"], summary["initial_opt_state_sha256"] = initial_digests
        summary["resumed_from_update"] = self._resumed_from
        if not isinstance(error, NonFiniteError):  # else run.state was donated to the update
            summary["params_sha256"] = tree_digest(run.state.params)
            summary["opt_state_sha256"] = tree_digest(run.state.opt_state)
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

    def _save(self, run: _Run) -> None:
        run.counters["wall_time_s"] = run.clock()
        run.saver.save(run.counters, run.state, run.replay)

    def _next_batch(self, run: _Run) -> tuple[list[QueueItem] | None, int]:
        """This process's actor items for the next update (None on a stop request), and how many
        were dropped as stragglers."""
        cfg, processes = self.config, self.cluster.count
        return collect_rollouts(
            run.rollouts, run.supervisor.check,
            need=cfg.process_batch_size(processes) // cfg.rollout_segments(processes),
            stop=self.stop.requested, updates=run.counters["updates"],
            max_policy_lag=cfg.max_policy_lag, in_actor_order=cfg.deterministic,
        )  # fmt: skip

    def _agree(self, run: _Run, batch_ready: bool, failure: RunError | None, dropped: int) -> bool:
        """Every process reports (continue, stop or failed; rollouts dropped; actor restarts
        since its last report); all act alike: True = update, False = stop. Raises this
        process's failure, or a RunError naming the failed process. On one process this is
        local."""
        code = FAILED if failure else CONTINUE if batch_ready else STOP
        if code == STOP and self.stop.signal:
            code = SIGNALLED + self.stop.signal
        restarts = run.supervisor.restarts - self._restarts_reported
        self._restarts_reported += restarts
        episodes = run.stats.episodes_finished - self._episodes_reported
        self._episodes_reported += episodes
        requests = (SAVE_NOW if self._save_now else 0) | (
            NEW_HPARAMS if self.hparams.has_pending else 0
        )
        rows = self.cluster.gather(
            np.array([code, dropped, restarts, episodes, requests], np.int64)
        )
        run.counters["dropped_rollouts"] += int(rows[:, 1].sum())
        run.counters["actor_restarts"] += int(rows[:, 2].sum())
        run.counters["episodes"] += int(rows[:, 3].sum())
        if failure is not None:
            raise failure
        failed = np.flatnonzero(rows[:, 0] == FAILED)
        if failed.size:
            raise RunError(f"process {failed[0]} failed (see its log); all processes stopped")
        signalled = np.flatnonzero(rows[:, 0] > SIGNALLED)
        if signalled.size:  # so every process skips the final evaluation, as after a signal
            name = signal.Signals(int(rows[signalled[0], 0]) - SIGNALLED).name
            self.request_stop(f"{name} on process {signalled[0]}")
            return False
        stopping = np.flatnonzero(rows[:, 0] == STOP)
        if stopping.size:
            self.request_stop(f"process {stopping[0]} stopped")
            return False
        self._serve_requests(run, int(rows[0, 4]))  # process 0's requests, on every process
        return True

    def _serve_requests(self, run: _Run, requests: int) -> None:
        """Before the next update: a save process 0 asked for (a new best, or
        checkpoint_every_s due), then its new hyperparameters (a gather of their values)."""
        if requests & SAVE_NOW:
            self._save_now = False
            self._save(run)
        if requests & NEW_HPARAMS:
            row = self.cluster.gather(self.hparams.pending_row())[0]
            hparams, changes, sources = self.hparams.apply(
                run.state.hparams, row, run.learner.put_state
            )
            run.state = run.state._replace(hparams=hparams)
            self._log_hparams(run, changes, sources)
            # Saved after the next update, so a crash cannot lose a change whose control file
            # is already renamed (a save now would be skipped: this update may be saved already).
            self._save_after_update = True

    def _log_hparams(self, run: _Run, changes: dict, sources: str) -> None:
        record, line = self.hparams.record(run.counters, changes, sources)
        if run.logger is not None:
            run.logger.write(run.counters["env_steps"], record)
            run.progress.message(line)

    def _loop(self, run: _Run) -> None:
        cfg, counters = self.config, run.counters
        window = LogWindow(counters["env_steps"])
        while True:
            if counters["env_steps"] >= cfg.total_env_steps:  # the same on every process
                self.request_stop("total_env_steps reached")
                return
            if cfg.max_wall_time_s and run.clock() >= cfg.max_wall_time_s:
                self.request_stop("max_wall_time_s reached")
            if self.cluster.is_primary:
                self.hparams.poll()
                self._save_now = self._save_now or run.saver.time_due(run.clock())
            t0 = time.perf_counter()
            failure, items, dropped = None, None, 0
            try:
                items, dropped = self._next_batch(run)
            except RunError as e:
                failure = e
            if not self._agree(run, items is not None, failure, dropped):
                return
            t1 = time.perf_counter()
            batch = concatenate_rollouts([item.rollout for item in items])
            if run.replay is not None:  # items in actor order: columns in global actor order
                env_actions = np.concatenate([item.env_actions for item in items], axis=1)
                run.replay.record(counters["updates"], env_actions)
            window.lags.append(counters["updates"] - float(np.mean(batch.policy_version)))
            t2 = time.perf_counter()
            device_batch = run.learner.put_batch(batch)
            t3 = time.perf_counter()
            try:
                new_state, metrics = run.learner.update(run.state, device_batch)
                metrics = host_metrics(metrics)
            except jax.errors.JaxRuntimeError as e:
                if self.cluster.count == 1:
                    raise
                raise ProcessLostError(lost_message(e)) from None
            t4 = time.perf_counter()
            bad = MetricLogger.nonfinite(metrics)
            if bad:  # keep the last good checkpoint; run.state was donated, nothing to save
                raise NonFiniteError(
                    f"non-finite {', '.join(bad)} at update {counters['updates'] + 1}; "
                    "the last checkpoint is kept"
                )
            run.state = new_state
            run.store.publish(new_state.params, counters["updates"] + 1)
            window.add_timers(
                queue_get_s=t1 - t0, batch_s=t2 - t1, transfer_s=t3 - t2, update_s=t4 - t3,
                publish_s=time.perf_counter() - t4,
            )  # fmt: skip
            counters["updates"] += 1
            counters["env_steps"] += cfg.steps_per_update
            updates = counters["updates"]
            if self.cluster.is_primary and self.hooks.on_iteration is not None:
                self.hooks.on_iteration(counters["episodes"], counters["env_steps"])
            if cfg.eval_every_updates and updates % cfg.eval_every_updates == 0:
                self._evaluate(run)
            if updates % cfg.log_every_updates == 0:
                self._log(run, window, metrics)
            # At the last update (the same on every process) the final save follows the final
            # evaluation, after the actors stopped: a save now would leave that one without its
            # metric (a save at an update that has one is not made twice).
            last = counters["env_steps"] >= cfg.total_env_steps
            if not last and (run.saver.due(counters) or self._save_after_update):
                self._save_after_update = False
                self._save_now = False  # a new best of this update is in this save
                self._save(run)

    def _log(self, run: _Run, window: LogWindow, metrics: dict[str, float]) -> None:
        """One log line from every process's window (a gather), written by process 0."""
        totals = window.totals(run.stats.drain(), run.rollouts.qsize())
        record = window.record(metrics, run.counters, self.cluster.gather(totals))
        if run.logger is not None:
            run.logger.write(run.counters["env_steps"], record)
            run.progress.line(run.counters["env_steps"], record)

    def _evaluate(self, run: _Run) -> None:
        """Process 0 evaluates (and calls the evaluation hooks); a stop it requests reaches
        the others through `_agree`, and so does the save of a new best."""
        if run.monitor is None:
            return
        signalled = lambda: self.stop.signals > 0  # noqa: E731
        outcome = run.monitor.evaluate(run.state.params, run.counters, run.clock(), signalled)
        if outcome is None:  # a signal: stop promptly, without this evaluation
            return
        report, stop_reason = outcome
        if report.best and self.config.keep_best_checkpoints:
            self._save_now = True
        if stop_reason:
            self.request_stop(stop_reason)
