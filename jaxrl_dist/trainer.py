"""Wires a `TrainConfig` into a run: actors, learner, evaluation, checkpoints, logs.

The trainer never names an algorithm: it looks the config's `algorithm` up in the registry and
calls the returned pure functions. Only the main thread updates, evaluates and saves.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import os
import queue
import signal
import threading
import time
from typing import Any

import jax
import numpy as np

from jaxrl_dist import algorithms
from jaxrl_dist.algorithms.base import LearnerState
from jaxrl_dist.checkpoint import Checkpointer, abstract_like, restore_params, tree_digest
from jaxrl_dist.config import ConfigError, TrainConfig
from jaxrl_dist.envs import check_env, env_spec
from jaxrl_dist.evaluation import Evaluator
from jaxrl_dist.logger import LogWindow, MetricLogger, Progress
from jaxrl_dist.runtime import Actor, ActorStats, Learner, ParamsStore, select_devices
from jaxrl_dist.runtime.actor import POLL_S, start_actors
from jaxrl_dist.runtime.learner import host_metrics
from jaxrl_dist.types import concatenate_rollouts

ACTOR_DEAD_TIMEOUT_S = 120.0  # no rollout for this long from live actors: give up


class RunError(RuntimeError):
    """A run cannot continue (an actor died, ...); the message says why."""


class NonFiniteError(RunError):
    """A non-finite loss or gradient: the state is not saved (the last checkpoint is kept)."""


def validate_for_machine(config: TrainConfig):
    """Checks what needs EnvPool's registry and the local devices; raises ConfigError.

    Returns (env spec, devices). Nothing is written before this passes.
    """
    problem = check_env(config.env_id, config.env_kwargs)
    if problem:
        raise ConfigError(problem)
    try:
        devices = select_devices(config.actor_device_ids, config.learner_device_ids)
    except ValueError as e:
        raise ConfigError(str(e)) from None
    n = devices.num_learner_devices
    if config.batch_size % n:
        raise ConfigError(
            f"config.batch_size={config.batch_size} does not split over {n} learner devices; "
            f"fix it with --config.batch_size=<a multiple of {n}>"
        )
    return env_spec(config.env_id, config.env_kwargs), devices


@dataclasses.dataclass
class _Run:
    """What one `Trainer.run` call holds while it runs."""

    learner: Learner
    store: ParamsStore
    rollouts: queue.Queue
    actors: list[Actor]
    stats: ActorStats
    evaluator: Evaluator
    ckpt: Checkpointer
    logger: MetricLogger
    progress: Progress
    counters: dict
    clock: Any  # () -> wall seconds of the whole run, resumed runs included
    state: LearnerState  # the newest state; the one before it was donated to the update


class Trainer:
    """One training run in `workdir` (`checkpoints/`, `metrics.jsonl`, `tb/`, `summary.json`)."""

    def __init__(
        self, config: TrainConfig, workdir: str, resume: bool = False, quiet: bool = False
    ):
        self.config = config
        self.workdir = os.path.abspath(workdir)
        self.spec, self.devices = validate_for_machine(config)
        ckpt_dir = os.path.join(self.workdir, "checkpoints")
        has_ckpt = os.path.isdir(ckpt_dir) and bool(os.listdir(ckpt_dir))
        if has_ckpt and not resume:
            raise ConfigError(
                f"{self.workdir} already holds a run's checkpoints; pass --resume to continue "
                "it, or choose another --workdir (nothing was overwritten)"
            )
        if resume and not has_ckpt:
            raise ConfigError(f"--resume: no checkpoint in {ckpt_dir}; drop --resume to start anew")
        entry = algorithms.get(config.algorithm)
        problem = entry.check(config.algo, config)
        if problem:
            raise ConfigError(problem)
        try:
            self.algorithm = entry.make(config.algo, config.network, self.spec, config.num_updates)
            init_shapes = jax.eval_shape(self.algorithm.init, jax.random.PRNGKey(0))
        except (ValueError, TypeError) as e:
            raise ConfigError(str(e).splitlines()[0]) from None
        self._warm_params = None
        if config.warm_start:
            self._warm_params = _load_warm_start(config.warm_start, init_shapes.params)
        self._resume = resume
        self._quiet = quiet
        self._stop_requested = threading.Event()
        self._stop_reason = ""
        self._signals = 0

    # ----------------------------------------------------------------------------- signals
    def request_stop(self, reason: str) -> None:
        self._stop_reason = self._stop_reason or reason
        self._stop_requested.set()

    def _install_signal_handlers(self) -> dict:
        if threading.current_thread() is not threading.main_thread():
            return {}

        def handler(signum, frame):
            self._signals += 1
            if self._signals > 1 and signum == signal.SIGINT:
                raise KeyboardInterrupt  # a second Ctrl-C: leave at once
            self.request_stop(signal.Signals(signum).name)

        return {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)}

    # ----------------------------------------------------------------------------- state
    def _initial_state(self, learner: Learner, ckpt: Checkpointer) -> tuple[LearnerState, dict]:
        cfg = self.config
        state = learner.put_state(self.algorithm.init(jax.random.PRNGKey(cfg.seed)))
        counters = {
            "env_steps": 0, "updates": 0, "wall_time_s": 0.0, "evals": [], "dropped_rollouts": 0
        }  # fmt: skip
        if self._resume:
            state, meta = ckpt.restore(abstract_like(state))
            counters.update({k: meta[k] for k in counters if k in meta})
            target = cfg.stop_at_eval_return
            if target is not None and any(e["return"] >= target for e in counters["evals"]):
                self.request_stop(f"an earlier evaluation already reached {target}")
        elif self._warm_params is not None:
            state = state._replace(params=learner.put_state(self._warm_params))
        return state, counters

    def _save(self, run: _Run) -> None:
        meta = {**copy.deepcopy(run.counters), "config": _jsonable(self.config.to_dict())}
        step = run.counters["updates"]
        run.ckpt.wait()  # a save may still be finalising in the background: never race it
        if run.ckpt.latest_step() == step:  # a periodic save at this update lacks what followed
            run.ckpt.delete(step)
        run.ckpt.save(step, run.state, meta)

    # ----------------------------------------------------------------------------- run
    def run(self) -> dict[str, Any]:
        """Trains until a stop condition; returns the summary (also in `summary.json`)."""
        cfg = self.config
        os.makedirs(self.workdir, exist_ok=True)
        with open(os.path.join(self.workdir, "config.json"), "w") as f:
            json.dump(_jsonable(cfg.to_dict()), f, indent=2)
        previous_handlers = self._install_signal_handlers()
        try:
            return self._run()
        finally:
            for s, h in previous_handlers.items():
                signal.signal(s, h)

    def _run(self) -> dict[str, Any]:
        cfg = self.config
        ckpt = Checkpointer(os.path.join(self.workdir, "checkpoints"), cfg.keep_checkpoints)
        learner = Learner(self.algorithm, self.devices)
        state, counters = self._initial_state(learner, ckpt)
        initial_digests = tree_digest(state.params), tree_digest(state.opt_state)
        start, base_wall = time.monotonic(), counters["wall_time_s"]
        store = ParamsStore(self.devices.actor_devices)
        store.publish(state.params, counters["updates"])
        run = _Run(
            learner=learner,
            store=store,
            rollouts=queue.Queue(maxsize=cfg.queue_size * cfg.num_actor_threads),
            actors=[],
            stats=ActorStats(),
            evaluator=Evaluator(
                cfg.env_id,
                cfg.env_kwargs,
                cfg.eval_episodes,
                cfg.seed,
                self.algorithm,
                self.devices.actor_devices[0],
            ),  # fmt: skip
            ckpt=ckpt,
            logger=MetricLogger(self.workdir, wall_time_offset=base_wall),
            progress=Progress(cfg.total_env_steps, quiet=self._quiet),
            counters=counters,
            clock=lambda: base_wall + time.monotonic() - start,
            state=state,
        )
        del state  # from here on run.state is the only live state
        stop_actors = threading.Event()
        error: RunError | None = None
        try:
            run.actors = start_actors(
                cfg, self.algorithm, self.devices.actor_devices, run.store, run.rollouts,
                stop_actors, run.stats, start_update=counters["updates"],
            )  # fmt: skip
            self._loop(run)
        except RunError as e:
            error = e
            self.request_stop(f"error: {e}")
        finally:
            stop_actors.set()
            for actor in run.actors:
                actor.join(timeout=10.0)
        try:
            counters["wall_time_s"] = run.clock()
            if error is None and not self._stop_reason.startswith("SIG"):
                last = counters["evals"][-1]["updates"] if counters["evals"] else None
                if last != counters["updates"]:
                    self._evaluate(run)
            if not isinstance(error, NonFiniteError):
                self._save(run)
            ckpt.wait()
            summary = self._summary(run)
            summary["initial_params_sha256"], summary["initial_opt_state_sha256"] = initial_digests
            if not isinstance(error, NonFiniteError):  # else run.state was donated to the update
                summary["params_sha256"] = tree_digest(run.state.params)
                summary["opt_state_sha256"] = tree_digest(run.state.opt_state)
            with open(os.path.join(self.workdir, "summary.json"), "w") as f:
                json.dump(summary, f, indent=2)
            run.progress.message(
                f"done ({summary['stop_reason']}): {summary['env_steps']:,} env steps, "
                f"{summary['updates']:,} updates in {summary['wall_time_s']:.1f}s, "
                f"final eval return {summary['final_eval_return']}"
            )
        finally:
            run.evaluator.close()
            ckpt.close()
            run.logger.close()
        if error is not None:
            raise error
        return summary

    @staticmethod
    def _check_actors(actors: list[Actor]) -> None:
        for actor in actors:
            if actor.error is not None or not actor.is_alive():
                err = actor.error
                raise RunError(f"actor {actor.index} stopped: {err!r}") from err

    def _next_batch(self, run: _Run):
        """`batch_size / rollout_segments` rollouts (None on a stop request); never waits
        without checking the actors."""
        need = self.config.batch_size // self.config.rollout_segments
        got, last_item = [], time.monotonic()
        self._check_actors(run.actors)
        while len(got) < need:
            if self._stop_requested.is_set():
                return None
            try:
                rollout = run.rollouts.get(timeout=POLL_S)
                last_item = time.monotonic()
            except queue.Empty:
                self._check_actors(run.actors)
                if time.monotonic() - last_item > ACTOR_DEAD_TIMEOUT_S:
                    msg = f"no rollout for {ACTOR_DEAD_TIMEOUT_S:.0f}s from live actors"
                    raise RunError(msg) from None
                continue
            lag = run.counters["updates"] - int(rollout.policy_version.min())
            if self.config.max_policy_lag and lag > self.config.max_policy_lag:
                run.counters["dropped_rollouts"] += 1
                continue  # a straggler: acted with params too old to learn from
            got.append(rollout)
        return got

    def _loop(self, run: _Run) -> None:
        cfg, counters = self.config, run.counters
        window = LogWindow(counters["env_steps"])
        while True:
            if counters["env_steps"] >= cfg.total_env_steps:
                self.request_stop("total_env_steps reached")
            if cfg.max_wall_time_s and run.clock() >= cfg.max_wall_time_s:
                self.request_stop("max_wall_time_s reached")
            if self._stop_requested.is_set():
                return
            t0 = time.perf_counter()
            rollouts = self._next_batch(run)
            if rollouts is None:
                return
            t1 = time.perf_counter()
            batch = concatenate_rollouts(rollouts)
            window.lags.append(counters["updates"] - float(np.mean(batch.policy_version)))
            t2 = time.perf_counter()
            device_batch = run.learner.put_batch(batch)
            t3 = time.perf_counter()
            new_state, metrics = run.learner.update(run.state, device_batch)
            metrics = host_metrics(metrics)
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
            if cfg.eval_every_updates and updates % cfg.eval_every_updates == 0:
                self._evaluate(run)
            if updates % cfg.log_every_updates == 0:
                actor = run.stats.drain()
                record = window.record(metrics, counters, actor, run.rollouts.qsize())
                run.logger.write(counters["env_steps"], record)
                run.progress.line(counters["env_steps"], record)
            if cfg.checkpoint_every_updates and updates % cfg.checkpoint_every_updates == 0:
                counters["wall_time_s"] = run.clock()
                self._save(run)

    def _evaluate(self, run: _Run) -> None:
        cfg, counters = self.config, run.counters
        record = {}
        modes = ("greedy", "sampled") if cfg.eval_mode == "both" else (cfg.eval_mode,)
        for mode in modes:
            result = run.evaluator.run(run.state.params, greedy=(mode == "greedy"))
            record.update({f"eval/{mode}_{k}": v for k, v in result.items()})
        main = modes[0]
        record["eval/return"] = record[f"eval/{main}_return"]
        record["eval/return_std"] = record[f"eval/{main}_return_std"]
        counters["evals"].append(
            {"env_steps": counters["env_steps"], "updates": counters["updates"],
             "wall_time_s": round(run.clock(), 3), "return": record["eval/return"],
             "mode": main}
        )  # fmt: skip
        run.logger.write(counters["env_steps"], record)
        run.progress.line(counters["env_steps"], record)
        target = cfg.stop_at_eval_return
        if target is not None and record["eval/return"] >= target:
            self.request_stop(f"eval return {record['eval/return']:.1f} >= {target}")

    def _summary(self, run: _Run) -> dict[str, Any]:
        counters = run.counters
        evals = counters["evals"]
        target = self.config.stop_at_eval_return
        reached = [e for e in evals if target is not None and e["return"] >= target]
        wall = counters["wall_time_s"]
        return {
            "env_steps": counters["env_steps"],
            "updates": counters["updates"],
            "wall_time_s": round(wall, 3),
            "sps": round(counters["env_steps"] / wall, 1) if wall else 0.0,
            "final_eval_return": evals[-1]["return"] if evals else None,
            "best_eval_return": max(e["return"] for e in evals) if evals else None,
            "env_steps_to_target": reached[0]["env_steps"] if reached else None,
            "wall_time_s_to_target": reached[0]["wall_time_s"] if reached else None,
            "dropped_rollouts": counters["dropped_rollouts"],
            "stop_reason": self._stop_reason or "finished",
            "checkpoint_dir": run.ckpt.directory,
            "latest_checkpoint_step": run.ckpt.latest_step(),
            "evals": evals,
        }


def _load_warm_start(path: str, params_shapes: Any) -> Any:
    """Params of another run (its work dir or checkpoint dir); ConfigError if they do not fit."""
    try:
        params = restore_params(path)
    except FileNotFoundError:
        raise ConfigError(f"config.warm_start={path!r} holds no checkpoint") from None
    # Orbax restores NamedTuples as dicts: match leaves by their key paths, not tree structure.
    want, treedef = jax.tree_util.tree_flatten_with_path(params_shapes)
    have = {_path_str(p): x for p, x in jax.tree_util.tree_flatten_with_path(params)[0]}
    leaves = [have.get(_path_str(p)) for p, _ in want]
    fits = len(have) == len(want) and all(
        x is not None and (x.shape, x.dtype) == (w.shape, w.dtype)
        for x, (_, w) in zip(leaves, want, strict=True)
    )
    if not fits:
        raise ConfigError(
            f"config.warm_start={path!r}: its params do not match this config's network "
            "(different torso, sizes or env); warm-start from a run with the same network"
        )
    return jax.tree_util.tree_unflatten(treedef, leaves)


def _path_str(path) -> str:
    keys = (getattr(k, "key", getattr(k, "name", getattr(k, "idx", k))) for k in path)
    return "/".join(str(k) for k in keys)


def _jsonable(value: Any) -> Any:
    if dataclasses.is_dataclass(value):
        value = dataclasses.asdict(value)
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    return value
