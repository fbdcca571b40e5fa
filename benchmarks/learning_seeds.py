"""One seed of a learning sweep (`learning.py`): its `scripts/train.py` process, the busy
background load beside it, an optional evaluation of its checkpoint against an opponent, and
what its work dir says it reached (`seed_result`). A finished seed leaves `seed_result.json` in
its work dir: under `--keep-runs`, a sweep run again takes it back instead of training the seed
again (`reused_seed`), so a sweep longer than a sitting goes on where it stopped. A seed that
did not finish (killed with its sitting, timed out) but saved a checkpoint is resumed from it
(`train.py --resume`) when the same sweep of the same code (the commit and any uncommitted
changes) runs again: its `STARTED_FILE` says which sweep and code began it, how long each
attempt ran and how it ended; one that crashed runs again from the start."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from typing import Any

from learning_report import percentiles
from provenance import short_commit, source_state

from jaxrl_dist.run.curves import TRAIN_RETURN, kept_series

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
TRAIN = os.path.join(ROOT, "scripts", "train.py")
SPIN = "while True: pass"  # one core's worth of pure-Python work
EXIT_INTERRUPTED = 130  # train.py's exit after a second Ctrl-C (`config.cli.EXIT_INTERRUPTED`)
RESULT_FILE = "seed_result.json"  # a finished seed's outcome, beside its run
STARTED_FILE = "seed_started.json"  # the sweep and code that began a seed; its attempts
CRASHED = "crashed"  # an attempt's end that is not resumed: its error would come again


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
    """One `scripts/train.py` process (`--resume` when `workdir` holds a checkpoint: an
    unfinished attempt of this sweep, which `reused_seed` kept); returns what it reached (see
    `seed_result`), with `attempts` (every one begun, a killed one too) and `command_s` summed
    over the attempts whose end the harness saw."""
    started = _started(args, extra, seed, workdir)
    resume = _has_checkpoint(workdir)
    cmd = [
        sys.executable,
        TRAIN,
        "--config",
        args.config,
        "--workdir",
        workdir,
        f"--config.seed={seed}",
        *(arg.replace("{seed}", str(seed)) for arg in extra),
        *(["--resume"] if resume else []),
    ]
    os.makedirs(workdir, exist_ok=True)
    started["attempts_s"].append(None)  # begun; its seconds and end once it ends
    started["ends"].append(None)
    _write_started(workdir, started)  # before the run: a kill leaves it to resume from
    start = time.monotonic()
    with open(os.path.join(workdir, "train.log"), "a") as log:
        try:
            proc = subprocess.run(
                cmd, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, timeout=args.timeout_s
            )
            returncode = proc.returncode
        except subprocess.TimeoutExpired:
            returncode = None
    started["attempts_s"][-1] = round(time.monotonic() - start, 2)
    started["ends"][-1] = _end(returncode)
    _write_started(workdir, started)
    result = seed_result(
        seed,
        workdir,
        returncode,
        sum(s for s in started["attempts_s"] if s is not None),
        args.target,
        args.budget,
        _metric_names(args.metrics),
        args.eval_key,
    )
    result["attempts"] = len(started["attempts_s"])
    if args.also_eval and result["error"] is None:
        result["also_eval"] = also_eval(workdir, args.also_eval, args.also_eval_episodes)
    keep_result(args, extra, seed, workdir, result)
    return result


def _started(args, extra: list[str], seed: int, workdir: str) -> dict[str, Any]:
    """`workdir`'s `STARTED_FILE` (this sweep's, of this code: `reused_seed` cleared any
    other), or a new one with no attempts."""
    path = os.path.join(workdir, STARTED_FILE)
    if os.path.exists(path):
        with open(path) as f:
            return json.load(f)
    return {
        "sweep": sweep_key(args, extra, seed),
        "git_commit": short_commit(ROOT),
        "code": _code(),
        "attempts_s": [],
        "ends": [],
    }


def _code() -> dict[str, Any] | None:
    """What the seed's code is: the commit with the checkout's uncommitted changes (their
    hashes, `provenance.source_state`); None outside a git checkout (nothing to tell code
    apart by, so nothing is resumed)."""
    state = source_state(ROOT)
    if state["git_commit"] is None:
        return None
    return {key: state[key] for key in ("git_commit", "diff_sha256", "untracked")}


def _end(returncode: int | None) -> str | None:
    """How an attempt ended, for `_resumable`: "timeout" (`--timeout-s`), "signal" (killed, or
    the clean stop of SIGINT/SIGTERM: 130, or 0 without a result), or `CRASHED` (an error:
    resuming would meet it again)."""
    if returncode is None:
        return "timeout"
    if returncode < 0 or returncode in (0, EXIT_INTERRUPTED):
        return "signal"  # a 0 that left no result (`keep_result`) stopped on a signal
    return CRASHED


def _has_checkpoint(workdir: str) -> bool:
    """Whether the run's `checkpoints/` holds a complete step (Orbax names them by number;
    `checkpoints.store.complete_steps`, without importing JAX here)."""
    path = os.path.join(workdir, "checkpoints")
    return os.path.isdir(path) and any(name.isdigit() for name in os.listdir(path))


def _write_started(workdir: str, started: dict[str, Any]) -> None:
    path = os.path.join(workdir, STARTED_FILE)
    with open(path + ".tmp", "w") as f:
        json.dump(started, f)
    os.replace(path + ".tmp", path)


def sweep_key(args, extra: list[str], seed: int) -> dict[str, Any]:
    """What makes a seed's outcome the one a sweep asks for: its command and how it is judged."""
    fields = ("config", "load", "target", "budget", "eval_key", "metrics", "also_eval")
    return {"seed": seed, "overrides": list(extra), **{f: getattr(args, f) for f in fields}}


