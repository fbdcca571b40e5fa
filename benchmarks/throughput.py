"""Every stage of the pipeline against its ceiling, in one process run.

    python benchmarks/throughput.py --config configs/impala_atari.py:quick --seconds 30
    python benchmarks/throughput.py --config configs/impala_cartpole.py --seconds 20 \
        --config.sebulba.num_actor_threads=2

Measures (see `stages.py`): raw EnvPool sync and async with random actions (the ceiling), the
actors alone, the learner alone on synthetic batches (FLOPs per update and MFU on a GPU), the
synchronous act-step-update baseline, and end-to-end training with its per-stage timers. Prints
a table with each figure's ratio to raw EnvPool async, says which stage bounds training, and
writes `benchmarks/results/<device>/<name>.json` and `.png` (or under `--out-dir`). With
`--repeat N` the stages run N times in turn, and each ratio of two stages (end to end against
the synchronous loop, central inference against local, end to end against gymnasium's
`AsyncVectorEnv`) is the median of its per-repeat ratios with a bootstrap 95% interval. The
result records its provenance (`provenance.py`: commit, the config as built, the machine); a
tree with uncommitted changes is refused unless `--allow-dirty`.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import re
import sys
import time
from importlib import metadata

import jax
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import provenance  # noqa: E402
import stages  # noqa: E402
from seed_statistics import median_ci  # noqa: E402

from jaxrl_dist.config import ConfigError  # noqa: E402
from jaxrl_dist.config.cli import parse_args  # noqa: E402
from jaxrl_dist.config.sections import field_value  # noqa: E402
from jaxrl_dist.envs.sources import is_python_env  # noqa: E402
from jaxrl_dist.sebulba.engine import SebulbaEngine  # noqa: E402

STAGES = (
    "raw_sync",
    "raw_async",
    "raw_gymnasium",
    "actors",
    "learner",
    "sync_baseline",
    "end_to_end",
    "end_to_end_central",
)
RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")


def device_dir() -> str:
    """`cpu`, or the accelerator's kind as a slug (e.g. `nvidia-h100-80gb-hbm3`)."""
    device = jax.devices()[0]
    if device.platform == "cpu":
        return "cpu"
    return re.sub(r"[^a-z0-9]+", "-", device.device_kind.lower()).strip("-")


def environment() -> dict:
    versions = {p: _version(p) for p in ("jax", "jaxlib", "flax", "optax", "envpool", "numpy")}
    device = jax.devices()[0]
    return {
        "device": f"{device.platform}:{device.device_kind}",
        "device_count": jax.device_count(),
        "cpu_count": os.cpu_count(),
        "machine": platform.machine(),
        "python": platform.python_version(),
        "versions": versions,
        "date": time.strftime("%Y-%m-%d"),
    }


def write_result(out_dir: str | None, name: str, result: dict, table: str) -> None:
    """`name.json` (the result) and `name.md` (its table) in `out_dir` (default: this device's
    results folder); prints the table. The result carries its `provenance`: every caller took
    it with `provenance.capture` before measuring."""
    if "provenance" not in result:
        raise ValueError(f"{name}: a result without provenance (call provenance.capture first)")
    out = out_dir or os.path.join(RESULTS, device_dir())
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, f"{name}.json"), "w") as f:
        json.dump(result, f, indent=2)
    with open(os.path.join(out, f"{name}.md"), "w") as f:
        f.write(table)
    print(table)


