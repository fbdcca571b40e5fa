"""SPS against actor threads, envs per actor and learner devices, one axis at a time.

    python benchmarks/scaling.py --config configs/impala_cartpole.py --seconds 10 \
        --actor-threads 1,2,4 --envs-per-actor 16,32,64 --learner-devices 1,2,4

Each point is `throughput.py` in its own process (raw EnvPool async and end-to-end training, plus
the learner alone on the learner-devices axis), the other settings as the config has them. On a
CPU-only machine the learner devices are fake CPU devices (`JAX_NUM_CPU_DEVICES`): they share the
same cores, so that axis checks the sharded path's overhead, not a speed-up. On a GPU machine they
are real devices (`learner_device_ids`). Writes `<name>_scaling.json` and `.png`.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
AXES = {
    "actor_threads": "num_actor_threads",
    "envs_per_actor": "envs_per_actor",
    "learner_devices": "learner_device_ids",
}


def _ints(text: str) -> list[int]:
    values = [int(v) for v in text.split(",") if v]
    if not values or min(values) <= 0:
        raise argparse.ArgumentTypeError(f"{text!r}: give positive integers like 1,2,4")
    return values


def _backend() -> tuple[str, int, str]:
    """(platform, local device count, results folder) from a child process, so this process
    never holds an accelerator the points need."""
    code = (
        "import jax,sys; sys.path.insert(0, sys.argv[1]); import throughput; "
        "print(jax.default_backend(), jax.local_device_count(), throughput.device_dir())"
    )
    out = subprocess.run([sys.executable, "-c", code, HERE], capture_output=True, text=True)
    if out.returncode:
        raise SystemExit(f"error: could not start JAX: {out.stderr.strip().splitlines()[-1]}")
    platform, count, folder = out.stdout.split()
    return platform, int(count), folder


def _first_error(stderr: str) -> str | None:
    """The line that says what went wrong: an XLA fatal/error log line (`F1123 ...`) or a
    Python exception, rather than the stack frames that follow a C++ crash."""
    lines = stderr.strip().splitlines()
    for line in lines:
        if re.match(r"[FE]\d{4} ", line):
            return line.strip()
    errors = [ln for ln in lines if re.match(r"\w*(Error|Exception)\b", ln)]
    return errors[-1].strip() if errors else (lines[-1].strip() if lines else None)


def point(axis: str, value: int, args, extra: list[str], platform: str) -> dict:
    """Runs one point; returns its settings and measured SPS."""
    overrides, env = [], dict(os.environ)
    stages = "raw_async,end_to_end"
    if axis == "actor_threads":
        overrides.append(f"--config.sebulba.num_actor_threads={value}")
        if args.env_threads_total:  # keep the cores busy: split them over the actors' pools
            per_actor = max(1, args.env_threads_total // value)
            overrides.append(f"--config.sebulba.env_threads_per_actor={per_actor}")
    elif axis == "envs_per_actor":
        overrides.append(f"--config.sebulba.envs_per_actor={value}")
    else:
        stages = "learner,end_to_end"
        if platform == "cpu":
            env["JAX_NUM_CPU_DEVICES"] = str(value)
        overrides.append(f"--config.learner_device_ids={tuple(range(value))}")
    with tempfile.TemporaryDirectory() as out_dir:
        cmd = [
            sys.executable,
            os.path.join(HERE, "throughput.py"),
            "--config",
            args.config,
            *extra,
            *overrides,
            "--seconds",
            str(args.seconds),
            "--stages",
            stages,
            "--out-dir",
            out_dir,
            "--name",
            "point",
            "--no-plot",
            "--allow-dirty",  # this sweep took the tree's provenance (or refused it) itself
        ]
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
        path = os.path.join(out_dir, "point.json")
        if not os.path.exists(path):
            error = _first_error(proc.stderr) or f"exit code {proc.returncode}"
            return {"axis": axis, "value": value, "overrides": overrides, "error": error}
        with open(path) as f:
            result = json.load(f)
    measured = result["stages"]
    row = {"axis": axis, "value": value, "overrides": overrides, "settings": result["settings"]}
    errors = [f"{k}: {v['error']}" for k, v in measured.items() if "error" in v]
    if errors:
        row["error"] = "; ".join(errors)
    ok = lambda stage: stage in measured and "error" not in measured[stage]  # noqa: E731
    if ok("end_to_end"):
        row["end_to_end_sps"] = measured["end_to_end"]["sps"]
        row["end_to_end_timers_s_per_s"] = measured["end_to_end"]["timers_s_per_s"]
    if ok("raw_async"):
        row["raw_async_sps"] = measured["raw_async"]["sps"]
        if "end_to_end_sps" in row:
            row["end_to_end_over_raw_async"] = row["end_to_end_sps"] / row["raw_async_sps"]
    if ok("learner"):
        row["learner_samples_per_s"] = measured["learner"]["resident_samples_per_s"]
        row["learner_with_transfer_samples_per_s"] = measured["learner"][
            "with_transfer_samples_per_s"
        ]
    row["environment"] = result["environment"]
    return row


def plot(result: dict, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    axes_run = [a for a in AXES if any(r["axis"] == a for r in result["points"])]
    fig, axes = plt.subplots(1, len(axes_run), figsize=(5 * len(axes_run), 3.8), squeeze=False)
    for ax, axis in zip(axes[0], axes_run, strict=True):
        rows = [r for r in result["points"] if r["axis"] == axis]
        xs = [r["value"] for r in rows]
        series = (
            ("end_to_end_sps", "end-to-end training"),
            ("raw_async_sps", "raw EnvPool async"),
            ("learner_samples_per_s", "learner alone (samples/s)"),
        )
        for key, label in series:
            if any(key in r for r in rows):
                ax.plot(xs, [r.get(key, float("nan")) for r in rows], "o-", label=label)
        ax.set_xscale("log", base=2)
        ax.set_xticks(xs, [str(x) for x in xs])
        ax.set_xlabel(axis.replace("_", " "))
        ax.set_ylabel("steps per second")
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    ok = [r for r in result["points"] if "environment" in r]
    env = ok[0]["environment"] if ok else {}
    fig.suptitle(f"{result['name']}: {env.get('device', '?')}, {env.get('cpu_count', '?')} cores")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", required=True)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--actor-threads", type=_ints, default=None)
    parser.add_argument("--envs-per-actor", type=_ints, default=None)
    parser.add_argument("--learner-devices", type=_ints, default=None)
    parser.add_argument(
        "--env-threads-total",
        type=int,
        default=0,
        help="on the actor-threads axis, give each actor's EnvPool this many threads / actors",
    )
    parser.add_argument("--name", default=None)
    parser.add_argument("--out-dir", default=None)
    sys.path.insert(0, HERE)
    import provenance
    from throughput import _default_name

    provenance.add_argument(parser)
    args, extra = parser.parse_known_args(argv)

    from jaxrl_dist.config import ConfigError
    from jaxrl_dist.config.cli import parse_args

    try:
        config, _ = parse_args(["--config", args.config, *extra, "--workdir", "unused"])
    except ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    platform, device_count, folder = _backend()
    sweeps = {
        "actor_threads": args.actor_threads,
        "envs_per_actor": args.envs_per_actor,
        "learner_devices": args.learner_devices,
    }
    if platform != "cpu" and args.learner_devices:
        sweeps["learner_devices"] = [n for n in args.learner_devices if n <= device_count]
    if not any(sweeps.values()):
        print(
            "error: give at least one of --actor-threads, --envs-per-actor, --learner-devices",
            file=sys.stderr,
        )
        return 2
    # devices=False: the points run in children, so this process never holds an accelerator.
    origin = provenance.capture(args.allow_dirty, config, devices=False)
    name = (args.name or _default_name(args.config)) + "_scaling"
    result = {
        "name": name,
        "command": " ".join(["python", *(argv or sys.argv)]),
        "config": args.config,
        "overrides": extra,
        "seconds": args.seconds,
        "provenance": origin,
        "points": [],
    }
    out_dir = args.out_dir or os.path.join(HERE, "results", folder)
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, f"{name}.json")
    for axis, values in sweeps.items():
        for value in values or []:
            row = point(axis, value, args, extra, platform)
            result["points"].append(row)
            shown = {k: round(v) for k, v in row.items() if k.endswith("_sps")}
            print(f"{axis}={value}: {row.get('error') or shown}", flush=True)
            with open(path, "w") as f:  # after every point: a cut-off sweep keeps what it did
                json.dump(result, f, indent=2)
    plot(result, path.removesuffix(".json") + ".png")
    print(f"written to {path}")
    return 1 if any("error" in r for r in result["points"]) else 0


if __name__ == "__main__":
    sys.exit(main())
