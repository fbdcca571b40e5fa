"""The run shell: one training run in a work dir, on the engine `config.runtime` names.

    Trainer(config, workdir, hooks=...).run()

The loop reads top to bottom: the stop checks, the engine's next step agreed by every process
(all step, or all stop), then around it the hooks, evaluation, the log line and saves. The
shell never names an engine, an agent nor a data flow (`engine.py` says what an engine does).
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from jaxrl_dist.compilation import CompileTotals, use_compilation_cache
from jaxrl_dist.config import ConfigError, TrainConfig, jsonable
from jaxrl_dist.config.engines import get_engine
from jaxrl_dist.determinism import set_deterministic_xla_flags
from jaxrl_dist.errors import NonFiniteError, RunError
from jaxrl_dist.learning.distributed import Cluster, ProcessLostError
from jaxrl_dist.run.agreement import CONTINUE, FAILED, SIGNALLED, STOP, Report, agree
from jaxrl_dist.run.control import run_control
from jaxrl_dist.run.curves import draw_agent_curves, draw_learning_curve, draw_seed_curves
from jaxrl_dist.run.engine import Engine, Ready
from jaxrl_dist.run.hooks import Hooks
from jaxrl_dist.run.preflight import prepare, with_env_factory
from jaxrl_dist.run.resume import check_resumable
from jaxrl_dist.run.run_evaluation import RunEvaluation
from jaxrl_dist.run.session import Session, open_session
from jaxrl_dist.run.stopping import StopControl
from jaxrl_dist.run.summary import RunResult, done_line, run_summary
from jaxrl_dist.threads import switch_interval


class Trainer:
    """One training run in `workdir` (`checkpoints/`, `metrics.jsonl`, `evals.jsonl`, `tb/`,
    `summary.json`, `learning_curve.png`): `Trainer(config, workdir, hooks=...).run()`.

    In a multi-process run every process builds a Trainer on the same (shared) `workdir`: each
    runs its part of the engine; process 0 evaluates, calls the hooks and writes the logs and
    the summary; every process takes part in each checkpoint save (Orbax's multi-process
    rules). `engine` is the `Engine` the run steps (`config.runtime`'s).
    """

    def __init__(
        self,
        config: TrainConfig,
        workdir: str,
        resume: bool = False,
        quiet: bool = False,
        hooks: Hooks | None = None,
        env_factory: Callable[..., Any] | None = None,
    ):
        """`env_factory(**config.env_kwargs)` makes one gymnasium env, for envs not importable
        by name: it becomes the env `factory:NAME` (NAME from a `factory:` env id, else the
        function's name), stepped in worker processes like `gymnasium:` ids."""
        if env_factory is not None:
            config = with_env_factory(config, env_factory)
        if config.deterministic:  # in effect only if JAX has not started yet (else a warning)
            set_deterministic_xla_flags()
        # Before anything compiles (the cluster's first gather does): the start-up's cost.
        self._cache_dir = use_compilation_cache()
        CompileTotals.listen()
        self._built, self._compiles = time.monotonic(), CompileTotals.snapshot()
        self._startup_s: float | None = None  # from here to the first step's end
        self.config, self.hooks = config, hooks or Hooks()
        self.workdir = os.path.abspath(workdir)
        self.cluster = Cluster()
        self._resume, self._quiet = resume, quiet
        self.stop = StopControl()
        launch = json.dumps(
            {"config": jsonable(config.to_dict()), "resume": resume}, sort_keys=True
        )
        differ = self.cluster.disagreeing(hashlib.sha256(launch.encode()).hexdigest())
        if differ:
            raise ConfigError(
                f"process(es) {differ} have a different config from process 0; give every "
                "process the same config, overrides and resume flag"
            )
        self.engine = self._build_engine()
        self.hparams = run_control(config, self.engine, self.workdir, self.cluster.is_primary)
        self._evals = RunEvaluation(config, self.stop, self.engine)
        self._save_now = False  # process 0: checkpoint_every_s is due
        self._save_after_step = False  # every process: new hyperparameters must reach disk

    def _build_engine(self) -> Engine:
        """The engine, whose checks read this machine (devices, files) and may fail on one
        process only: all processes learn of it, so none goes on alone into a collective."""
        engine, problem, self._resume_plan = None, "", None
        try:
            engine_cls = get_engine(self.config.runtime)
            prepared = prepare(self.config, self.workdir, self._resume, engine_cls)
            self._warm_notes = list(prepared.notes)  # warm starts from an older intact step
            engine = engine_cls(self.config, prepared, self.cluster, self.stop.requested)
            if self._resume:  # a damaged checkpoint or other shapes: refused before writes
                ckpt_dir = os.path.join(self.workdir, "checkpoints")
                self._resume_plan = check_resumable(ckpt_dir, engine.saved_abstract())
        except ConfigError as e:
            problem = str(e)
        failed = np.flatnonzero(self.cluster.gather(np.array(bool(problem), np.int32)))
        if problem:
            raise ConfigError(problem)
        if failed.size:
            raise ConfigError(f"process {failed[0]} refused the run (see its error)")
        return engine

    def set_hyperparams(self, **values: float) -> None:
        """Changes run-time hyperparameters (`Agent.hyperparams`, e.g. learning_rate) from the
        next step on; call it from a hook (process 0). Raises HyperparamError (one line) for
        a name that cannot change or a value the agent's config refuses."""
        self.hparams.request(values, source="set_hyperparams")

    def control(self, request: dict[str, Any]) -> None:
        """What `control.json` takes, from Python (a hook, process 0): hyperparameters, a
        `load_params` from a checkpoint, replay settings (`run/control.py`), applied before
        the next step. Raises HyperparamError (one line, nothing queued)."""
        self.hparams.request(request, source="control")

    def request_stop(self, reason: str) -> None:
        """Asks the run to stop after the current step (any thread)."""
        self.stop.request(reason)

    # ----------------------------------------------------------------------------- run
    def run(self) -> RunResult:
        """Trains until a stop condition; returns the result (its summary is `summary.json`)."""
        with self.stop.signal_handlers(), switch_interval(self.config.switch_interval_s):
            return self._run()

    def _run(self) -> RunResult:
        cfg, engine = self.config, self.engine
        run, meta = open_session(
            cfg,
            engine,
            workdir=self.workdir,
            resume=self._resume,
            quiet=self._quiet,
            hooks=self.hooks,
            cluster=self.cluster,
            resume_plan=self._resume_plan,
        )
        if meta is not None:
            self.hparams.resume(engine.hparams(), self.hparams.saved_algo(meta["config"]))
            target, top = cfg.stop_at_eval_return, run.counters.max_eval_return
            if target is not None and top is not None and top >= target:
                self.request_stop(f"an earlier evaluation already reached {target}")
        error: RunError | None = None
        self._evals.start(run)
        try:
            engine.start(run.counters)
            self._loop(run)
        except RunError as e:
            error = e
            self.request_stop(f"error: {e}")
        except (Exception, KeyboardInterrupt) as e:  # a bug, a hook's exception, a lost
            # process, a second Ctrl-C: no final save; after the last two (no collective can
            # succeed) leave at once
            self._evals.stop_thread(run)
            run.release(failed=True, at_once=isinstance(e, (ProcessLostError, KeyboardInterrupt)))
            raise
        finally:
            engine.stop()
        try:
            summary = self._finish(run, error)
        except BaseException as e:
            run.release(failed=True)
            if error is not None and isinstance(e, OSError):  # the disk that failed a save
                raise error from None
            raise
        run.release()
        if self.cluster.is_primary and cfg.learning_curve:
            draw_learning_curve(self.workdir, run.progress.message)
            if cfg.anakin.num_seeds > 1:
                draw_seed_curves(self.workdir, cfg.anakin.num_seeds, run.progress.message)
            names = list(self.engine.agents)
            if self.engine.layout.alone(names) is None:  # several agents: one curve each
                draw_agent_curves(self.workdir, names, run.progress.message)
        if run.logger is not None:
            run.logger.finish_sink(summary, failed=error is not None)
        if error is not None:
            raise error
        return RunResult.from_summary(summary, self.workdir)

    # ----------------------------------------------------------------------------- the loop
    def _loop(self, run: Session) -> None:
        cfg, counters, engine = self.config, run.counters, self.engine
        steps_before = counters.env_steps  # at the last step: env-step saves count from there
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
                self._save_now = self._save_now or run.saver.time_due(run.clock())
            # ---- the engine's next step, agreed by every process: all step, or all stop
            ready = engine.prepare(self._budget(counters), counters.updates)
            agreed = self._agree(run, ready)
            if agreed is None:
                return
            updates, lanes = agreed
            if not lanes:  # several learners, none ready on every process: poll again
                continue
            stepped = engine.advance(updates, counters.updates, lanes)
            if self._startup_s is None:
                self._started(run)
            counters.updates += updates
            counters.env_steps += stepped.env_steps
            counters.episodes += stepped.episodes
            # ---- around the step: hooks, evaluation, logs, saves
            if self.cluster.is_primary and self.hooks.on_iteration is not None:
                self.hooks.on_iteration(counters.episodes, counters.env_steps)
            self._evals.after_step(run)
            if counters.updates % cfg.log_every_updates == 0:
                self._log(run, stepped.metrics)
            # At the last step (the same on every process) the final save follows the final
            # evaluation, after acting stopped: a save now would leave that one without its
            # metric (a save at an update that has one is not made twice).
            last = cfg.ends_at(counters.env_steps, counters.episodes)
            if not last and (run.saver.due(counters, steps_before) or self._save_after_step):
                self._save_after_step = self._save_now = False
                self._save(run)
            steps_before = counters.env_steps

    def _budget(self, counters: Any) -> int:
        """Updates until the next log, evaluation, save or the end of the run: a step of
        several updates (Anakin's chunk) ends at the first of them."""
        cfg, u = self.config, counters.updates
        marks = [cfg.log_every_updates - u % cfg.log_every_updates]
        for every in (cfg.eval_every_updates, cfg.checkpoint_every_updates):
            if every:
                marks.append(every - u % every)
        per_update = self.engine.steps_per_update
        if per_update:  # env-step marks, where every update adds the same env steps
            marks.append(-(-(cfg.total_env_steps - counters.env_steps) // per_update))
            every = cfg.checkpoint_every_env_steps
            if every:
                marks.append(-(-(every - counters.env_steps % every) // per_update))
        return max(1, min(marks))

    def _agree(self, run: Session, ready: Ready) -> tuple[int, int] | None:
        """Every process reports its status and counts (`agreement.Report`); all act alike:
        the step's updates (process 0's) and the learners ready on every process (a bitmask),
        or None to stop. Raises this process's failure, or a RunError naming the failed
        process."""
        status = CONTINUE
        if ready.failure is not None:
            status = FAILED
        elif ready.stopped:
            status = SIGNALLED + self.stop.signal if self.stop.signal else STOP
        report = Report(
            status=status,
            updates=ready.updates,
            env_steps=ready.env_steps,
            dropped=ready.dropped,
            restarts=ready.restarts,
            episodes=ready.episodes,
            save_now=int(self._save_now),
            new_hparams=int(self.hparams.has_pending),
            ready=ready.ready,
        )
        outcome = agree(self.cluster.gather(np.array(report, np.int64)))
        counters, totals = run.counters, outcome.totals
        counters.dropped_rollouts += totals.dropped
        counters.actor_restarts += totals.restarts
        counters.episodes += totals.episodes
        if ready.failure is not None:
            raise ready.failure
        if outcome.failed is not None:
            raise RunError(f"process {outcome.failed} failed (see its log); all processes stopped")
        if not outcome.go:
            self.request_stop(outcome.stop_reason)
            return None
        # Saves and hyperparameter changes before this step belong to the state before it:
        # the data's env steps count from the step that learns from them.
        self._serve_requests(run, outcome.requests)
        counters.env_steps += totals.env_steps
        return outcome.requests.updates, totals.ready

    def _serve_requests(self, run: Session, requests: Report) -> None:
        """Before the next step: a save process 0 asked for (a new best, or
        checkpoint_every_s due), then its new hyperparameters (a gather of their values)."""
        if requests.save_now:
            self._save_now = False
            self._save(run)
        if requests.new_hparams:
            row = self.cluster.gather(self.hparams.pending_row())[0]
            hparams, changes, sources = self.hparams.apply(self.engine.hparams(), row)
            self.engine.set_hparams(hparams)
            control = self.hparams.requests
            done, lines = control.apply(self.cluster.gather(control.blob())[0], self.cluster.gather)
            record, line = self.hparams.record(run.counters, changes, sources, done)
            if run.logger is not None:
                run.logger.write(run.counters.env_steps, record)
                for text in [line, *lines] if changes else lines:
                    run.progress.message(f"update {run.counters.updates}: {text} ({sources})")
            # Saved after the next step, so a crash cannot lose a change whose control file
            # is already renamed (a save now would be skipped: this update may be saved already).
            self._save_after_step = True

    def _started(self, run: Session) -> None:
        """The first step is done: how long the start took, and how much of it compiling."""
        self._startup_s = time.monotonic() - self._built
        c = CompileTotals.since(self._compiles)
        run.progress.message(
            f"first step after {self._startup_s:.1f}s: {c['compiles']:.0f} programs built "
            f"in {c['backend_s']:.1f}s ({c['cache_hits']:.0f} read from the cache "
            f"{self._cache_dir or '(off)'}), {c['trace_s'] + c['lower_s']:.1f}s tracing and "
            "lowering"
        )

    def _log(self, run: Session, metrics: dict[str, float]) -> None:
        """One log line from every process (the engine's record may gather), by process 0."""
        record = self.engine.log_record(metrics, run.counters)
        record.update(self._evals.log_record())
        # This process's compiling since the run began: a late compile shows as a step here.
        record.update({f"compile/{k}": v for k, v in CompileTotals.since(self._compiles).items()})
        if run.logger is not None:
            run.logger.write(run.counters.env_steps, record)
            run.progress.line(run.counters.env_steps, record)

    def _save(self, run: Session, params_update: int | None = None) -> None:
        """Every process saves the engine's state; `params_update`: its params are those of
        that earlier update (taken back at a stop, `_take_back`)."""
        run.counters.wall_time_s = run.clock()
        saved = lambda: self.engine.saved(run.counters.updates)  # noqa: E731
        run.saver.save(run.counters, saved, params_update)
        if run.best is not None:  # the bests of evaluations recorded by this save's update
            run.best.flush()

    # ----------------------------------------------------------------------------- the end
    def _finish(self, run: Session, error: RunError | None) -> dict:
        """The final evaluation, save, summary and `save_last` hook."""
        counters = run.counters
        counters.wall_time_s = run.clock()
        self._evals.finish(
            run, land=error is None, evaluate=error is None and not self.stop.by_signal
        )
        params_update = None if error else self._evals.take_back(run, self.cluster, self.engine)
        non_finite = isinstance(error, NonFiniteError)  # the last checkpoint is kept
        if not non_finite:
            self._save(run, params_update)
        if run.best is not None:
            run.best.flush()
        run.saver.wait()  # a failed last save: one line, on every process
        donated = non_finite and self.engine.donates_on_failure  # no state to digest or hand
        summary = self._final_summary(run, donated, params_update)
        if not donated and self.cluster.is_primary and self.hooks.save_last is not None:
            last = counters.last_eval["metric"] if counters.last_eval else None
            self.hooks.save_last(self.engine.policy_params(), last, counters.env_steps)
        return summary

    def _final_summary(self, run: Session, donated: bool, params_update: int | None) -> dict:
        """The summary (`summary.json`, written by process 0), digests of every process."""
        counters, evals = run.counters, run.history.entries
        summary = run_summary(
            counters,
            evals,
            self.config.stop_at_eval_return,
            self.stop.reason,
            run.saver.ckpt,
            run.best,
            params_update,
        )
        summary["runtime"] = self.engine.name
        summary["initial_params_sha256"], summary["initial_state_sha256"] = run.initial_digests
        summary["resumed_from_update"] = run.resumed_from
        summary["checkpoint_fallback"] = run.checkpoint_fallback
        summary["warm_start_fallback"] = self._warm_notes or None
        if not donated:  # else the state was donated to the update that failed
            summary["params_sha256"], summary["state_sha256"] = self.engine.digests()
            # Each process digests its own copy: equal digests mean bit-identical params.
            summary["params_sha256_by_process"] = self.cluster.gather_digests(
                summary["params_sha256"]
            )
        summary.update(self.engine.summary(counters, evals))
        summary["startup_s"] = None if self._startup_s is None else round(self._startup_s, 3)
        summary["compile"] = {
            **CompileTotals.since(self._compiles),
            "cache_dir": self._cache_dir,
        }
        if self.cluster.is_primary:
            with open(os.path.join(self.workdir, "summary.json"), "w") as f:
                json.dump(summary, f, indent=2)
        run.progress.message(done_line(summary, self.config.anakin.num_seeds))
        return summary
