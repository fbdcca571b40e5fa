"""A long training run's resident memory (RSS): does the trainer leak?

    python benchmarks/soak.py --minutes 20
    python benchmarks/soak.py --minutes 60 --config configs/ppo_cartpole.py --sample-s 10 \
        --config.eval_episodes=10

Runs `scripts/train.py` as a subprocess for `--minutes` of training wall time (no step budget,
no early stop at an evaluation return; evaluation and checkpoints stay at the config's settings,
so those paths are soaked too; `--config.field=value` overrides are passed on and win). Every
`--sample-s` seconds this process reads the trainer's RSS (its child processes summed in, if any)
with psutil. "Start" is the first sample at least `--warmup-s` after the trainer's first line in
`metrics.jsonl` (compilation and start-up excluded), "end" the last sample before it exits.
Reports start, end, the peak after warm-up, growth (end / start - 1), a least-squares slope in
MiB per hour over the samples after warm-up, the run's env steps, SPS, exit code and stop reason,
and every sample; writes `benchmarks/results/<device>/soak_<config>.json` (or `--out`). Exits 1
if training fails, 2 on a bad argument (one line, nothing written).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from typing import IO, NoReturn

import numpy as np
import provenance
import psutil

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
TRAIN = os.path.join(ROOT, "scripts", "train.py")
MIB = 2**20
GRACE_S = 600.0  # past --minutes: start-up, compilation, the final evaluation and save


def _fail(message: str) -> NoReturn:
    print(f"error: {message}", file=sys.stderr)
    sys.exit(2)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.error = _fail  # one line, exit 2 (argparse prints the usage too)
    parser.add_argument("--minutes", type=float, required=True, help="training wall time")
    parser.add_argument("--config", default=os.path.join(ROOT, "configs", "impala_cartpole.py"))
    parser.add_argument("--sample-s", type=float, default=5.0, help="seconds between samples")
    parser.add_argument(
        "--warmup-s", type=float, default=60.0, help="after the first log line, not measured"
    )
    parser.add_argument("--out", default=None, help="default: results/<device>/soak_<name>.json")
    parser.add_argument("--workdir", default=None, help="the run's directory (default: a tmp)")
    provenance.add_argument(parser)
    return parser


def _check(args: argparse.Namespace, extra: list[str]) -> None:
    for flag, value, low in (("--minutes", args.minutes, 0), ("--sample-s", args.sample_s, 0)):
        if not low < value < math.inf:
            _fail(f"{flag} {value:g} must be a finite number > {low}")
    if not 0 <= args.warmup_s < math.inf:
        _fail(f"--warmup-s {args.warmup_s:g} must be a finite number >= 0")
    if args.warmup_s + 2 * args.sample_s > args.minutes * 60:
        _fail(
            f"--warmup-s {args.warmup_s:g} + 2 x --sample-s {args.sample_s:g} does not fit in "
            f"--minutes {args.minutes:g}; raise --minutes or lower them"
        )
    bad = [a for a in extra if not a.startswith("--config.")]
    if bad:
        _fail(f"unrecognized arguments: {' '.join(bad)} (overrides are --config.field=value)")
    if args.out and os.path.isdir(args.out):
        _fail(f"--out {args.out} is a directory; give a .json file path")


PF_EXITING = 0x4  # the kernel's task flag: do_exit has begun


def exiting(pid: int) -> bool:
    """Whether process `pid` has begun to exit (Linux: the flags field of `/proc/PID/stat`;
    False where there is no such file)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()  # after "pid (comm)", comm may hold ")"
    except OSError:
        return False
    return bool(int(fields[6]) & PF_EXITING)


