"""SAC's env steps per second on MuJoCo, side by side: CleanRL's `sac_continuous_action.py` and
this library's `configs/sac_mujoco.py`, one run each, one after the other on the same machine,
at the same update ratio (one gradient step of 256 transitions per env step).

CleanRL's side is its unmodified script (give a checkout's path: github.com/vwxyzjn/cleanrl,
`cleanrl/sac_continuous_action.py` with `cleanrl_utils/` beside it; the results name the file's
hash) run by a Python that has its dependencies (torch CPU, `gymnasium[mujoco]==0.29.1`, tyro,
tensorboard: `--cleanrl-python`), on the CPU (`--cuda False`). It prints `SPS:` every 100
steps once learning starts; this script timestamps those lines as they arrive, so the rate is
env steps over wall seconds between the first and the last of them: the learning phase alone,
its imports and warm-up of uniform actions left out.

This library's side is `scripts/train.py --config configs/sac_mujoco.py` in a process of its
own, evaluations and checkpoints off, its rate the same way: env steps over wall seconds
between the first log record after the replay reached `min_size` (learning started) and the
last. Two variants: the config as it is (4 gradient steps of 256 per learner call) and
`--minibatches 1` (one learner call per gradient step, CleanRL's structure).

    python benchmarks/cleanrl_sac.py --cleanrl-dir ~/cleanrl --cleanrl-python ~/venv/bin/python \
        --env-steps 20000 --out benchmarks/results/cpu/sac_vs_cleanrl_halfcheetah.json

Writes the JSON as each side ends (`--only cleanrl|ours|ours_1` runs one).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

import provenance  # noqa: E402

CONFIG = os.path.join(ROOT, "configs", "sac_mujoco.py")
LEARNING_STARTS = 5_000  # CleanRL's default and the config's replay.min_size
PRINT_EVERY = 100  # CleanRL prints SPS on the steps 100 divides, after learning_starts


def rate(points: list[tuple[int, float]]) -> float:
    """Env steps per second between the first and the last `(env_steps, seconds)` point."""
    (s0, t0), (s1, t1) = points[0], points[-1]
    return (s1 - s0) / (t1 - t0)


def run_cleanrl(python: str, checkout: str, env_id: str, steps: int, seed: int) -> dict:
    script = os.path.join(checkout, "cleanrl", "sac_continuous_action.py")
    with open(script, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()[:16]
    cmd = [
        python,
        "-u",
        script,
        f"--env-id={env_id}",
        f"--total-timesteps={steps}",
        f"--learning-starts={LEARNING_STARTS}",
        f"--seed={seed}",
        "--no-cuda",
    ]
    env = {**os.environ, "PYTHONPATH": checkout}
    points, start = [], time.monotonic()
    with tempfile.TemporaryDirectory() as cwd:  # its runs/ (TensorBoard) land here
        proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, text=True)
        step = LEARNING_STARTS + PRINT_EVERY
        for line in proc.stdout:
            if line.startswith("SPS:"):
                points.append((step, time.monotonic()))
                step += PRINT_EVERY
        code = proc.wait()
    if code != 0 or len(points) < 2:
        return {"error": f"exit {code}, {len(points)} SPS lines", "command": cmd}
    return {
        "script": os.path.relpath(script, checkout),
        "script_sha256_16": digest,
        "command": " ".join(cmd[1:]),
        "process_s": round(time.monotonic() - start, 1),
        "learning_sps": round(rate(points), 1),
        "measured_steps": [points[0][0], points[-1][0]],
    }


def run_ours(env_id: str, steps: int, seed: int, minibatches: int | None) -> dict:
    overrides = [
        f"--config.env_id={env_id}",
        f"--config.total_env_steps={steps}",
        f"--config.seed={seed}",
        "--config.eval_every_updates=0",
        "--config.checkpoint_every_updates=0",
        "--config.keep_best_checkpoints=0",
        "--config.log_every_updates=50",
    ]
    if minibatches == 1:  # one learner call per gradient step of 256
        overrides += ["--config.algo.minibatches=1", "--config.batch_size=256"]
    with tempfile.TemporaryDirectory() as workdir:
        cmd = [sys.executable, os.path.join(ROOT, "scripts", "train.py"), "--config", CONFIG]
        cmd += ["--workdir", os.path.join(workdir, "run"), *overrides]
        start = time.monotonic()
        proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
        process_s = time.monotonic() - start
        if proc.returncode != 0:
            return {"error": proc.stderr[-2000:], "command": cmd}
        with open(os.path.join(workdir, "run", "metrics.jsonl")) as f:
            records = [json.loads(line) for line in f]
    learned = [
        (r["env_steps"], r["wall_time_s"])
        for r in records
        if "losses/critic_loss" in r and r["env_steps"] > LEARNING_STARTS
    ]
    return {
        "config": os.path.relpath(CONFIG, ROOT),
        "overrides": overrides,
        "process_s": round(process_s, 1),
        "learning_sps": round(rate(learned), 1),
        "measured_steps": [learned[0][0], learned[-1][0]],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cleanrl-dir", help="a CleanRL checkout (cleanrl/, cleanrl_utils/)")
    parser.add_argument("--cleanrl-python", default=sys.executable)
    parser.add_argument("--env-id", default="HalfCheetah-v4")
    parser.add_argument("--env-steps", type=int, default=20_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--only", choices=("cleanrl", "ours", "ours_1"), default=None)
    parser.add_argument("--out", required=True)
    provenance.add_argument(parser)
    args = parser.parse_args(argv)
    script = os.path.join(args.cleanrl_dir or "", "cleanrl", "sac_continuous_action.py")
    if args.only in (None, "cleanrl") and not os.path.isfile(script):
        print(
            f"error: --cleanrl-dir {args.cleanrl_dir!r} holds no cleanrl/sac_continuous_action.py"
        )
        return 2
    if args.env_steps <= LEARNING_STARTS + 10 * PRINT_EVERY:
        print(f"error: --env-steps {args.env_steps} leaves no learning phase; give > 6000")
        return 2
    origin = provenance.capture(args.allow_dirty, devices=False)
    result = {
        "provenance": origin,
        "env_id": args.env_id,
        "env_steps": args.env_steps,
        "note": "one run each, one after the other, same machine; SPS over the learning phase",
    }
    sides = (
        (
            "cleanrl",
            lambda: run_cleanrl(
                args.cleanrl_python, args.cleanrl_dir, args.env_id, args.env_steps, args.seed
            ),
        ),
        ("ours", lambda: run_ours(args.env_id, args.env_steps, args.seed, None)),
        ("ours_1", lambda: run_ours(args.env_id, args.env_steps, args.seed, 1)),
    )
    for side, run in sides:
        if args.only in (None, side):
            result[side] = run()
            with open(args.out, "w") as f:
                json.dump(result, f, indent=1)
            print(side, json.dumps(result[side])[:400], flush=True)
    theirs = result.get("cleanrl", {}).get("learning_sps")
    for side in ("ours", "ours_1"):
        if theirs and result.get(side, {}).get("learning_sps"):
            result[f"{side}_over_cleanrl"] = round(result[side]["learning_sps"] / theirs, 2)
    with open(args.out, "w") as f:
        json.dump(result, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
