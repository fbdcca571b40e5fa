"""Each stage of the actor-learner pipeline measured alone, a synchronous baseline, and the whole.

Every function takes the run's `TrainConfig` and measures for about `seconds` of wall time after a
warm-up (compilation and EnvPool start-up are never in the figures):

- `raw_envpool` (`raw_stages.py`): EnvPool with random actions and nothing else, sync or
  async, the same envs, batch and C++ threads per actor thread as training: the ceiling;
- `actors_alone`: the runtime's real actor threads (EnvPool + jitted inference + rollout
  assembly), rollouts discarded;
- `learner_alone` (`learner_stage.py`): the jitted update on synthetic `[T + 1, B]` batches
  of the real shapes, with the batch resident on the learner devices and with the host ->
  device transfer the trainer does; FLOPs per update from XLA's cost analysis and, where the
  device's peak is known, MFU;
- `sync_baseline`: act, step and update in one loop on one thread (one sync EnvPool of
  `batch_size` envs), the way single-file scripts do it;
- `end_to_end`: the real `Trainer`, steady-state SPS and the per-stage timers it logs.
"""

from __future__ import annotations

import dataclasses
import json
import os
import queue
import shutil
import tempfile
import threading
import time
from typing import Any

import jax
import numpy as np
from learner_stage import (  # noqa: F401  (re-exported: stages.<name> as before)
    DATASHEET_PEAK_FLOPS,
    build,
    datasheet_peak,
    learner_alone,
    matmul_flops_per_s,
    synthetic_rollout,
    update_flops,
)
from raw_stages import (  # noqa: F401  (re-exported: stages.<name> as before)
    env_threads,
    raw_batch,
    raw_envpool,
    raw_gymnasium,
    raw_threads,
    warmup_s,
)

from jaxrl_dist.acting.actor import ActorShared, ActorStats
from jaxrl_dist.acting.fleet import Fleet
from jaxrl_dist.acting.params_store import ParamsStore
from jaxrl_dist.acting.policy_client import jit_inference_step
from jaxrl_dist.agents.base import ActorIdentity
from jaxrl_dist.config import TrainConfig
from jaxrl_dist.data.segments import SegmentBuffer
from jaxrl_dist.envs import make_env
from jaxrl_dist.envs.sources import is_python_env
from jaxrl_dist.learning.learner import Learner, host_metrics
from jaxrl_dist.run.trainer import Trainer
from jaxrl_dist.threads import POLL_S, put_until_stopped, switch_interval


def actors_alone(config: TrainConfig, seconds: float) -> dict:
    """The trainer's actor threads with fixed initial params; a drain thread discards rollouts."""
    _, devices, agent = build(config)
    store = ParamsStore(devices.actor_devices)
    learner_state = agent.learner.init(jax.random.PRNGKey(config.seed))
    store.publish(agent.learner.actor_params(learner_state), 0)
    rollouts: queue.Queue = queue.Queue(
        maxsize=config.sebulba.queue_size * config.sebulba.num_actor_threads
    )
    stop, stats = threading.Event(), ActorStats()
    first = threading.Event()

    def drain():
        while not stop.is_set():
            try:
                rollouts.get(timeout=POLL_S)
                first.set()
            except queue.Empty:
                continue

    drainer = threading.Thread(target=drain, daemon=True)
    drainer.start()
    shared = ActorShared(
        lambda item: put_until_stopped(rollouts, item, stop),
        stop,
        stats,
        config.unroll_length,
        config.rollout_segments(jax.process_count()),
    )
    fleet = Fleet(config, agent.actor, devices.actor_devices, store, shared)
    try:
        with switch_interval(config.switch_interval_s):  # as the trainer sets it
            first.wait(timeout=300)  # compiled and stepping
            time.sleep(warmup_s(seconds))
            stats.drain()
            start = time.perf_counter()
            time.sleep(seconds)
            drained, elapsed = stats.drain(), time.perf_counter() - start
    finally:
        stop.set()
        fleet.join(timeout_s=10)
        drainer.join(timeout=10)
    threads = [*fleet.actors.threads, *(fleet.servers.threads if fleet.servers else [])]
    errors = [repr(a.error) for a in threads if a.error is not None]
    if errors:
        raise RuntimeError(f"actor failed during the benchmark: {errors[0]}")
    return {
        "sps": drained["env_steps"] / elapsed,
        "timers_s_per_s": {k: v / elapsed for k, v in drained["timers"].items()},
    }


