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

from jaxrl_dist import algorithms
from jaxrl_dist.algorithms.base import LearnerState
from jaxrl_dist.checkpoint import Checkpointer, abstract_like
from jaxrl_dist.config import ConfigError, TrainConfig
from jaxrl_dist.envs import check_env, derive_seed, env_spec, make_env
from jaxrl_dist.evaluation import Evaluator
from jaxrl_dist.logger import MetricLogger, Progress
from jaxrl_dist.runtime import Actor, ActorStats, Learner, ParamsStore, select_devices
from jaxrl_dist.runtime.actor import POLL_S, make_act_step
from jaxrl_dist.runtime.learner import host_metrics
from jaxrl_dist.types import concatenate_rollouts

ACTOR_SEED_PURPOSE = 1
ACTOR_DEAD_TIMEOUT_S = 120.0  # no rollout for this long and no live actor: give up


class RunError(RuntimeError):
    """A run cannot continue (an actor died, bad checkpoint, ...); the message says why."""


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
        if config.warm_start and not _find_checkpoint_dir(config.warm_start):
            raise ConfigError(f"config.warm_start={config.warm_start!r} holds no checkpoint")
        self._resume = resume
        self._quiet = quiet
        entry = algorithms.get(config.algorithm)
        self.algorithm = entry.make(config.algo, config.network, self.spec, config.num_updates)
        self._stop_requested = threading.Event()
        self._stop_reason = ""

    # ----------------------------------------------------------------------------- signals
    def request_stop(self, reason: str) -> None:
        self._stop_reason = self._stop_reason or reason
        self._stop_requested.set()

    def _install_signal_handlers(self):
        if threading.current_thread() is not threading.main_thread():
            return {}

        def handler(signum, frame):
            if self._stop_requested.is_set() and signum == signal.SIGINT:
                raise KeyboardInterrupt  # second Ctrl-C: leave at once
            self.request_stop(signal.Signals(signum).name)

        return {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)}

    # ----------------------------------------------------------------------------- state
    def _initial_state(self, learner: Learner, ckpt: Checkpointer) -> tuple[LearnerState, dict]:
        cfg = self.config
        state = learner.put_state(self.algorithm.init(jax.random.PRNGKey(cfg.seed)))
        counters = {"env_steps": 0, "updates": 0, "wall_time_s": 0.0, "evals": []}
        if self._resume:
            state, meta = ckpt.restore(abstract_like(state))
            counters.update({k: meta[k] for k in counters if k in meta})
        elif cfg.warm_start:
            with Checkpointer(_find_checkpoint_dir(cfg.warm_start), create=False) as other:
                restored, _ = other.restore(abstract_like(state))
            state = state._replace(params=restored.params)
        return state, counters

    def _meta(self, counters: dict) -> dict:
        return {**counters, "config": _jsonable(self.config.to_dict())}

    # ----------------------------------------------------------------------------- run
    def run(self) -> dict[str, Any]:
        cfg = self.config
        os.makedirs(self.workdir, exist_ok=True)
        with open(os.path.join(self.workdir, "config.json"), "w") as f:
            json.dump(_jsonable(cfg.to_dict()), f, indent=2)
        previous_handlers = self._install_signal_handlers()
        progress = Progress(cfg.total_env_steps, quiet=self._quiet)
        logger = MetricLogger(self.workdir)
        ckpt = Checkpointer(os.path.join(self.workdir, "checkpoints"), cfg.keep_checkpoints)
        learner = Learner(self.algorithm, self.devices)
        state, counters = self._initial_state(learner, ckpt)
        initial_digest = params_digest(state.params)
        store = ParamsStore(self.devices.actor_devices)
        store.publish(state.params, counters["updates"])
        evaluator = Evaluator(
            cfg.env_id, cfg.env_kwargs, cfg.eval_episodes, cfg.seed, self.algorithm.greedy_act,
            self.algorithm.act, self.devices.actor_devices[0],
        )  # fmt: skip
        stop_actors = threading.Event()
        rollouts: queue.Queue = queue.Queue(maxsize=cfg.queue_size * cfg.num_actor_threads)
        stats = ActorStats()
        actors = self._start_actors(store, rollouts, stop_actors, stats)
        start = time.monotonic()
        base_wall = counters["wall_time_s"]
        self._elapsed = lambda: base_wall + time.monotonic() - start
        try:
            state = self._loop(
                state, counters, learner, store, rollouts, actors, stats, evaluator, ckpt,
                logger, progress, start, base_wall,
            )  # fmt: skip
        finally:
            stop_actors.set()
            for actor in actors:
                actor.join(timeout=10.0)
            for s, h in previous_handlers.items():
                signal.signal(s, h)
        counters["wall_time_s"] = base_wall + time.monotonic() - start
        if not self._stop_reason.startswith("SIG") and (
            not counters["evals"] or counters["evals"][-1]["updates"] != counters["updates"]
        ):
            self._evaluate(state, counters, evaluator, logger, progress)
        if ckpt.latest_step() != counters["updates"]:  # a periodic save may have just written it
            ckpt.save(counters["updates"], state, self._meta(counters))
        ckpt.wait()
        summary = self._summary(counters, ckpt)
        summary["initial_params_sha256"] = initial_digest  # after restore: resume is checkable
        summary["params_sha256"] = params_digest(state.params)
        with open(os.path.join(self.workdir, "summary.json"), "w") as f:
            json.dump(summary, f, indent=2)
        progress.message(
            f"done ({self._stop_reason or 'finished'}): {summary['env_steps']:,} env steps, "
            f"{summary['updates']:,} updates in {summary['wall_time_s']:.1f}s, "
            f"final eval return {summary['final_eval_return']}"
        )
        evaluator.close()
        ckpt.close()
        logger.close()
        return summary

    def _start_actors(self, store, rollouts, stop, stats) -> list[Actor]:
        cfg = self.config
        act_step = make_act_step(self.algorithm.act)
        root = jax.random.fold_in(jax.random.PRNGKey(cfg.seed), ACTOR_SEED_PURPOSE)
        actors = []
        for i in range(cfg.num_actor_threads):
            device = self.devices.actor_devices[i % len(self.devices.actor_devices)]
            env_seed = derive_seed(cfg.seed, ACTOR_SEED_PURPOSE, i)
            make = lambda s=env_seed: make_env(  # noqa: E731
                cfg.env_id, cfg.env_kwargs, cfg.envs_per_actor, cfg.env_batch_size, s,
                cfg.env_threads_per_actor,
            )  # fmt: skip
            actor = Actor(
                i, make, act_step, store, device, jax.random.fold_in(root, i), rollouts, stop,
                stats, cfg.unroll_length,
            )  # fmt: skip
            actor.start()
            actors.append(actor)
        return actors

    def _next_batch(self, rollouts: queue.Queue, actors: list[Actor]):
        """Gets `batch_size / env_batch_size` rollouts; never waits without checking the actors."""
        need = self.config.batch_size // self.config.env_batch_size
        got, last_item = [], time.monotonic()
        while len(got) < need:
            if self._stop_requested.is_set():
                return None
            try:
                got.append(rollouts.get(timeout=POLL_S))
                last_item = time.monotonic()
            except queue.Empty:
                dead = [a for a in actors if a.error is not None or not a.is_alive()]
                if dead:
                    err = dead[0].error
                    raise RunError(f"actor {dead[0].index} stopped: {err!r}") from err
                if time.monotonic() - last_item > ACTOR_DEAD_TIMEOUT_S:
                    msg = f"no rollout for {ACTOR_DEAD_TIMEOUT_S:.0f}s from live actors"
                    raise RunError(msg) from None
        return concatenate_rollouts(got)

    def _loop(self, state, counters, learner, store, rollouts, actors, stats, evaluator, ckpt,
              logger, progress, start, base_wall):  # fmt: skip
        cfg = self.config
        timers = {"queue_get_s": 0.0, "transfer_s": 0.0, "update_s": 0.0}
        lags: list[float] = []
        last_log_time, last_log_steps = time.monotonic(), counters["env_steps"]
        while True:
            if counters["env_steps"] >= cfg.total_env_steps:
                self.request_stop("total_env_steps reached")
            elapsed = base_wall + time.monotonic() - start
            if cfg.max_wall_time_s and elapsed >= cfg.max_wall_time_s:
                self.request_stop("max_wall_time_s reached")
            if self._stop_requested.is_set():
                return state
            t0 = time.perf_counter()
            batch = self._next_batch(rollouts, actors)
            if batch is None:
                return state
            t1 = time.perf_counter()
            lags.append(counters["updates"] - float(np.mean(batch.policy_version)))
            device_batch = learner.put_batch(batch)
            t2 = time.perf_counter()
            state, metrics = learner.update(state, device_batch)
            metrics = host_metrics(metrics)
            t3 = time.perf_counter()
            store.publish(state.params, counters["updates"] + 1)
            timers["queue_get_s"] += t1 - t0
            timers["transfer_s"] += t2 - t1
            timers["update_s"] += t3 - t2
            counters["updates"] += 1
            counters["env_steps"] += cfg.steps_per_update
            updates = counters["updates"]
            if cfg.eval_every_updates and updates % cfg.eval_every_updates == 0:
                self._evaluate(state, counters, evaluator, logger, progress)
            if updates % cfg.log_every_updates == 0:
                now = time.monotonic()
                actor = stats.drain()
                interval = now - last_log_time
                record = {f"losses/{k}": v for k, v in metrics.items()}
                record["charts/sps"] = (counters["env_steps"] - last_log_steps) / interval
                record["charts/actor_sps"] = actor["env_steps"] / interval
                record["charts/updates"] = updates
                if actor["episode_returns"]:
                    record["charts/episode_return"] = float(np.mean(actor["episode_returns"]))
                    record["charts/episode_length"] = float(np.mean(actor["episode_lengths"]))
                record["stats/policy_lag"] = float(np.mean(lags))
                record["stats/queue_size"] = rollouts.qsize()
                for k, v in {**actor["timers"], **timers}.items():
                    record[f"timers/{k}"] = v / interval  # seconds per second (per thread sum)
                logger.write(counters["env_steps"], record)
                progress.line(counters["env_steps"], record)
                last_log_time, last_log_steps, lags = now, counters["env_steps"], []
                timers = dict.fromkeys(timers, 0.0)
            if cfg.checkpoint_every_updates and updates % cfg.checkpoint_every_updates == 0:
                counters["wall_time_s"] = base_wall + time.monotonic() - start
                ckpt.save(updates, state, self._meta(counters))

    def _evaluate(self, state, counters, evaluator, logger, progress) -> None:
        cfg = self.config
        record = {}
        modes = ("greedy", "sampled") if cfg.eval_mode == "both" else (cfg.eval_mode,)
        for mode in modes:
            result = evaluator.run(state.params, greedy=(mode == "greedy"))
            for k, v in result.items():
                record[f"eval/{mode}_{k}"] = v
        main = modes[0]
        record["eval/return"] = record[f"eval/{main}_return"]
        record["eval/return_std"] = record[f"eval/{main}_return_std"]
        counters["evals"].append(
            {"env_steps": counters["env_steps"], "updates": counters["updates"],
             "wall_time_s": round(self._elapsed(), 3), "return": record["eval/return"],
             "mode": main}
        )  # fmt: skip
        logger.write(counters["env_steps"], record)
        progress.line(counters["env_steps"], record)
        target = cfg.stop_at_eval_return
        if target is not None and record["eval/return"] >= target:
            self.request_stop(f"eval return {record['eval/return']:.1f} >= {target}")

    def _summary(self, counters: dict, ckpt: Checkpointer) -> dict[str, Any]:
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
            "stop_reason": self._stop_reason or "finished",
            "checkpoint_dir": ckpt.directory,
            "latest_checkpoint_step": ckpt.latest_step(),
            "evals": evals,
        }


def params_digest(params) -> str:
    """SHA-256 of the params' bytes: equal digests mean bit-identical params."""
    digest = hashlib.sha256()
    for leaf in jax.tree.leaves(jax.device_get(params)):
        digest.update(np.ascontiguousarray(leaf).tobytes())
    return digest.hexdigest()


def _find_checkpoint_dir(path: str) -> str | None:
    for candidate in (os.path.join(path, "checkpoints"), path):
        if os.path.isdir(candidate) and any(n.isdigit() for n in os.listdir(candidate)):
            return candidate
    return None


def _jsonable(value: Any) -> Any:
    if dataclasses.is_dataclass(value):
        value = dataclasses.asdict(value)
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    return value
