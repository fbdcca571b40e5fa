"""The Anakin runtime's shell: chunks of jitted updates, and around them what every run has.

The config, agents, checkpoints, evaluation monitor (metric, best, hooks, stop target), run-time
hyperparameters, logs, summary and learning curve are the Sebulba trainer's; what differs is
where data comes from: `Anakin.train(carry, n)` runs `n` rollouts and updates of every seed in one
call. A chunk ends at the next log, evaluation, save or the end of the run, and is kept under
about `CHUNK_S` seconds so signals, wall-time limits and the control file are seen promptly.

A checkpoint holds the whole carry (learner states, env states, actor states, running episodes)
plus the first seed's actor params under `params` (what `scripts/evaluate.py`, `load_policy` and
warm starts read), so a resumed run continues bit-identically.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import NamedSharding, PartitionSpec

from jaxrl_dist.anakin.envs import anakin_env_problem, anakin_spec, make_anakin_env
from jaxrl_dist.anakin.evaluation import JaxEvaluator
from jaxrl_dist.anakin.flows import flow_problem, make_flow
from jaxrl_dist.anakin.program import Anakin, Carry, Program
from jaxrl_dist.anakin.records import LogWindow, carry_digest, per_seed
from jaxrl_dist.config import ConfigError, TrainConfig, jsonable
from jaxrl_dist.envs import EnvSpec
from jaxrl_dist.envs.jax_league import league_records
from jaxrl_dist.envs.seats import POOL_ROLE
from jaxrl_dist.errors import NonFiniteError, RunError
from jaxrl_dist.learning.distributed import Cluster
from jaxrl_dist.learning.mesh import Devices, local_replica
from jaxrl_dist.run.checkpoint import Checkpointer, tree_digest
from jaxrl_dist.run.counters import Counters, EvalHistory
from jaxrl_dist.run.curves import draw_learning_curve, draw_seed_curves
from jaxrl_dist.run.hooks import Hooks
from jaxrl_dist.run.hparams import HyperparamControl
from jaxrl_dist.run.logger import MetricLogger, Progress
from jaxrl_dist.run.monitor import EvalMonitor
from jaxrl_dist.run.policy import describe_policy
from jaxrl_dist.run.preflight import learner_devices, multi_agent_problem, prepare
from jaxrl_dist.run.resume import check_resumable
from jaxrl_dist.run.saving import Saver
from jaxrl_dist.run.stopping import StopControl
from jaxrl_dist.run.summary import RunResult, run_summary
from jaxrl_dist.run.wandb_sink import make_sink

CHUNK_S = 1.0  # the longest a chunk of updates runs between two looks at the host's events


def anakin_machine(config: TrainConfig) -> tuple[EnvSpec, Devices]:
    """The Anakin runtime's env and device checks (`preflight.prepare`'s `machine`)."""
    problem = anakin_env_problem(config)
    spec = None if problem else anakin_spec(config)
    problem = problem or multi_agent_problem(config, spec)
    if problem:
        raise ConfigError(problem)
    devices = learner_devices(config)  # `batch_size` is the envs per seed here
    return spec, devices


class AnakinTrainer:
    """One Anakin run in `workdir` (the same files as a Sebulba run):
    `AnakinTrainer(config, workdir, hooks=...).run()`. Multi-process: every process runs the
    same program over the global mesh (each holds its devices' envs); process 0 evaluates,
    logs and calls the hooks, and its stop decisions reach the others by a gather per chunk."""

    def __init__(
        self,
        config: TrainConfig,
        workdir: str,
        resume: bool = False,
        quiet: bool = False,
        hooks: Hooks | None = None,
    ):
        self.config, self.hooks = config, hooks or Hooks()
        self.workdir = os.path.abspath(workdir)
        self.cluster = Cluster()
        self._resume, self._quiet = resume, quiet
        self.stop = StopControl()
        self._prepared = prepare(config, self.workdir, resume, anakin_machine, check_resume=False)
        problem = flow_problem(self._prepared.data, config)
        if problem:
            raise ConfigError(problem)
        self.agent = self._prepared.agent
        self.env = make_anakin_env(config, self.agent.actor)
        flow = make_flow(self._prepared.data, config)
        program = Program(self.agent, self.env, config.batch_size, config.unroll_length, flow)
        self.anakin = Anakin(program, config.num_seeds, self._prepared.devices.learner_mesh)
        self.hparams = HyperparamControl.for_run(
            config, self.agent.hyperparams, self.workdir, self.cluster.is_primary
        )
        if resume:
            check_resumable(os.path.join(self.workdir, "checkpoints"), self._saved_abstract())

    def set_hyperparams(self, **values: float) -> None:
        """Changes run-time hyperparameters of every seed from the next chunk on."""
        self.hparams.request(values, source="set_hyperparams")

    def request_stop(self, reason: str) -> None:
        self.stop.request(reason)

    # ------------------------------------------------------------------ state and saves
    def _saved(self, carry: Carry) -> dict[str, Any]:
        first = jax.tree.map(lambda x: x[0], self.agent.learner.actor_params(carry.learner))
        return {"params": first, "carry": carry}

    def _saved_abstract(self) -> dict[str, Any]:
        """The saved tree as a restore target: shapes, dtypes and the run's shardings."""
        replicated = NamedSharding(self._prepared.devices.learner_mesh, PartitionSpec())
        params = jax.eval_shape(self._saved, self.anakin.abstract)["params"]
        params = jax.tree.map(
            lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=replicated), params
        )
        return {"params": params, "carry": self.anakin.abstract}

    def _start(self, ckpt: Checkpointer, history: EvalHistory) -> tuple[Carry, Counters, Any]:
        cfg = self.config
        if self._resume:
            saved, meta = ckpt.restore(self._saved_abstract())
            self._check_same_seats(meta)
            counters = Counters.from_meta(meta)
            history.resume(counters.updates, meta.get("evals"))
            return saved["carry"], counters, meta
        seeds = jnp.arange(cfg.seed, cfg.seed + cfg.num_seeds, dtype=jnp.uint32)
        carry = self.anakin.init(seeds)
        warm = self._prepared.warm_params
        if warm is not None:
            with_params = jax.vmap(self.agent.learner.with_params, in_axes=(0, None))
            carry = self.anakin.with_learner(
                carry, lambda learner: with_params(learner, warm), restart_shared=True
            )
        return carry, Counters(), None

    def _check_same_seats(self, meta: dict[str, Any]) -> None:
        """A board game's env states hold each stream's roles: a resume with other seats
        would play the saved ones (or misread them), so it is refused."""
        saved = meta.get("config", {}).get("seats")
        mine = json.loads(json.dumps(jsonable(self.config.to_dict())))["seats"]
        if self.config.seats.enabled and saved is not None and saved != mine:
            raise ConfigError(
                "config.seats differs from the resumed run's (its games hold their roles); "
                "resume with the run's own seats, or start a new --workdir"
            )

    def _save(self, run: _Run) -> None:
        run.counters.wall_time_s = run.clock()
        run.saver.save(run.counters, self._saved(run.carry), None)

    # ------------------------------------------------------------------ run
    def run(self) -> RunResult:
        with self.stop.signal_handlers():
            return self._run()

    def _run(self) -> RunResult:
        cfg, primary = self.config, self.cluster.is_primary
        ckpt = Checkpointer(
            os.path.join(self.workdir, "checkpoints"), cfg.keep_checkpoints,
            cfg.keep_best_checkpoints,
        )  # fmt: skip
        history = EvalHistory(self.workdir, primary)
        try:
            carry, counters, meta = self._start(ckpt, history)
        except BaseException:
            ckpt.close()
            raise
        if primary:
            with open(os.path.join(self.workdir, "config.json"), "w") as f:
                json.dump(jsonable(cfg.to_dict()), f, indent=2)
        logger = None
        if primary:
            sink = make_sink(cfg, self.workdir, self._resume)
            logger = MetricLogger(self.workdir, wall_time_offset=counters.wall_time_s, sink=sink)
        progress = Progress(cfg.total_env_steps, quiet=self._quiet or not primary)
        evaluator = JaxEvaluator(
            self.env.evaluation(cfg.eval_episodes, cfg.seats.eval_opponent), self.agent.actor,
            cfg.eval_episodes, cfg.seed,
        )  # fmt: skip
        monitor = EvalMonitor(cfg, evaluator, self.hooks, logger, progress, history)
        start, base = time.monotonic(), counters.wall_time_s
        policy = describe_policy(cfg, self._prepared.spec)
        saver = Saver(cfg, self.cluster, self._prepared.devices, ckpt, policy, base)
        run = _Run(carry, counters, saver, logger, progress, evaluator, monitor,
                   lambda: base + time.monotonic() - start)  # fmt: skip
        run.initial = tree_digest(self._saved(carry)["params"])
        if meta is not None:
            hparams = jax.tree.map(lambda x: x[0], self.agent.learner.hparams(carry.learner))
            self.hparams.resume(hparams, meta["config"]["algo"])
            target, top = cfg.stop_at_eval_return, counters.max_eval_return
            if target is not None and top is not None and top >= target:
                self.request_stop(f"an earlier evaluation already reached {target}")
        error = None
        try:
            self._loop(run)
        except RunError as e:
            error = e
            self.request_stop(f"error: {e}")
        except BaseException:
            ckpt.close()
            if logger is not None:
                logger.close(failed=True)
            raise
        try:
            summary = self._finish(run, error)
        except BaseException:
            if logger is not None:
                logger.close(failed=True)
            raise
        finally:
            ckpt.close()
        if logger is not None:
            logger.close()
        if primary and cfg.learning_curve:
            draw_learning_curve(self.workdir, progress.message)
            if cfg.num_seeds > 1:
                draw_seed_curves(self.workdir, cfg.num_seeds, progress.message)
        if logger is not None:
            logger.finish_sink(summary, failed=error is not None)
        if error is not None:
            raise error
        return RunResult.from_summary(summary, self.workdir)

    def _loop(self, run: _Run) -> None:
        cfg, counters = self.config, run.counters
        steps_per_update = cfg.batch_size * cfg.unroll_length  # per seed
        seconds_per_update, window = None, LogWindow(counters.env_steps)
        while not self.stop.requested.is_set():
            reached = cfg.ends_at(counters.env_steps, counters.episodes)  # at a chunk's end
            if reached:
                self.request_stop(reached)
                break
            if cfg.max_wall_time_s and run.clock() >= cfg.max_wall_time_s:
                self.request_stop("max_wall_time_s reached")
                break
            if self.cluster.is_primary:
                self.hparams.poll()
            # Process 0's chunk length and pending hyperparameters, for all: chunk lengths
            # follow each process's own clock, and every process must run the same chunks.
            n = self._chunk(counters, steps_per_update, seconds_per_update)
            n, pending = (
                int(v) for v in self.cluster.gather(np.array([n, self.hparams.has_pending]))[0]
            )
            if pending:
                self._apply_hparams(run)
            t0 = time.perf_counter()
            run.carry = self.anakin.train(run.carry, jnp.int32(n))
            totals = jax.device_get(local_replica(run.carry.totals))
            run.carry = self.anakin.drain(run.carry)
            elapsed = time.perf_counter() - t0
            if counters.updates > 0 or self._resume:  # the first chunk includes the compile
                seconds_per_update = elapsed / n
            metrics = {k: float(np.mean(v)) for k, v in totals.metrics.items()}
            bad = MetricLogger.nonfinite(metrics)
            if bad:
                raise NonFiniteError(
                    f"non-finite {', '.join(bad)} by update {counters.updates + n}; the last "
                    "checkpoint is kept"
                )
            before = counters.env_steps
            counters.updates += n
            counters.env_steps += n * steps_per_update
            counters.episodes += int(totals.episodes.sum())
            window.add(totals)
            if self.cluster.is_primary and self.hooks.on_iteration is not None:
                self.hooks.on_iteration(counters.episodes, counters.env_steps)
            if cfg.eval_every_updates and counters.updates % cfg.eval_every_updates == 0:
                self._evaluate(run)
            if counters.updates % cfg.log_every_updates == 0:
                self._log(run, window, metrics)
            if self.cluster.is_primary:
                run.save_now = run.save_now or run.saver.time_due(run.clock())
            self._agree(run)
            last = cfg.ends_at(counters.env_steps, counters.episodes)
            if not last and (run.saver.due(counters, before) or run.save_now):
                run.save_now = False
                self._save(run)

    def _chunk(self, counters: Counters, steps_per_update: int, seconds: float | None) -> int:
        """Updates until the next log, evaluation, update-counted save or the end of the run,
        and at most about CHUNK_S seconds of them (1 until the speed is known)."""
        cfg, u = self.config, counters.updates
        left = -(-(cfg.total_env_steps - counters.env_steps) // steps_per_update)
        marks = [left, cfg.log_every_updates - u % cfg.log_every_updates]
        for every in (cfg.eval_every_updates, cfg.checkpoint_every_updates):
            if every:
                marks.append(every - u % every)
        if cfg.checkpoint_every_env_steps:
            every = cfg.checkpoint_every_env_steps
            marks.append(-(-(every - counters.env_steps % every) // steps_per_update))
        n = max(1, min(marks))
        if seconds is None:
            return 1
        return max(1, min(n, int(CHUNK_S / max(seconds, 1e-9))))

    def _apply_hparams(self, run: _Run) -> None:
        """Process 0's pending hyperparameters, applied to every seed on every process."""
        row = self.cluster.gather(self.hparams.pending_row())[0]
        core = self.agent.learner
        current = jax.tree.map(lambda x: x[0], core.hparams(run.carry.learner))
        new, changes, sources = self.hparams.apply(current, row, lambda tree: tree)
        seeds = self.config.num_seeds
        new = {k: jnp.broadcast_to(jnp.asarray(v), (seeds,)) for k, v in new.items()}
        run.carry = self.anakin.with_learner(run.carry, lambda s: core.with_hparams(s, new))
        record, line = self.hparams.record(run.counters, changes, sources)
        if run.logger is not None:
            run.logger.write(run.counters.env_steps, record)
            run.progress.message(line)
        run.save_now = True

    def _agree(self, run: _Run) -> None:
        """Process 0's stop request and save request reach every process."""
        flags = np.array([self.stop.requested.is_set(), run.save_now], np.int32)
        stop, save = self.cluster.gather(flags)[0]
        run.save_now = bool(save)
        if stop and not self.stop.requested.is_set():
            self.request_stop("process 0 stopped the run")

    def _evaluate(self, run: _Run) -> None:
        if not self.cluster.is_primary:
            return
        run.evaluator.at_update = run.counters.updates
        params = self.agent.learner.actor_params(run.carry.learner)
        outcome = run.monitor.evaluate(
            params, run.counters, run.clock(), lambda: self.stop.signals > 0
        )
        if outcome is None:
            return
        report, stop_reason = outcome
        if report.best and self.config.keep_best_checkpoints:
            run.save_now = True
        if stop_reason:
            self.request_stop(stop_reason)

    def _learner_updates(self, carry: Carry) -> int | None:
        """A replay learner's own update count (the first seed's), None for on-policy agents
        (one update per rollout: `counters.updates`)."""
        steps = getattr(carry.learner, "update_step", None)
        if self._prepared.data == "on_policy" or steps is None:
            return None
        return int(np.asarray(jax.device_get(local_replica(steps)))[0])

    def _log(self, run: _Run, window: LogWindow, metrics: dict[str, float]) -> None:
        learner_updates = self._learner_updates(run.carry)
        if learner_updates == 0:  # a replay still filling: no update has made metrics yet
            metrics = {}
        record = window.record(metrics, run.counters)
        if learner_updates is not None:
            record["charts/learner_updates"] = learner_updates
        if run.logger is not None:
            run.logger.write(run.counters.env_steps, record)
            run.progress.line(run.counters.env_steps, record)

    def _finish(self, run: _Run, error: RunError | None) -> dict:
        counters = run.counters
        counters.wall_time_s = run.clock()
        if error is None and not self.stop.by_signal:
            last = counters.last_eval
            if last is None or last["updates"] != counters.updates:
                self._evaluate(run)
        if not isinstance(error, NonFiniteError):
            self._save(run)
        run.ckpt.wait()
        summary = run_summary(
            counters, run.monitor.history.entries, self.config.stop_at_eval_return,
            self.stop.reason, run.ckpt,
        )  # fmt: skip
        saved = self._saved(run.carry)
        summary.update(
            runtime="anakin", num_seeds=self.config.num_seeds,
            env_steps_all_seeds=counters.env_steps * self.config.num_seeds,
            sps_all_seeds=round(counters.env_steps * self.config.num_seeds /
                                max(counters.wall_time_s, 1e-9), 1),
            initial_params_sha256=run.initial, params_sha256=tree_digest(saved["params"]),
            state_sha256=carry_digest(run.carry),
            seeds=per_seed(run.monitor.history.entries, self.config),
        )  # fmt: skip
        learner_updates = self._learner_updates(run.carry)
        if learner_updates is not None:
            summary["learner_updates"] = learner_updates
        if POOL_ROLE in getattr(self.env, "roles", ()):  # a board game's pool: seeds' records
            shared = jax.device_get(local_replica(run.carry.shared))
            summary["opponent_pool"] = [
                league_records(jax.tree.map(lambda x, i=i: x[i], shared))
                for i in range(self.config.num_seeds)
            ]
        if self.cluster.is_primary:
            with open(os.path.join(self.workdir, "summary.json"), "w") as f:
                json.dump(summary, f, indent=2)
        run.progress.message(
            f"done ({summary['stop_reason']}): {summary['env_steps']:,} env steps per seed x "
            f"{self.config.num_seeds} seed(s), {summary['updates']:,} updates in "
            f"{summary['wall_time_s']:.1f}s, final eval return {summary['final_eval_return']}"
        )
        if self.cluster.is_primary and self.hooks.save_last is not None:
            last = counters.last_eval["metric"] if counters.last_eval else None
            self.hooks.save_last(saved["params"], last, counters.env_steps)
        return summary


class _Run:
    """What one `AnakinTrainer.run` holds."""

    def __init__(self, carry, counters, saver, logger, progress, evaluator, monitor, clock):
        self.carry, self.counters, self.saver, self.ckpt = carry, counters, saver, saver.ckpt
        self.logger, self.progress = logger, progress
        self.evaluator, self.monitor, self.clock = evaluator, monitor, clock
        self.save_now = False
        self.initial = ""
