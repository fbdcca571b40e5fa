"""A runtime layout sweep in one command: end-to-end SPS against raw EnvPool async at each point.

    python benchmarks/sweep.py --config configs/impala_atari.py --grid gpu --seconds 20
    python benchmarks/sweep.py --config configs/impala_cartpole.py --grid cpu --seconds 10

From the config (the base), each factor of the grid is varied alone (one factor at a time: a
full grid of 7 factors would not fit a 30-minute device lease); then the best value of every
factor is measured together, `--final-repeat` times. Every point reports end-to-end training SPS
(`stages.end_to_end`), raw EnvPool async with random actions at the same env layout (envs, C++
threads, pinning: the ceiling it is compared with, measured once per layout) and their ratio;
the best point also the wall time 200M Atari frames (50M agent steps at frame skip 4) would take,
and SPS per CPU core. Written to `benchmarks/results/<device>/sweep_<name>.json` and a Markdown
table beside it (`.md`), after every point (a sweep cut off keeps what it measured).
"""

from __future__ import annotations

import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import provenance  # noqa: E402
import stages  # noqa: E402
from throughput import RESULTS, device_dir, environment  # noqa: E402

from jaxrl_dist.config import ConfigError  # noqa: E402
from jaxrl_dist.config.cli import parse_args  # noqa: E402
from jaxrl_dist.config.sections import field_value  # noqa: E402
from jaxrl_dist.errors import OneLineArgumentParser, UsageError  # noqa: E402
from jaxrl_dist.sebulba.engine import SebulbaEngine  # noqa: E402

ATARI_FRAMES = 200_000_000
FRAME_SKIP = 4

# Each factor: a name and its values, each value a dict of `--config.` overrides. The base
# (the config as written) is always measured first and is the reference of every factor.
XLA = {
    "sebulba.actor_loop": "xla",
    "sebulba.async_envs": "False",
    "sebulba.env_groups_per_actor": "1",
}  # one pool
PYTHON = {
    "sebulba.actor_loop": "python",
    "sebulba.async_envs": "True",
    "sebulba.env_groups_per_actor": "1",
}
GRIDS = {
    # One GPU and 16 cores (the H100 machine), Breakout with the IMPALA ResNet, from
    # impala_atari.py's 2 actor threads x 128 envs (two XLA-loop env groups of 64) x 8 EnvPool
    # threads. Run it in
    # parts that fit a 10-minute device call (`--factors`, README "One GPU with 16 cores").
    "gpu": {
        "switch_interval_s": [{"switch_interval_s": v} for v in ("0.0005", "0.001")],
        "sebulba.env_threads_per_actor": [{"sebulba.env_threads_per_actor": v} for v in ("4", "6")],
        "pinning": [{"sebulba.env_thread_affinity_offset": v} for v in ("0", "2")],
        "sebulba.envs_per_actor": [{"sebulba.envs_per_actor": v} for v in ("64", "256")],
        "sebulba.num_actor_threads": [{"sebulba.num_actor_threads": v} for v in ("1", "4")],
        "sebulba.actor_loop": [PYTHON],
        "learner_dtype": [{"network.dtype": "bfloat16"}],
    },
    # The actor layouts that may keep a GPU learner fed, against the base (the config: the XLA
    # loop, two env groups per actor thread stepped in turn): the Python loop on async pools
    # (the default until 2026-11-27), the XLA loop on one sync pool per thread, more threads
    # sharing the 16 cores; the points share one raw-EnvPool ceiling where the layout is the same.
    # `benchmarks/gpu_check.py`, most wanted first.
    "gpu_actors": {
        "actor_layout": [
            PYTHON,
            {**XLA, "sebulba.num_actor_threads": "2"},
            {
                **XLA,
                "sebulba.num_actor_threads": "4",
                "sebulba.envs_per_actor": "64",
                "sebulba.env_threads_per_actor": "4",
            },
            {
                **XLA,
                "sebulba.num_actor_threads": "8",
                "sebulba.envs_per_actor": "32",
                "sebulba.env_threads_per_actor": "2",
            },
        ],
    },
    # A small CPU box (2 cores), CartPole: quick enough to try the sweep anywhere.
    "cpu": {
        "switch_interval_s": [{"switch_interval_s": "0.0005"}],
        "sebulba.env_threads_per_actor": [{"sebulba.env_threads_per_actor": "1"}],
        "pinning": [{"sebulba.env_thread_affinity_offset": "1"}],
        "sebulba.actor_loop": [PYTHON, {**PYTHON, "switch_interval_s": "0.0005"}],
    },
    # Tests: two points, seconds each.
    "smoke": {"switch_interval_s": [{"switch_interval_s": "0.0005"}]},
}
LAYOUT = (
    "env_id",
    "env_kwargs",
    "sebulba.num_actor_threads",
    "sebulba.envs_per_actor",
    "sebulba.env_threads_per_actor",
    "sebulba.env_thread_affinity_offset",
)


