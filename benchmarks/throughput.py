"""End-to-end training SPS beside raw EnvPool async SPS, same envs and threads, in one run.

    python benchmarks/throughput.py --config configs/impala_atari.py:quick --seconds 60

Raw EnvPool: each of `num_actor_threads` threads steps its own async pool (`envs_per_actor`
envs, `env_batch_size` per recv, the same EnvPool thread count as training) with random actions.
Training: the real trainer for `--seconds` of wall time (evaluation and periodic checkpoints off);
steady-state SPS is the median of the logged intervals after the first (compile) one.
Writes `benchmarks/results/<device>/<name>.json`.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import threading
import time

import jax
import numpy as np

from jaxrl_dist.cli import parse_args
from jaxrl_dist.config import TrainConfig
from jaxrl_dist.envs import make_env
from jaxrl_dist.trainer import Trainer


def raw_envpool_sps(config: TrainConfig, seconds: float) -> float:
    """Random-action async EnvPool SPS over all actor threads, as the actors drive it."""
    counts = [0] * config.num_actor_threads
    stop = threading.Event()

    def step(i: int):
        env = make_env(
            config.env_id, config.env_kwargs, config.envs_per_actor, config.env_batch_size,
            seed=i, num_threads=config.env_threads_per_actor,
        )  # fmt: skip
        rng = np.random.default_rng(i)
        n = env.action_space.n
        env.async_reset()
        while not stop.is_set():
            _, _, _, _, info = env.recv()
            ids = info["env_id"]
            env.send(rng.integers(0, n, len(ids)).astype(np.int32), ids)
            counts[i] += len(ids)
        env.close()

    threads = [threading.Thread(target=step, args=(i,)) for i in range(config.num_actor_threads)]
    for t in threads:
        t.start()
    time.sleep(1.0)  # warm-up
    start_count, start = sum(counts), time.perf_counter()
    time.sleep(seconds)
    sps = (sum(counts) - start_count) / (time.perf_counter() - start)
    stop.set()
    for t in threads:
        t.join()
    return sps


def training_sps(config: TrainConfig, seconds: float) -> dict:
    workdir = tempfile.mkdtemp(prefix="jaxrl_dist_bench_")
    summary = Trainer(config, workdir, quiet=True).run()
    with open(os.path.join(workdir, "metrics.jsonl")) as f:
        logs = [json.loads(line) for line in f if "charts/sps" in line]
    steady = logs[1:] or logs
    timers = {k: float(np.median([m[k] for m in steady])) for k in steady[0] if "timers/" in k}
    return {
        "steady_sps": float(np.median([m["charts/sps"] for m in steady])),
        "steady_actor_sps": float(np.median([m["charts/actor_sps"] for m in steady])),
        "overall_sps": summary["sps"],
        "env_steps": summary["env_steps"],
        "updates": summary["updates"],
        "wall_time_s": summary["wall_time_s"],
        "policy_lag": float(np.median([m["stats/policy_lag"] for m in steady])),
        "timers_s_per_s": timers,
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--name", default=None, help="result file name (default: config name)")
    args, rest = parser.parse_known_args()
    bench = ["--config.total_env_steps=1_000_000_000", f"--config.max_wall_time_s={args.seconds}",
             "--config.eval_every_updates=0", "--config.checkpoint_every_updates=0",
             "--config.stop_at_eval_return=none", "--config.eval_episodes=1"]  # fmt: skip
    config, cli = parse_args([*rest, "--workdir", "unused", *bench])
    raw = raw_envpool_sps(config, args.seconds)
    train = training_sps(config, args.seconds)
    device = jax.devices()[0]
    result = {
        "command": " ".join([os.path.basename(sys.executable), *sys.argv]),
        "config": cli.config,
        "env_id": config.env_id,
        "num_actor_threads": config.num_actor_threads,
        "envs_per_actor": config.envs_per_actor,
        "env_batch_size": config.env_batch_size,
        "batch_size": config.batch_size,
        "unroll_length": config.unroll_length,
        "raw_envpool_async_sps": round(raw, 1),
        "training": train,
        "training_over_raw": round(train["steady_sps"] / raw, 4),
        "device": f"{device.platform}:{device.device_kind}",
        "cpu_count": os.cpu_count(),
        "machine": platform.machine(),
        "python": platform.python_version(),
        "jax": jax.__version__,
    }
    name = args.name or os.path.basename(cli.config.split(":")[0]).removesuffix(".py")
    name += "_" + cli.config.split(":")[1] if ":" in cli.config else ""
    out_dir = os.path.join(os.path.dirname(__file__), "results", device.platform)
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, f"{name}.json"), "w") as f:
        json.dump(result, f, indent=2)
    print(f"{'stage':<28}{'SPS':>12}{'/ raw':>10}")
    print(f"{'raw EnvPool async':<28}{raw:>12,.0f}{1.0:>10.3f}")
    for key in ("steady_actor_sps", "steady_sps"):
        print(f"{'training ' + key:<28}{train[key]:>12,.0f}{train[key] / raw:>10.3f}")
    print("timers (seconds per second):", json.dumps(train["timers_s_per_s"]))
    print(f"written to {os.path.join(out_dir, name + '.json')}")


if __name__ == "__main__":
    main()
