"""One seed of a learning sweep (`learning.py`): its `scripts/train.py` process, the busy
background load beside it, an optional evaluation of its checkpoint against an opponent, and
what its work dir says it reached (`seed_result`). A finished seed leaves `seed_result.json` in
its work dir: under `--keep-runs`, a sweep run again takes it back instead of training the seed
again (`reused_seed`), so a sweep longer than a sitting goes on where it stopped."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from typing import Any

from learning_report import percentiles
from provenance import short_commit

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
TRAIN = os.path.join(ROOT, "scripts", "train.py")
SPIN = "while True: pass"  # one core's worth of pure-Python work
RESULT_FILE = "seed_result.json"  # a finished seed's outcome, beside its run


class BackgroundLoad:
    """`n` busy processes for the lifetime of a `with` block (killed on exit, whatever happens)."""

    def __init__(self, n: int):
        self._n, self._procs = n, []

    def __enter__(self) -> BackgroundLoad:
        self._procs = [subprocess.Popen([sys.executable, "-c", SPIN]) for _ in range(self._n)]
        return self

    def __exit__(self, *exc) -> None:
        for proc in self._procs:
            proc.kill()
        for proc in self._procs:
            proc.wait()


def run_seed(args, extra: list[str], seed: int, workdir: str) -> dict[str, Any]:
    """One `scripts/train.py` process; returns what it reached (see `seed_result`)."""
    cmd = [
        sys.executable,
        TRAIN,
        "--config",
        args.config,
        "--workdir",
        workdir,
        f"--config.seed={seed}",
        *(arg.replace("{seed}", str(seed)) for arg in extra),
    ]
    os.makedirs(workdir, exist_ok=True)
    start = time.monotonic()
    with open(os.path.join(workdir, "train.log"), "w") as log:
        try:
            proc = subprocess.run(
                cmd, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, timeout=args.timeout_s
            )
            returncode = proc.returncode
        except subprocess.TimeoutExpired:
            returncode = None
    command_s = time.monotonic() - start
    result = seed_result(
        seed,
        workdir,
        returncode,
        command_s,
        args.target,
        args.budget,
        _metric_names(args.metrics),
        args.eval_key,
    )
    if args.also_eval and result["error"] is None:
        result["also_eval"] = also_eval(workdir, args.also_eval, args.also_eval_episodes)
    keep_result(args, extra, seed, workdir, result)
    return result


def sweep_key(args, extra: list[str], seed: int) -> dict[str, Any]:
    """What makes a seed's outcome the one a sweep asks for: its command and how it is judged."""
    fields = ("config", "load", "target", "budget", "eval_key", "metrics", "also_eval")
    return {"seed": seed, "overrides": list(extra), **{f: getattr(args, f) for f in fields}}


def keep_result(args, extra: list[str], seed: int, workdir: str, result: dict) -> None:
    """Writes a finished seed's outcome into its work dir (`RESULT_FILE`), with the commit it
    ran at; a crashed or timed-out seed leaves none (it runs again)."""
    if result["error"] is not None:
        return
    commit = short_commit(ROOT)
    with open(os.path.join(workdir, RESULT_FILE), "w") as f:
        json.dump(
            {"sweep": sweep_key(args, extra, seed), "git_commit": commit, "result": result}, f
        )


def reused_seed(args, extra: list[str], seed: int, workdir: str) -> dict[str, Any] | None:
    """The outcome a finished run of this seed left in `workdir` for the same sweep, marked
    with the commit it ran at; None otherwise, and a work dir left by another sweep, or by a
    run that did not finish, is cleared for the seed to run again."""
    path = os.path.join(workdir, RESULT_FILE)
    if os.path.exists(path):
        with open(path) as f:
            kept = json.load(f)
        if kept["sweep"] == json.loads(json.dumps(sweep_key(args, extra, seed))):
            return {**kept["result"], "reused_from": kept["git_commit"]}
    if os.path.exists(workdir):
        print(f"seed {seed}: {workdir} holds no finished run of this sweep; it runs again")
        shutil.rmtree(workdir)
    return None


def also_eval(workdir: str, opponent: str, episodes: int) -> dict[str, Any]:
    """`scripts/evaluate.py` of the run's final checkpoint against `opponent`: its statistics
    (return, win/draw/loss rates, ...), or `{"error": ...}`."""
    out = os.path.join(workdir, f"also_eval_{opponent}.json")
    cmd = [
        sys.executable,
        os.path.join(ROOT, "scripts", "evaluate.py"),
        workdir,
        "--opponent",
        opponent,
        "--episodes",
        str(episodes),
        "--json",
        out,
    ]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        return {"opponent": opponent, "error": proc.stderr.strip()[-500:]}
    with open(out) as f:
        record = json.load(f)
    return {
        "opponent": opponent,
        **{k: v for k, v in record.items() if isinstance(v, float) or k == "episodes"},
    }


def _metric_names(text: str) -> list[str]:
    return [name.strip() for name in text.split(",") if name.strip()]


def seed_result(
    seed: int,
    workdir: str,
    returncode: int | None,
    command_s: float,
    target: float,
    budget: int,
    metric_names: list[str] = (),
    eval_key: str = "return",
) -> dict[str, Any]:
    """A seed's outcome from its work dir: success, steps and seconds to the target, best and
    final evaluation, curves (evaluations from `summary.json`, training return per log line),
    and the 10th/50th/90th percentiles over the run of each of `metric_names`."""
    summary_path = os.path.join(workdir, "summary.json")
    summary = None
    if os.path.exists(summary_path):
        with open(summary_path) as f:
            summary = json.load(f)
    evals = [{**e, "return": e.get(eval_key)} for e in summary["evals"]] if summary else []
    evals = [e for e in evals if e["return"] is not None]  # the statistic judged, as "return"
    reached = [e for e in evals if e["return"] >= target and e["env_steps"] <= budget]
    train_curve, logged = [], {name: [] for name in metric_names}
    metrics_path = os.path.join(workdir, "metrics.jsonl")
    if os.path.exists(metrics_path):
        with open(metrics_path) as f:
            for line in f:
                record = json.loads(line)
                if record.get("charts/episode_return") is not None:
                    train_curve.append([record["env_steps"], record["charts/episode_return"]])
                for name, values in logged.items():
                    if record.get(name) is not None:
                        values.append(record[name])
    error = None
    if returncode != 0 or summary is None:
        tail = _tail(os.path.join(workdir, "train.log"))
        error = "timed out" if returncode is None else f"exit {returncode}: {tail}"
    return {
        "seed": seed,
        "success": bool(reached),
        "env_steps_to_target": reached[0]["env_steps"] if reached else None,
        "seconds_to_target": reached[0]["wall_time_s"] if reached else None,
        "best_eval_return": max((e["return"] for e in evals), default=None),
        "final_eval_return": evals[-1]["return"] if evals else None,
        "env_steps": summary["env_steps"] if summary else None,
        "stop_reason": summary["stop_reason"] if summary else None,
        "command_s": round(command_s, 2),
        "error": error,
        "metrics": {name: percentiles(values) for name, values in logged.items()},
        "eval_curve": [[e["env_steps"], e["return"]] for e in evals],
        "train_curve": train_curve,
    }


def _tail(path: str, lines: int = 3) -> str:
    try:
        with open(path, errors="replace") as f:
            return " | ".join(f.read().strip().splitlines()[-lines:])
    except OSError:
        return ""