def build_config(spec: str, overrides: dict[str, str], extra: list[str]):
    argv = ["--config", spec, *extra, *(f"--config.{k}={v}" for k, v in overrides.items())]
    config, _ = parse_args([*argv, "--workdir", "unused"])
    SebulbaEngine.machine(config)
    return config


def measure_point(config, seconds: float, raw_cache: dict) -> dict:
    """End-to-end SPS, raw async EnvPool at the same layout (cached per layout), their ratio."""
    spec, _ = SebulbaEngine.machine(config)
    threads = stages.raw_threads(config, sync=False)  # resolved: auto (0) differs by loop
    layout = json.dumps([*(field_value(config, k) for k in LAYOUT), threads], default=str)
    if layout not in raw_cache:
        raw_cache[layout] = stages.raw_envpool(config, spec, seconds, sync=False)["sps"]
    e2e = stages.end_to_end(config, seconds)
    raw = raw_cache[layout]
    return {
        "end_to_end_sps": e2e["sps"],
        "raw_async_sps": raw,
        "over_raw_async": e2e["sps"] / raw,
        "timers_s_per_s": e2e["timers_s_per_s"],
        "policy_lag": e2e["policy_lag"],
        "phases_s": e2e["phases_s"],
        "compile": e2e["compile"],
    }


def implied(sps: float, cores: int, atari: bool = True) -> dict:
    """SPS per core and, for Atari (frame skip 4), the minutes 200M frames would take."""
    out = {"sps_per_core": sps / cores}
    if atari:
        out["minutes_for_200m_frames"] = ATARI_FRAMES / FRAME_SKIP / sps / 60
    return out