def _version(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


MEASURE = {
    "raw_sync": lambda config, spec, seconds: stages.raw_envpool(config, spec, seconds, sync=True),
    "raw_async": lambda config, spec, seconds: stages.raw_envpool(config, spec, seconds, False),
    "raw_gymnasium": stages.raw_gymnasium,
    "actors": lambda config, spec, seconds: stages.actors_alone(config, seconds),
    "learner": lambda config, spec, seconds: stages.learner_alone(config, seconds),
    "sync_baseline": lambda config, spec, seconds: stages.sync_baseline(config, seconds),
    "end_to_end": lambda config, spec, seconds: stages.end_to_end(
        with_client(config, "local"), seconds
    ),
    "end_to_end_central": lambda config, spec, seconds: stages.end_to_end(
        with_client(config, "server"), seconds
    ),
}


def with_client(config, client: str):
    """The config with inference client `client`: "local" (each actor's own inference, the
    policy seam's local client) or "server" (a central inference server per actor device
    batching the actors)."""
    inference = dataclasses.replace(config.sebulba.inference, client=client)
    return dataclasses.replace(
        config, sebulba=dataclasses.replace(config.sebulba, inference=inference)
    )


def run_stages(
    config, which: list[str], seconds: float, result: dict, save, repeats: int = 1
) -> None:
    """Runs the stages in order, `repeats` times over (interleaved, so a machine whose speed
    drifts affects every stage alike), into `result["repeats"]`; `result["stages"]` holds each
    stage's median run. `save()` is called after every stage, so a run cut off (or a stage that
    fails, recorded as `{"error": ...}`) keeps what was measured."""
    spec, _ = SebulbaEngine.machine(config)
    result["repeats"] = {stage: [] for stage in which}
    for repeat in range(repeats):
        for stage in which:
            t0 = time.perf_counter()
            try:
                measured = MEASURE[stage](config, spec, seconds)
            except Exception as e:  # noqa: BLE001  one failed stage must not lose the others
                measured = {"error": f"{type(e).__name__}: {e}"}
            measured["stage_wall_s"] = round(time.perf_counter() - t0, 2)
            runs = result["repeats"][stage]
            runs.append(measured)
            ok = sorted((r for r in runs if "error" not in r), key=_figure)
            result["stages"][stage] = ok[(len(ok) - 1) // 2] if ok else measured
            save()
            shown = measured.get("error") or f"{_figure(measured):,.0f} SPS"
            tag = f" [{repeat + 1}/{repeats}]" if repeats > 1 else ""
            print(f"  {stage}{tag}: {shown} ({measured['stage_wall_s']:.1f}s)", flush=True)


def _figure(measured: dict) -> float | None:
    """A stage's headline rate: env steps/s, or the learner's samples/s with the transfer."""
    return measured.get("sps", measured.get("with_transfer_samples_per_s"))


def summarize(result: dict) -> None:
    """Adds the ratios to raw EnvPool async and the bottleneck analysis to `result`."""
    measured = {k: v for k, v in result["stages"].items() if "error" not in v}
    result["failed_stages"] = sorted(set(result["stages"]) - set(measured))
    # Medians of same-repeat ratios (robust to a machine whose speed drifts), with a bootstrap
    # 95% interval over the repeats: end to end against the synchronous loop, central inference
    # against local, end to end against gymnasium's own AsyncVectorEnv.
    _per_repeat(result, "end_to_end", "sync_baseline", "async_over_sync")
    _per_repeat(result, "end_to_end_central", "end_to_end", "central_over_local")
    _per_repeat(result, "end_to_end", "raw_gymnasium", "end_to_end_over_raw_gymnasium")
    if "raw_gymnasium" in measured:  # a Python env: the ceiling without jaxrl_dist's pool
        raw = measured["raw_gymnasium"]["sps"]
        result["over_raw_gymnasium"] = {s: _figure(res) / raw for s, res in measured.items()}
    if "raw_async" not in measured:
        return
    raw = measured["raw_async"]["sps"]
    result["over_raw_async"] = {stage: _figure(res) / raw for stage, res in measured.items()}
    result["bottleneck"] = stages.bottleneck(measured)


RATIOS = {  # per-repeat ratios and what they compare
    "async_over_sync": "asynchronous pipeline / synchronous loop",
    "central_over_local": "central inference server / local inference",
    "end_to_end_over_raw_gymnasium": "end to end / gymnasium's AsyncVectorEnv",
}


def _per_repeat(result: dict, numerator: str, denominator: str, key: str) -> None:
    repeats = result.get("repeats", {})
    pairs = zip(repeats.get(numerator, []), repeats.get(denominator, []), strict=False)
    ratios = [a["sps"] / b["sps"] for a, b in pairs if "error" not in a and "error" not in b]
    if ratios:
        result[key] = float(np.median(ratios))
        result[f"{key}_per_repeat"] = ratios
        if len(ratios) > 1:
            result[f"{key}_ci95"] = median_ci(ratios)


LABELS = {
    "raw_sync": "raw pool sync, random actions",
    "raw_async": "raw pool async, random actions",
    "raw_gymnasium": "raw gymnasium AsyncVectorEnv, random actions",
    "actors": "actors alone (inference, rollouts dropped)",
    "learner": "learner alone, host transfer (samples/s)",
    "sync_baseline": "synchronous act-step-update loop",
    "end_to_end": "end-to-end training (steady), local inference",
    "end_to_end_central": "end-to-end training, central inference server",
}


def table(result: dict) -> str:
    measured, ratios = result["stages"], result.get("over_raw_async", {})
    lines = [f"{'stage':<46}{'SPS':>12}{'/ raw async':>12}"]
    for stage, res in measured.items():
        if "error" in res:
            lines.append(f"{LABELS[stage]:<46}  failed: {res['error']}")
            continue
        ratio = f"{ratios[stage]:>12.3f}" if stage in ratios else ""
        lines.append(f"{LABELS[stage]:<46}{_figure(res):>12,.0f}{ratio}")
    learner = measured.get("learner")
    learner = learner if learner and "error" not in learner else None
    if learner:
        lines.append(
            f"learner: {learner['resident_updates_per_s']:.1f} updates/s with the batch on "
            f"device ({learner['resident_samples_per_s']:,.0f} samples/s), "
            f"{learner['with_transfer_updates_per_s']:.1f} with the host transfer"
        )
        if learner.get("flops_per_update"):
            mfu = ""
            if "mfu" in learner:
                mfu = f", MFU {100 * learner['mfu']:.2f}% of the datasheet peak"
            if "mfu_vs_measured_matmul" in learner:
                mfu += f" ({100 * learner['mfu_vs_measured_matmul']:.2f}% of a measured matmul)"
            flops = learner["flops_per_update"]
            size = f"{flops / 1e9:.1f} GFLOP" if flops >= 1e9 else f"{flops / 1e6:.2f} MFLOP"
            lines.append(f"learner: {size}/update{mfu}")
    for key, what in RATIOS.items():
        if key in result:
            each = result[f"{key}_per_repeat"]
            spread = ""
            if len(each) > 1:
                low, high = result[f"{key}_ci95"]
                spread = f" (median of {', '.join(f'{r:.2f}' for r in each)}; 95% CI {low}-{high})"
            lines.append(f"{what}: {result[key]:.2f}x{spread}")
    for stage, runs in result.get("repeats", {}).items():
        figures = [_figure(r) for r in runs if "error" not in r]
        if len(figures) > 1:
            lines.append(
                f"{stage} over {len(figures)} repeats: "
                f"{min(figures):,.0f} to {max(figures):,.0f} (median shown)"
            )
    b = result.get("bottleneck")
    if b:
        line = f"bound by: {b['stage']}"
        if "end_to_end_over_slowest_stage" in b:
            line += (
                f"; end-to-end reaches {b['end_to_end_over_slowest_stage']:.2f} of it alone "
                f"(learner busy {b['learner_busy_s_per_s']:.2f} s/s, actors blocked on the "
                f"queue {b['actors_waiting_on_queue_s_per_s']:.2f} s/s, learner waiting for "
                f"rollouts {b['learner_waiting_on_actors_s_per_s']:.2f} s/s)"
            )
        lines.append(line)
    e2e = measured.get("end_to_end")
    if e2e and "error" not in e2e:
        timers = ", ".join(f"{k} {v:.2f}" for k, v in e2e["timers_s_per_s"].items())
        lines.append(f"end-to-end timers (s per s, summed over threads): {timers}")
    return "\n".join(lines)


def plot(result: dict, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    measured = {k: v for k, v in result["stages"].items() if "error" not in v}
    names = list(measured)
    values = [_figure(measured[s]) for s in names]
    fig, axes = plt.subplots(1, 2, figsize=(13, 4.2), gridspec_kw={"width_ratios": [3, 2]})
    ax = axes[0]
    ax.barh([LABELS[s] for s in names], values, color="tab:blue")
    ax.invert_yaxis()
    ax.set_xlabel("env steps (or learner samples) per second")
    for i, v in enumerate(values):
        ratio = result.get("over_raw_async", {}).get(names[i])
        ax.text(v, i, f" {v:,.0f}" + (f"  ({ratio:.2f}x raw async)" if ratio else ""), va="center")
    ax.set_xlim(0, max(values) * 1.45)
    ax.set_title(
        f"{result['name']}: {result['environment']['device']}, "
        f"{result['environment']['cpu_count']} CPU cores"
    )
    ax = axes[1]
    e2e = measured.get("end_to_end")
    if e2e:
        timers = e2e["timers_s_per_s"]
        ax.barh(list(timers), list(timers.values()), color="tab:orange")
        ax.invert_yaxis()
        ax.set_xlabel("seconds per wall second (summed over threads)")
        ax.set_title("end-to-end: where time goes")
    else:
        ax.axis("off")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=30.0, help="measured time per stage")
    parser.add_argument("--stages", default=",".join(STAGES), help=f"subset of {STAGES}")
    parser.add_argument("--name", default=None, help="result file name (default: config name)")
    parser.add_argument("--out-dir", default=None, help="default: benchmarks/results/<device>")
    parser.add_argument("--no-plot", action="store_true")
    parser.add_argument(
        "--repeat", type=int, default=1, help="run the stages N times, interleaved; medians"
    )
    provenance.add_argument(parser)
    args, rest = parser.parse_known_args(argv)
    which = [s for s in args.stages.split(",") if s]
    unknown = [s for s in which if s not in STAGES]
    try:
        if unknown or args.seconds <= 0 or args.repeat <= 0:
            raise ConfigError(
                f"--stages {unknown}, --seconds {args.seconds} or --repeat "
                f"{args.repeat} is invalid; stages are {','.join(STAGES)}, "
                "seconds and repeat must be > 0"
            )
        config, cli = parse_args([*rest, "--workdir", "unused"])
        SebulbaEngine.machine(config)
    except ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    origin = provenance.capture(args.allow_dirty, config)
    if not is_python_env(config.env_id) and "raw_gymnasium" in which:
        which.remove("raw_gymnasium")  # EnvPool's own envs: raw_async is the ceiling
    if config.sebulba.actor_loop == "xla" and "end_to_end_central" in which:
        which.remove("end_to_end_central")  # inference runs inside the jitted unroll
        print(
            "end_to_end_central: skipped (the XLA actor loop has no central inference; "
            "measure it with --config.sebulba.actor_loop=python --config.sebulba.async_envs=True "
            "--config.sebulba.env_groups_per_actor=1)"
        )
    name = args.name or _default_name(cli.config)
    print(f"{name}: {', '.join(which)} for {args.seconds:g}s each", flush=True)
    result = {
        "name": name,
        "command": " ".join(["python", *sys.argv]) if argv is None else " ".join(argv),
        "config": cli.config,
        "settings": {  # keyed by the field names (results before the sections alike)
            k.rsplit(".", 1)[-1]: field_value(config, k)
            for k in (
                "env_id",
                "sebulba.num_actor_threads",
                "sebulba.envs_per_actor",
                "env_batch_size",
                "sebulba.env_threads_per_actor",
                "sebulba.actor_loop",
                "switch_interval_s",
                "sebulba.env_thread_affinity_offset",
                "batch_size",
                "unroll_length",
                "sebulba.queue_size",
                "sebulba.actor_device_ids",
                "learner_device_ids",
            )
        },
        "rollout_segments": config.rollout_segments(),
        "network": {"torso": config.network.torso, "dtype": config.network.dtype},
        "seconds_per_stage": args.seconds,
        "repeat": args.repeat,
        "environment": environment(),
        "provenance": origin,
        "stages": {},
    }
    out_dir = args.out_dir or os.path.join(RESULTS, device_dir())
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, f"{name}.json")

    def save():
        summarize(result)
        with open(path, "w") as f:
            json.dump(result, f, indent=2)

    run_stages(config, which, args.seconds, result, save, args.repeat)
    print(table(result))
    if not args.no_plot and any("error" not in v for v in result["stages"].values()):
        plot(result, path.removesuffix(".json") + ".png")
    print(f"written to {path}")
    return 1 if result.get("failed_stages") else 0


def _default_name(config_spec: str) -> str:
    path, _, variant = config_spec.partition(":")
    name = os.path.basename(path).removesuffix(".py")
    return f"{name}_{variant}" if variant else name


if __name__ == "__main__":
    sys.exit(main())
