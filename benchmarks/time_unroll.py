"""What unrolling the scans over time buys on this backend: `ops.loops.GPU_TIME_UNROLL` A/B.

    python benchmarks/time_unroll.py --out-dir DIR                # on a GPU: ~2 min
    python benchmarks/time_unroll.py --unrolls 1,16 --force-gpu-rule   # the same on a CPU

The GAE and V-trace recursions and the recurrent core scan over T with `time_unroll(T)`
(`jaxrl_dist/ops/loops.py`): unrolled by `GPU_TIME_UNROLL` on a GPU, rolled elsewhere. Rows,
each run once per unroll in alternation, in one process (SPS after the first update):

- `anakin_ppo`: Anakin PPO CartPole at 1 seed (its GAE), with the PureJaxRL-style baseline
  measured once beside it for the ratio the GPU check reports;
- `anakin_ppo_lstm`: the same with an LSTM 64 core and the velocities hidden (the core's
  forward and backward scans, `recurrent_throughput.py`'s row).

`--force-gpu-rule` applies the GPU rule on any backend (for the CPU's side of the table).
Written to `DIR/time_unroll.json` and `.md` after every row: each run's SPS and, in brackets,
its seconds to the first update (compilation).
"""

from __future__ import annotations

import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))

import jax  # noqa: E402
import provenance  # noqa: E402
import purejaxrl_ppo  # noqa: E402
from anakin_throughput import ANAKIN, library_config, library_sps  # noqa: E402
from recurrent_throughput import ROWS  # noqa: E402
from throughput import environment, write_result  # noqa: E402

from jaxrl_dist.ops import loops  # noqa: E402

CASES = {"anakin_ppo": (ANAKIN, {}), "anakin_ppo_lstm": ROWS["anakin_ppo"]}


def measure(case: str, unrolls: list[int], steps: int, repeat: int) -> dict:
    """SPS and seconds to the first update (compilation) per unroll; the order of the unrolls
    turns round every repeat, so neither always runs first."""
    config, overrides = CASES[case]
    runs = {str(u): [] for u in unrolls}
    first_update = {str(u): [] for u in unrolls}
    for i in range(repeat):
        for unroll in unrolls if i % 2 == 0 else unrolls[::-1]:
            loops.GPU_TIME_UNROLL = unroll
            run = library_sps(config, steps, **overrides)
            runs[str(unroll)].append(run["sps"])
            first_update[str(unroll)].append(run["first_update_s"])
            print(f"{case} unroll {unroll}: {run['sps']:,.0f} SPS", flush=True)
    return {"steps": steps, "sps": runs, "first_update_s": first_update}


def markdown(result: dict) -> str:
    env = result["environment"]
    lines = [
        "# Scans over time, rolled and unrolled (`ops.loops.GPU_TIME_UNROLL`)",
        "",
        f"{env['device']}, {env['cpu_count']} CPUs, jax {env['versions']['jax']}, {env['date']}"
        + (" (the GPU rule forced on this backend)" if result["forced"] else ""),
        "",
        "| row | env steps a run | "
        + " | ".join(f"SPS, unroll {u}" for u in result["unrolls"])
        + " |",
        "|---|---:|" + "---:|" * len(result["unrolls"]),
    ]
    for name, row in result["rows"].items():
        cells = []
        for u in result["unrolls"]:
            pairs = zip(row["sps"][str(u)], row["first_update_s"][str(u)], strict=True)
            cells.append(", ".join(f"{sps:,.0f} ({first:.1f} s)" for sps, first in pairs))
        lines.append(f"| {name} | {row['steps']:,} | " + " | ".join(cells) + " |")
    if "baseline_sps" in result:
        lines += ["", f"PureJaxRL-style baseline, 1 seed: {result['baseline_sps']:,.0f} SPS"]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--unrolls", default="1,16", help="GPU_TIME_UNROLL values, alternated")
    parser.add_argument("--steps", type=int, default=499_712, help="anakin_ppo's env steps")
    parser.add_argument("--lstm-steps", type=int, default=40_960, help="the LSTM row's")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--force-gpu-rule", action="store_true")
    parser.add_argument("--out-dir", default=None)
    provenance.add_argument(parser)
    args = parser.parse_args(argv)
    steps = {"anakin_ppo": args.steps, "anakin_ppo_lstm": args.lstm_steps}
    built = {case: library_config(CASES[case][0], steps[case], **CASES[case][1]) for case in CASES}
    origin = provenance.capture(args.allow_dirty, built)
    unrolls = [int(u) for u in args.unrolls.split(",")]
    if args.force_gpu_rule:
        loops.UNROLLED_BACKENDS = (*loops.UNROLLED_BACKENDS, jax.default_backend())
    result = {
        "environment": environment(),
        "provenance": origin,
        "unrolls": unrolls,
        "forced": args.force_gpu_rule,
        "rows": {},
    }
    config = {**purejaxrl_ppo.CONFIG, "TOTAL_TIMESTEPS": args.steps}
    result["baseline_sps"] = purejaxrl_ppo.measure(config, 1)["sps"]
    for case, case_steps in steps.items():
        result["rows"][case] = measure(case, unrolls, case_steps, args.repeat)
        write_result(args.out_dir, "time_unroll", result, markdown(result))


if __name__ == "__main__":
    main()