def rss_mib(process: psutil.Process) -> float | None:
    """RSS of `process` and all its descendants in MiB; None once it is gone, exiting or a
    zombie. An exiting process frees its pages before it turns zombie, so its RSS falls towards
    0 in between (a sample of 0.00 MiB failed a CI run): its flags are read after its memory,
    so a sample taken before the exit began is kept and one taken after is not."""
    try:
        if process.status() == psutil.STATUS_ZOMBIE:  # exited, not yet reaped: RSS reads 0
            return None
        tree = [process, *process.children(recursive=True)]
    except psutil.Error:
        return None
    total = 0
    for p in tree:
        try:
            rss = p.memory_info().rss
        except psutil.Error:  # a child that just ended: skip it; the trainer itself: gone
            rss = 0
        if p is process and (rss < MIB or exiting(p.pid)):  # no live trainer is under 1 MiB
            return None
        total += rss
    return total / MIB


def watch(
    proc: subprocess.Popen, metrics: str, sample_s: float, limit_s: float
) -> tuple[list[list[float]], float | None, bool]:
    """Samples `proc`'s RSS every `sample_s` until it exits. Returns the `[seconds, rss_mib]`
    samples, when `metrics` got its first line (seconds after the start), and whether `proc` ran
    past `limit_s` (it is then stopped: SIGTERM, SIGKILL a minute later)."""
    process, start = psutil.Process(proc.pid), time.monotonic()
    samples: list[list[float]] = []
    first_log, next_sample = None, 0.0
    size = lambda: os.path.getsize(metrics) if os.path.exists(metrics) else 0  # noqa: E731
    before = size()  # a --workdir may hold an earlier run's log (without checkpoints)
    while proc.poll() is None:
        t = time.monotonic() - start
        if first_log is None and size() > before:
            first_log = t
        if t >= next_sample:
            rss = rss_mib(process)
            if rss is not None:
                samples.append([round(t, 2), round(rss, 2)])
            while next_sample <= t:
                next_sample += sample_s
        if t > limit_s:
            stop(proc)
            return samples, first_log, True
        time.sleep(min(0.1, sample_s / 2))
    return samples, first_log, False


def stop(proc: subprocess.Popen) -> None:
    """SIGTERM (the trainer saves and exits), SIGKILL a minute later."""
    proc.terminate()
    try:
        proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def stats(samples: list[list[float]], from_s: float) -> dict | None:
    """Start, end, peak, growth and slope over the samples at or after `from_s`."""
    after = [s for s in samples if s[0] >= from_s]
    if not after:
        return None
    t, rss = np.array(after).T
    start, end = after[0], after[-1]
    slope = float(np.polyfit(t / 3600, rss, 1)[0]) if len(after) > 1 else None
    return {
        "start_s": start[0],
        "start_rss_mib": start[1],
        "end_s": end[0],
        "end_rss_mib": end[1],
        "peak_rss_mib": float(rss.max()),
        "growth_pct": round(100 * (end[1] / start[1] - 1), 3),
        "slope_mib_per_h": None if slope is None else round(slope, 2),
        "samples_after_warmup": len(after),
    }


def _read_json(path: str) -> dict | None:
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def _tail(stream: IO[bytes], lines: int = 20) -> list[str]:
    stream.seek(0)
    return stream.read().decode(errors="replace").strip().splitlines()[-lines:]


