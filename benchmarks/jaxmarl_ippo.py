"""IPPO on JaxMARL's MPE simple spread, side by side: JaxMARL's own script and this library's
Anakin config, one run each, one after the other on the same machine.

JaxMARL's side is its unmodified `baselines/IPPO/ippo_ff_mpe.py` (give its path: a checkout of
github.com/FLAIROx/JaxMARL; the results name the commit used) with the `config/ippo_ff_mpe.yaml`
beside it: its `make_train` jitted and vmapped over seeds as its `main` does, compiled first (timed
apart), then run. Its `hydra`/`omegaconf` imports are stubbed where they are not installed (only
its `main` uses them) and its per-update `wandb.log` callback is a no-op (its yaml sets wandb
"disabled"; the callback's host round trip stays). Needs `distrax`.

This library's side is `scripts/train.py --config configs/anakin_ippo_mpe_spread.py` in a process
of its own (its evaluations every 100 updates included, as a user runs it). Steps per second on
both sides leave the compile out: JaxMARL's after `compile()`, this library's after its first
step (`summary.json`'s `startup_s`).

Both learn from the same env steps (JaxMARL's `TOTAL_TIMESTEPS` env steps are 3x as many agent
steps, this library's `total_env_steps`) with the same settings (the config's docstring). Returns
are printed in both units: JaxMARL's `MPELogWrapper` multiplies each agent's reward by the agent
count (3), this library reports an agent's own return.

    python benchmarks/jaxmarl_ippo.py --script ~/JaxMARL/baselines/IPPO/ippo_ff_mpe.py \
        --out benchmarks/results/cpu/jaxmarl_ippo_mpe.json

Writes the JSON as each side ends (`--only jaxmarl|ours` runs one).
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time
import types

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

import provenance  # noqa: E402

CONFIG = os.path.join(ROOT, "configs", "anakin_ippo_mpe_spread.py")
NUM_AGENTS = 3  # MPE simple spread's; JaxMARL's logged rewards are scaled by it
LAST_FRACTION = 0.1  # the training return: the mean over the last tenth of the updates


def end_mean(returns):
    """The mean over the last tenth (at least one) of `returns` along its last axis (updates
    or log windows)."""
    import numpy as np

    returns = np.asarray(returns)
    last = max(1, int(returns.shape[-1] * LAST_FRACTION))
    return returns[..., -last:].mean(axis=-1)


def _stub_missing(name: str, **attrs) -> None:
    try:
        importlib.import_module(name)
    except ImportError:
        sys.modules[name] = types.SimpleNamespace(**attrs)


def load_jaxmarl_script(path: str) -> types.ModuleType:
    """JaxMARL's IPPO script as a module, its `main`-only imports stubbed where missing and its
    wandb callback a no-op."""
    _stub_missing("hydra", main=lambda **kwargs: lambda f: f)
    _stub_missing("omegaconf", OmegaConf=None)
    _stub_missing("wandb", log=lambda *a, **k: None)
    spec = importlib.util.spec_from_file_location("jaxmarl_ippo_ff_mpe", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.wandb = types.SimpleNamespace(log=lambda *a, **k: None)
    return module


def _number(value):
    if isinstance(value, str):
        try:
            number = float(value)
        except ValueError:
            return value
        return int(number) if number.is_integer() else number
    return value


def run_jaxmarl(script: str, seeds: int, env_steps: int | None) -> dict:
    import jax
    import numpy as np
    import yaml

    module = load_jaxmarl_script(script)
    with open(os.path.join(os.path.dirname(script), "config", "ippo_ff_mpe.yaml")) as f:
        config = yaml.safe_load(f)
    # PyYAML reads `1e7` (no dot) as a string; OmegaConf, JaxMARL's loader, as a number.
    config = {k: _number(v) for k, v in config.items()}
    config["NUM_SEEDS"] = seeds
    if env_steps:
        config["TOTAL_TIMESTEPS"] = env_steps
    keys = jax.random.split(jax.random.PRNGKey(config["SEED"]), seeds)
    started = time.perf_counter()
    train = jax.jit(jax.vmap(module.make_train(dict(config))))
    compiled = train.lower(keys).compile()
    compile_s = time.perf_counter() - started
    started = time.perf_counter()
    out = jax.block_until_ready(compiled(keys))
    run_s = time.perf_counter() - started
    returns = np.asarray(out["metrics"]["returned_episode_returns"])  # [seeds, updates]
    per_seed = end_mean(returns)
    steps = int(config["NUM_ENVS"] * config["NUM_STEPS"] * returns.shape[1])  # env steps a seed
    return {
        "script": os.path.abspath(script),
        "script_sha256": hashlib.sha256(open(script, "rb").read()).hexdigest(),
        "config": config,
        "seeds": seeds,
        "env_steps_per_seed": steps,
        "compile_s": round(compile_s, 2),
        "run_s": round(run_s, 2),
        "env_sps": round(steps * seeds / run_s, 1),
        "agent_sps": round(steps * seeds * NUM_AGENTS / run_s, 1),
        "training_return_jaxmarl_units": [round(float(r), 3) for r in per_seed],
        "training_return_per_agent": [round(float(r) / NUM_AGENTS, 3) for r in per_seed],
    }


def run_ours(seeds: int, env_steps: int | None) -> dict:
    results = []
    for seed in range(seeds):
        with tempfile.TemporaryDirectory() as tmp:
            work = os.path.join(tmp, "run")
            cmd = [sys.executable, os.path.join(ROOT, "scripts", "train.py"), "--config", CONFIG]
            cmd += ["--workdir", work, "--quiet", f"--config.seed={seed}"]
            if env_steps:
                cmd.append(f"--config.total_env_steps={env_steps * NUM_AGENTS}")
            started = time.perf_counter()
            subprocess.run(cmd, check=True)
            process_s = time.perf_counter() - started
            with open(os.path.join(work, "summary.json")) as f:
                summary = json.load(f)
            with open(os.path.join(work, "metrics.jsonl")) as f:
                records = [json.loads(line) for line in f]
        train = [r["charts/episode_return"] for r in records if "charts/episode_return" in r]
        results.append(
            {
                "seed": seed,
                "process_s": round(process_s, 2),
                "run_s": summary["wall_time_s"],
                "startup_s": summary["startup_s"],  # to the first step: builds and compiles
                "agent_steps": summary["env_steps"],
                "training_return_per_agent": round(float(end_mean(train)), 3),
                "final_greedy_eval_per_agent": round(summary["final_eval_return"], 3),
            }
        )
    agent_steps = sum(r["agent_steps"] for r in results)
    run_s = sum(r["run_s"] - r["startup_s"] for r in results)  # as JaxMARL's: compiles apart
    return {
        "config": os.path.relpath(CONFIG, ROOT),
        "seeds": results,
        "agent_sps": round(agent_steps / run_s, 1),
        "env_sps": round(agent_steps / NUM_AGENTS / run_s, 1),
        "training_return_jaxmarl_units": [
            round(r["training_return_per_agent"] * NUM_AGENTS, 3) for r in results
        ],
    }


def compare_returns(sweep_path: str, jaxmarl_path: str) -> dict:
    """Training returns at the end, both sides in both units: this library's from a learning
    sweep of the config (`benchmarks/learning.py`: each seed's logged training returns, the
    mean of the last tenth), JaxMARL's from this script's JSON (its seeds, vmapped)."""
    import numpy as np

    with open(sweep_path) as f:
        sweep = json.load(f)
    with open(jaxmarl_path) as f:
        jaxmarl = json.load(f)["jaxmarl"]
    ours = []
    for seed in sweep["per_seed"]:
        curve = [r for _, r in seed["train_curve"]]
        ours.append(float(end_mean(curve)))
    theirs = jaxmarl["training_return_per_agent"]
    side = lambda xs: {  # noqa: E731
        "per_agent": [round(x, 3) for x in xs],
        "jaxmarl_units": [round(x * NUM_AGENTS, 3) for x in xs],
        "mean_per_agent": round(float(np.mean(xs)), 3),
        "mean_jaxmarl_units": round(float(np.mean(xs)) * NUM_AGENTS, 3),
    }
    ahead = sum(a > b for a in ours for b in theirs)
    return {
        "what": "training return at the end (the mean over the last tenth of the updates)",
        "pairs_ours_ahead": f"{ahead} of {len(ours) * len(theirs)}",
        "ours": {"sweep": os.path.relpath(sweep_path, ROOT), **side(ours)},
        "jaxmarl": {"file": os.path.relpath(jaxmarl_path, ROOT), **side(theirs)},
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--script", help="JaxMARL's baselines/IPPO/ippo_ff_mpe.py")
    parser.add_argument("--seeds", type=int, default=1)
    parser.add_argument("--env-steps", type=int, default=None, help="default: JaxMARL's 1e7")
    parser.add_argument("--only", choices=("jaxmarl", "ours"), default=None)
    parser.add_argument("--out", required=True)
    parser.add_argument(
        "--compare-returns",
        nargs=2,
        metavar=("SWEEP_JSON", "JAXMARL_JSON"),
        help="run nothing: write the two sides' final training returns (a learning sweep of "
        "the config, this script's JSON of JaxMARL's seeds) to --out",
    )
    provenance.add_argument(parser)
    args = parser.parse_args(argv)
    if args.compare_returns:
        with open(args.out, "w") as f:
            json.dump(compare_returns(*args.compare_returns), f, indent=1)
        return 0
    if args.only != "ours" and not (args.script and os.path.isfile(args.script)):
        print(f"error: --script {args.script!r} is not JaxMARL's ippo_ff_mpe.py; give its path")
        return 2
    origin = provenance.capture(args.allow_dirty, devices=False)
    result = {"provenance": origin, "note": "one run each, one after the other, same machine"}
    for side, run in (
        ("jaxmarl", lambda: run_jaxmarl(args.script, args.seeds, args.env_steps)),
        ("ours", lambda: run_ours(args.seeds, args.env_steps)),
    ):
        if args.only in (None, side):
            result[side] = run()
            with open(args.out, "w") as f:
                json.dump(result, f, indent=1)
            print(side, json.dumps(result[side])[:400], flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
