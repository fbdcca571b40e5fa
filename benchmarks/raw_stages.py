"""The raw env stages of `stages.py`: the envs alone with random actions (EnvPool sync or async at
the training layout, a gymnasium env's AsyncVectorEnv), the ceiling every other stage is a
fraction of."""

from __future__ import annotations

import threading
import time
from typing import Any

import numpy as np

from jaxrl_dist.acting.fleet import pool_affinity
from jaxrl_dist.config import TrainConfig
from jaxrl_dist.envs import EnvSpec, make_env
from jaxrl_dist.envs.games import random_legal
from jaxrl_dist.envs.sources import default_workers, is_python_env, python_factory


def warmup_s(seconds: float) -> float:
    return min(1.0, seconds / 2)


def env_threads(config: TrainConfig) -> int:
    """EnvPool C++ threads of one actor's pool, as `make_env` resolves them."""
    return config.sebulba.env_threads_per_actor or config.env_batch_size


def raw_batch(config: TrainConfig, sync: bool) -> int:
    """Envs per `recv()` of a raw pool: all of them sync, half async (EnvPool's async layout,
    whatever the run's own loop uses)."""
    return config.sebulba.envs_per_actor if sync else max(1, config.sebulba.envs_per_actor // 2)


def raw_threads(config: TrainConfig, sync: bool) -> int:
    """EnvPool C++ threads of a raw pool: the run's, or with auto (0) one per env of a `recv()`,
    so the async ceiling is the same whether the run steps an async pool or a sync one. A
    Python env's worker processes: the run's, or the pool's own default for the layout."""
    if is_python_env(config.env_id):
        return config.sebulba.env_threads_per_actor or default_workers(
            config.sebulba.envs_per_actor, raw_batch(config, sync)
        )
    return config.sebulba.env_threads_per_actor or raw_batch(config, sync)


def raw_gymnasium(config: TrainConfig, spec: EnvSpec, seconds: float) -> dict:
    """Random-action SPS of gymnasium's own `AsyncVectorEnv` (one env per worker process) with
    as many workers as the run's pools have (`raw_threads`), one per actor thread, stepped in
    lockstep by a Python thread each: the Python env's ceiling without jaxrl_dist's pool."""
    import gymnasium

    workers = raw_threads(config, sync=False)
    factory = python_factory(config.env_id, config.env_kwargs)

    def start(i: int):
        env = gymnasium.vector.AsyncVectorEnv([factory] * workers, context="spawn")
        env.reset(seed=1000 + i)
        rng = np.random.default_rng(i)

        def step() -> int:
            env.step(_random_actions(spec, rng, workers))
            return workers

        return step, env.close

    sps = _stepped_sps(config.sebulba.num_actor_threads, start, seconds)
    return {"sps": sps, "workers": workers, "vector_envs": config.sebulba.num_actor_threads}


def _stepped_sps(num_threads: int, start: Any, seconds: float) -> float:
    """Env steps per second of `num_threads` Python threads, thread `i` stepping what
    `start(i) -> (step, close)` built (`step()` returns the env steps it took), measured for
    `seconds` once every thread has stepped once and a warm-up has passed: building the envs
    (seconds for 100+ Atari envs) is not measured."""
    counts = [0] * num_threads
    stop = threading.Event()
    stepping = threading.Barrier(num_threads + 1)  # every env built and stepping

    def run(i: int):
        try:
            step, close = start(i)
            counts[i] += step()
            stepping.wait(timeout=600)
            while not stop.is_set():
                counts[i] += step()
            close()
        except BaseException:
            stepping.abort()  # the main thread's wait raises instead of waiting 600 s
            raise

    threads = [threading.Thread(target=run, args=(i,)) for i in range(num_threads)]
    for t in threads:
        t.start()
    stepping.wait(timeout=600)
    time.sleep(warmup_s(seconds))
    start_count, started = sum(counts), time.perf_counter()
    time.sleep(seconds)
    sps = (sum(counts) - start_count) / (time.perf_counter() - started)
    stop.set()
    for t in threads:
        t.join()
    return sps


def _random_actions(spec: EnvSpec, rng: np.random.Generator, n: int) -> np.ndarray:
    if spec.continuous:
        return rng.uniform(spec.action_low, spec.action_high, (n, spec.action_dim)).astype(
            np.float32
        )
    return rng.integers(0, spec.num_actions, n).astype(np.int32)


def raw_envpool(config: TrainConfig, spec: EnvSpec, seconds: float, sync: bool) -> dict:
    """Random-action SPS of `num_actor_threads` pools, each driven by its own Python thread.

    Async: `envs_per_actor` envs, half of them per `recv()` (EnvPool's async layout, whatever
    the run's own actor loop uses: the ceiling does not move with `async_envs`). Sync: the same
    envs, all of them per `recv()`. Both use the training's EnvPool thread count. A board game
    counts every move of every seat, each a uniformly random legal move (end to end counts the
    learner's own moves and each of its seats' final observations: one more per seat and game).
    """
    batch, pool_threads = raw_batch(config, sync), raw_threads(config, sync)

    def start(i: int):
        pinned = pool_affinity(config.sebulba.env_thread_affinity_offset, i, pool_threads)
        env = make_env(
            config.env_id,
            config.env_kwargs,
            config.sebulba.envs_per_actor,
            batch,
            seed=1000 + i,
            num_threads=pool_threads,
            thread_affinity_offset=pinned,
        )
        rng = np.random.default_rng(i)
        legal = random_legal(rng).choose
        env.async_reset()

        def step() -> int:
            *_, info = env.recv()
            ids = info["env_id"]
            if "legal_action_mask" in info:  # a board game: a random legal move (an illegal
                actions = legal(None, info["legal_action_mask"])  # one would end the game)
            else:
                actions = _random_actions(spec, rng, len(ids))
            env.send(actions, ids)
            return len(ids)

        return step, env.close

    sps = _stepped_sps(config.sebulba.num_actor_threads, start, seconds)
    return {
        "sps": sps,
        "num_envs": config.sebulba.envs_per_actor,
        "batch": batch,
        "env_threads": pool_threads,
        "pools": config.sebulba.num_actor_threads,
    }