def keep_result(args, extra: list[str], seed: int, workdir: str, result: dict) -> None:
    """Writes a finished seed's outcome into its work dir (`RESULT_FILE`), with the commit it
    ran at; a seed that crashed, timed out or stopped on a signal leaves none (the next sweep
    resumes it from its checkpoint, or runs it again after a crash: `reused_seed`)."""
    if result["error"] is not None:
        return
    commit = short_commit(ROOT)
    with open(os.path.join(workdir, RESULT_FILE), "w") as f:
        json.dump(
            {"sweep": sweep_key(args, extra, seed), "git_commit": commit, "result": result}, f
        )


def reused_seed(args, extra: list[str], seed: int, workdir: str) -> dict[str, Any] | None:
    """The outcome a finished run of this seed left in `workdir` for the same sweep, marked
    with the commit it ran at; None otherwise. An unfinished run of this sweep at this commit
    with a checkpoint is kept for `run_seed` to resume; a work dir left by another sweep, at
    another commit or without a checkpoint is cleared for the seed to run again."""
    path = os.path.join(workdir, RESULT_FILE)
    key = json.loads(json.dumps(sweep_key(args, extra, seed)))
    if os.path.exists(path):
        with open(path) as f:
            kept = json.load(f)
        if kept["sweep"] == key:
            return {**kept["result"], "reused_from": kept["git_commit"]}
    if _resumable(workdir, key):
        print(f"seed {seed}: {workdir} holds an unfinished run of this sweep; it resumes")
        return None
    if os.path.exists(workdir):
        print(f"seed {seed}: {workdir} holds no finished run of this sweep; it runs again")
        shutil.rmtree(workdir)
    return None


def _resumable(workdir: str, key: dict[str, Any]) -> bool:
    """Whether `workdir` holds an unfinished attempt of the sweep `key`, begun by this code,
    with a checkpoint to go on from, whose last attempt was stopped (killed, timed out, a
    signal) rather than crashed (and no result of another sweep)."""
    path = os.path.join(workdir, STARTED_FILE)
    if os.path.exists(os.path.join(workdir, RESULT_FILE)) or not os.path.exists(path):
        return False
    with open(path) as f:
        started = json.load(f)
    code = _code()
    same = started["sweep"] == key and code is not None and started.get("code") == code
    crashed = (started.get("ends") or [None])[-1] == CRASHED
    return same and not crashed and _has_checkpoint(workdir)


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
    metrics_path = os.path.join(workdir, "metrics.jsonl")
    keys = [TRAIN_RETURN, *metric_names]
    series = kept_series(metrics_path, keys) if os.path.exists(metrics_path) else {}
    train_curve = [[int(steps), value] for steps, value in series.get(TRAIN_RETURN, [])]
    logged = {name: [value for _, value in series.get(name, [])] for name in metric_names}
    error = None
    if returncode != 0 or summary is None:
        tail = _tail(os.path.join(workdir, "train.log"))
        error = "timed out" if returncode is None else f"exit {returncode}: {tail}"
    elif str(summary.get("stop_reason", "")).startswith("SIG"):  # a clean stop, not the end
        error = f"stopped by {summary['stop_reason']} at {summary['env_steps']:,} env steps"
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