def markdown(result: dict) -> str:
    lines = [
        f"# {result['name']}: {result['environment']['device']}, "
        f"{result['environment']['cpu_count']} CPU cores",
        "",
        "| point | overrides | end-to-end SPS | raw async SPS | / raw async |",
        "| --- | --- | ---: | ---: | ---: |",
    ]
    for p in result["points"]:
        if "error" in p:
            lines.append(f"| {p['point']} | {p['overrides']} | failed: {p['error']} | | |")
            continue
        lines.append(
            f"| {p['point']} | {p['overrides'] or 'base'} | {p['end_to_end_sps']:,.0f} | "
            f"{p['raw_async_sps']:,.0f} | {p['over_raw_async']:.2f} |"
        )
    best = result.get("best")
    if best:
        frames = ""
        if "minutes_for_200m_frames" in best:
            frames = f"200M frames in {best['minutes_for_200m_frames']:.0f} min; "
        lines += [
            "",
            f"Best: {best['overrides'] or 'base'}: {best['end_to_end_sps']:,.0f} SPS end to end "
            f"(median of {len(best['repeats_sps'])}), {best['over_raw_async']:.2f} of raw async; "
            f"{frames}{best['sps_per_core']:,.0f} SPS per core.",
        ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = OneLineArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", required=True, help="FILE[:variant], as for train.py")
    parser.add_argument("--grid", default="gpu", help=f"one of {sorted(GRIDS)}")
    parser.add_argument("--seconds", type=float, default=20.0, help="measured time per stage")
    parser.add_argument("--factors", default="", help="comma list of the grid's factors (all)")
    parser.add_argument(
        "--final-repeat", type=int, default=3, help="runs of the best point (0: none)"
    )
    parser.add_argument("--name", default=None, help="result name (default: config_grid)")
    parser.add_argument("--out-dir", default=None, help="default: benchmarks/results/<device>")
    provenance.add_argument(parser)
    try:
        args, extra = parser.parse_known_args(argv)
        if args.grid not in GRIDS or args.seconds <= 0 or args.final_repeat < 0:
            raise UsageError(
                f"--grid {args.grid!r}, --seconds {args.seconds} or --final-repeat "
                f"{args.final_repeat} is invalid: grids are {sorted(GRIDS)}, seconds > 0, "
                "final-repeat >= 0"
            )
        grid = GRIDS[args.grid]
        chosen = [f for f in args.factors.split(",") if f] or list(grid)
        unknown = [f for f in chosen if f not in grid]
        if unknown:
            raise UsageError(f"--factors {unknown} not in grid {args.grid!r}: {list(grid)}")
        grid = {f: grid[f] for f in chosen}
        points = [("base", {})] + [
            (factor, value) for factor, values in grid.items() for value in values
        ]
        configs = [build_config(args.config, o, extra) for _, o in points]  # all checked first
    except (UsageError, ConfigError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    origin = provenance.capture(args.allow_dirty, configs[0])  # the base point's config
    config_name = os.path.basename(args.config.partition(":")[0]).removesuffix(".py")
    name = args.name or f"sweep_{config_name}_{args.grid}"
    out_dir = args.out_dir or os.path.join(RESULTS, device_dir())
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, f"{name}.json")
    result = {
        "name": name,
        "command": " ".join(["python", *sys.argv]) if argv is None else " ".join(argv),
        "config": args.config,
        "grid": grid,
        "seconds_per_stage": args.seconds,
        "environment": environment(),
        "provenance": origin,
        "points": [],
    }

    def save():
        with open(path, "w") as f:
            json.dump(result, f, indent=2)
        with open(path.removesuffix(".json") + ".md", "w") as f:
            f.write(markdown(result))

    raw_cache: dict = {}
    for (factor, overrides), config in zip(points, configs, strict=True):
        result["points"].append(run_point(factor, overrides, config, args.seconds, raw_cache))
        save()
    best = best_overrides(result["points"])
    runs = []
    try:
        final_config = build_config(args.config, best, extra) if args.final_repeat else None
    except ConfigError as e:  # the best values may not combine: say so, keep the points
        result["best_error"] = f"{best}: {e}"
        final_config = None
    if final_config is not None:
        runs = [
            run_point("best", best, final_config, args.seconds, raw_cache)
            for _ in range(args.final_repeat)
        ]
    good = sorted((r for r in runs if "error" not in r), key=lambda r: r["end_to_end_sps"])
    result["best_overrides"] = best
    if good:
        median = good[(len(good) - 1) // 2]
        cores = os.cpu_count() or 1
        atari = final_config.env_id.endswith("-v5")  # EnvPool's Atari ids, frame skip 4
        result["best"] = {
            **median,
            **implied(median["end_to_end_sps"], cores, atari),
            "repeats_sps": [r["end_to_end_sps"] for r in good],
        }
    result["points"] += runs
    save()
    print(markdown(result))
    print(f"written to {path}")
    return 0 if good or not args.final_repeat else 1  # a sweep with no final run is done


def run_point(factor: str, overrides: dict, config, seconds: float, raw_cache: dict) -> dict:
    t0 = time.perf_counter()
    try:
        measured = measure_point(config, seconds, raw_cache)
    except Exception as e:  # noqa: BLE001  one failed point must not lose the others
        measured = {"error": f"{type(e).__name__}: {e}"}
    point = {
        "point": factor,
        "overrides": overrides,
        **measured,
        "wall_s": round(time.perf_counter() - t0, 1),
    }
    shown = measured.get("error") or f"{measured['end_to_end_sps']:,.0f} SPS"
    print(f"  {factor} {overrides or ''}: {shown}", flush=True)
    return point


def best_overrides(points: list[dict]) -> dict:
    """The best value of each factor that beat the base, merged (later factors win a clash)."""
    ok = [p for p in points if "error" not in p]
    base = next((p for p in ok if p["point"] == "base"), None)
    merged: dict = {}
    for factor in dict.fromkeys(p["point"] for p in ok if p["point"] != "base"):
        best = max((p for p in ok if p["point"] == factor), key=lambda p: p["end_to_end_sps"])
        if base is None or best["end_to_end_sps"] > base["end_to_end_sps"]:
            merged.update(best["overrides"])
    return merged


if __name__ == "__main__":
    sys.exit(main())