def sync_baseline(config: TrainConfig, seconds: float) -> dict:
    """Act, step and update in one loop: one sync EnvPool of `batch_size` envs (each update's
    segments), the same EnvPool threads in all, the same network, batch and update."""
    spec, devices, agent = build(config)
    learner = Learner(agent.learner, devices, config.seed)
    state = learner.init_state()
    act_step = jit_inference_step(agent.actor)
    b = config.batch_size
    threads = min(b, env_threads(config) * config.sebulba.num_actor_threads)
    env = make_env(config.env_id, config.env_kwargs, b, b, seed=2000, num_threads=threads)
    buffer = SegmentBuffer(b, config.unroll_length, b)
    # The per-env actor state follows the params onto the learner devices (as the key did).
    actor_state = agent.actor.init_state(
        ActorIdentity(0, 1), b, jax.random.PRNGKey(config.seed + 1)
    )
    timers = {"env_s": 0.0, "inference_s": 0.0, "update_s": 0.0}
    updates, start, measured_from = 0, None, 2  # the first updates compile
    env.async_reset()
    try:
        while True:
            t0 = time.perf_counter()
            obs, reward, terminated, truncated, info = env.recv()
            ids = info["env_id"]
            buffer.add_observation(ids, obs, reward, terminated, truncated)
            t1 = time.perf_counter()
            no_starts = np.zeros(len(ids), bool)  # a memoryless policy: no resets to make
            action, env_action, extras, _, actor_state = act_step(
                learner.actor_params(state), obs, ids.astype(np.int32), no_starts, actor_state
            )
            action, env_action, extras = jax.device_get((action, env_action, extras))
            buffer.add_action(ids, action, extras, updates)
            t2 = time.perf_counter()
            env.send(env_action, ids)
            rollout = buffer.pop_rollout()
            t3 = time.perf_counter()
            if rollout is not None:
                state, metrics, _ = learner.update(state, learner.put_batch(rollout))
                host_metrics(metrics)
                updates += 1
                if updates == measured_from:
                    start, timers = time.perf_counter(), dict.fromkeys(timers, 0.0)
                    continue
                if start is not None and time.perf_counter() - start >= seconds:  # on an update
                    break
            t4 = time.perf_counter()
            timers["env_s"] += (t1 - t0) + (t3 - t2)
            timers["inference_s"] += t2 - t1
            timers["update_s"] += t4 - t3
    finally:
        env.close()
    elapsed = time.perf_counter() - start
    steps = (updates - measured_from) * config.steps_per_update
    return {
        "sps": steps / elapsed,
        "num_envs": b,
        "env_threads": threads,
        "timers_s_per_s": {k: v / elapsed for k, v in timers.items()},
    }


def _training_lines(metrics_path: str) -> list[str]:
    """The training log lines (those with a rate) written so far to `metrics.jsonl`."""
    if not os.path.exists(metrics_path):
        return []
    with open(metrics_path) as f:
        return [line for line in f if "charts/sps" in line]


FINAL_EPISODE_STEPS = 100


def short_final_episode(config: TrainConfig) -> dict | None:
    """The evaluation env's kwargs with EnvPool's episode cap at `FINAL_EPISODE_STEPS`: the
    run's final evaluation comes after the window and is not measured, yet an untrained greedy
    Breakout agent that never fires plays the whole 27,000-step cap (a minute on one env). A
    Python env keeps its kwargs (its maker may take no such argument)."""
    if is_python_env(config.eval_env[0]):
        return config.eval_env_kwargs
    return {**(config.eval_env_kwargs or {}), "max_episode_steps": FINAL_EPISODE_STEPS}