def main(argv: list[str] | None = None) -> int:
    args, extra = _parser().parse_known_args(argv)
    _check(args, extra)
    sys.path.insert(0, HERE)
    from scaling import _backend, _first_error
    from throughput import RESULTS, _default_name, _version

    from jaxrl_dist.config import ConfigError
    from jaxrl_dist.config.cli import parse_args

    run_s = args.minutes * 60
    soaked = [  # no step budget, no early stop; the caller's overrides last, so they win
        f"--config.max_wall_time_s={run_s}",
        "--config.total_env_steps=10_000_000_000",
        "--config.stop_at_eval_return=none",
        *extra,
    ]
    try:  # the overrides, before anything starts
        config, _ = parse_args(["--config", args.config, *soaked, "--workdir", "unused"])
    except ConfigError as e:
        _fail(str(e))
    # devices=False: in a child, so this process never holds an accelerator.
    origin = provenance.capture(args.allow_dirty, config, devices=False)
    backend, _, folder = _backend()
    name = "soak_" + _default_name(args.config).removeprefix("impala_")
    out = args.out or os.path.join(RESULTS, folder, f"{name}.json")
    workdir = args.workdir or tempfile.mkdtemp(prefix="jaxrl_dist_soak_")
    cmd = [sys.executable, TRAIN, "--config", args.config, "--workdir", workdir, "--quiet", *soaked]
    print(f"{name}: {args.minutes:g} min of training, RSS every {args.sample_s:g}s", flush=True)
    signal.signal(signal.SIGTERM, lambda signum, _: sys.exit(128 + signum))  # to the finally
    try:
        with tempfile.TemporaryFile() as stderr:
            proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=stderr)
            try:
                metrics = os.path.join(workdir, "metrics.jsonl")
                samples, first_log, hung = watch(proc, metrics, args.sample_s, run_s + GRACE_S)
            finally:
                if proc.poll() is None:  # this process was interrupted (Ctrl-C, SIGTERM)
                    stop(proc)
            tail = _tail(stderr)
        summary = _read_json(os.path.join(workdir, "summary.json"))
    finally:
        if args.workdir is None:
            shutil.rmtree(workdir, ignore_errors=True)
    if proc.returncode == 2:  # the trainer refused the config on this machine: nothing ran
        _fail(f"train.py refused the run: {(tail or ['?'])[-1].removeprefix('error: ')}")
    if proc.returncode != 0 or summary is None or hung:
        why = _first_error("\n".join(tail)) or "no summary.json"
        if hung:
            why = f"still running {GRACE_S:.0f}s past --minutes, stopped"
        print(f"error: training failed (exit code {proc.returncode}): {why}", file=sys.stderr)
        print("\n".join(f"  {line}" for line in tail), file=sys.stderr)
        return 1
    measured = None if first_log is None else stats(samples, first_log + args.warmup_s)
    if measured is None:
        print(
            f"error: no RSS sample {args.warmup_s:g}s after the first log line (at "
            f"{first_log}s); raise --minutes or lower --warmup-s",
            file=sys.stderr,
        )
        return 1
    result = {
        "name": name,
        "command": " ".join(["python", *(sys.argv if argv is None else ["soak.py", *argv])]),
        "train_command": " ".join(["python", *cmd[1:]]),
        "config": args.config,
        "overrides": extra,
        "minutes": args.minutes,
        "sample_s": args.sample_s,
        "warmup_s": args.warmup_s,
        "first_log_s": first_log,
        **measured,
        "exit_code": proc.returncode,
        "stop_reason": summary["stop_reason"],
        "env_steps": summary["env_steps"],
        "updates": summary["updates"],
        "sps": summary["sps"],
        "wall_time_s": summary["wall_time_s"],
        "evals": len(summary["evals"]),
        "machine": {
            "platform": platform.platform(),
            "device": backend,
            "cpu_count": os.cpu_count(),
            "python": platform.python_version(),
            "versions": {p: _version(p) for p in ("jax", "jaxlib", "envpool", "psutil")},
            "date": time.strftime("%Y-%m-%d"),
        },
        "provenance": origin,
        "samples": samples,
    }
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    with open(out, "w") as f:
        json.dump(result, f, indent=2)
    m = measured
    slope = "n/a" if m["slope_mib_per_h"] is None else f"{m['slope_mib_per_h']:+.1f} MiB/h"
    print(
        f"{result['env_steps']:,} env steps at {result['sps']:,.0f} SPS, "
        f"{result['evals']} evaluations, stopped: {result['stop_reason']}\n"
        f"RSS start {m['start_rss_mib']:.1f} MiB (at {m['start_s']:.0f}s; first log line at "
        f"{first_log:.0f}s), end {m['end_rss_mib']:.1f} MiB (at {m['end_s']:.0f}s), peak "
        f"{m['peak_rss_mib']:.1f}; growth {m['growth_pct']:+.2f}%, slope {slope} over "
        f"{m['samples_after_warmup']} samples\nwritten to {out}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