def end_to_end(config: TrainConfig, seconds: float) -> dict:
    """The real trainer (evaluation and checkpoints off), stopped `seconds` after its first log
    line, so compilation and start-up never eat into the window. Steady-state SPS is the rate
    between the first log line and the last; timers are the mean of the intervals after the
    first."""
    config = dataclasses.replace(
        config,
        total_env_steps=1_000_000_000,
        max_wall_time_s=0.0,
        eval_every_updates=0,
        eval_episodes=1,
        eval_env_kwargs=short_final_episode(config),
        checkpoint_every_updates=0,
        stop_at_eval_return=None,
        log_every_updates=min(config.log_every_updates, 20),
    )
    workdir = tempfile.mkdtemp(prefix="jaxrl_dist_bench_")
    metrics_path = os.path.join(workdir, "metrics.jsonl")
    marks = {"built": time.monotonic()}  # where a run's wall time goes besides the window
    trainer = Trainer(config, workdir, quiet=True)
    finished = threading.Event()

    def wait_for_logs(count: int, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while (
            not finished.is_set()
            and time.monotonic() < deadline
            and len(_training_lines(metrics_path)) < count
        ):
            time.sleep(0.05)

    def stop_after_window():
        wait_for_logs(1, 900)  # compilation of the largest networks included
        marks["first_log"] = time.monotonic()
        finished.wait(seconds)
        # A loaded machine can log less often than the window: a rate needs two log lines.
        wait_for_logs(2, 300)
        marks["stop"] = time.monotonic()
        trainer.request_stop("benchmark window over")

    watcher = threading.Thread(target=stop_after_window, daemon=True)
    watcher.start()
    try:
        summary = trainer.run().summary
        marks["returned"] = time.monotonic()
        logs = [json.loads(line) for line in _training_lines(metrics_path)]
    finally:
        finished.set()
        watcher.join(timeout=5)
        shutil.rmtree(workdir, ignore_errors=True)
    if len(logs) < 2:
        raise RuntimeError(
            f"end-to-end training logged {len(logs)} interval(s) in {seconds:g}s; "
            "give a longer --seconds"
        )
    first, last, steady = logs[0], logs[-1], logs[1:]
    window = last["wall_time_s"] - first["wall_time_s"]
    mean = lambda key: float(np.mean([m[key] for m in steady]))  # noqa: E731
    return {
        "sps": (last["env_steps"] - first["env_steps"]) / window,
        "actor_sps": mean("charts/actor_sps"),
        "overall_sps": summary["sps"],
        "env_steps": summary["env_steps"],
        "updates": summary["updates"],
        "wall_time_s": summary["wall_time_s"],
        "measured_window_s": window,
        "log_intervals": len(steady),
        "policy_lag": mean("stats/policy_lag"),
        "timers_s_per_s": {k[len("timers/") :]: mean(k) for k in steady[0] if "timers/" in k},
        # Start to first step (the trainer's own figure), to the first log line, and from the
        # stop to run() returning (the final evaluation and save): what a window costs.
        "phases_s": {
            "startup": summary["startup_s"],
            "to_first_log": round(marks["first_log"] - marks["built"], 2),
            "after_window": round(marks["returned"] - marks["stop"], 2),
        },
        "compile": summary["compile"],
    }


def bottleneck(result: dict[str, Any]) -> dict[str, Any]:
    """Which stage bounds end-to-end SPS: the slowest stage measured alone, and the end-to-end
    timers that confirm it (the learner busy all the time, or actors waiting on a full queue)."""
    capacities = {"environment (raw EnvPool async)": result["raw_async"]["sps"]}
    if "actors" in result:
        capacities["actors (env + inference + rollouts)"] = result["actors"]["sps"]
    if "learner" in result:
        capacities["learner (transfer + update)"] = result["learner"]["with_transfer_samples_per_s"]
    stage = min(capacities, key=capacities.get)
    out = {"stage": stage, "capacities_sps": capacities}
    e2e = result.get("end_to_end")
    if e2e:
        t = e2e["timers_s_per_s"]
        busy = ("batch_s", "transfer_s", "update_s", "publish_s")
        out["learner_busy_s_per_s"] = sum(t.get(k, 0.0) for k in busy)
        out["actors_waiting_on_queue_s_per_s"] = t.get("queue_put_s", 0.0)
        out["learner_waiting_on_actors_s_per_s"] = t.get("queue_get_s", 0.0)
        out["end_to_end_over_slowest_stage"] = e2e["sps"] / capacities[stage]
    return out
