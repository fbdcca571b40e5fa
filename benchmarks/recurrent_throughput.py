"""What a recurrent core costs in throughput: the same run with `network.core` lstm and none.

    python benchmarks/recurrent_throughput.py              # ~4 min on 2 cores
    python benchmarks/recurrent_throughput.py --repeat 1 --steps 50000

Rows (CartPole-v1 with its velocities hidden, `env_kwargs.obs_indices=(0, 2)`):

- `ppo`: `configs/ppo_lstm_memory.py` (Sebulba: async EnvPool, an actor thread, the learner);
- `impala`: `configs/impala_lstm_memory.py` (Sebulba, the Python actor loop);
- `anakin_ppo`: `configs/anakin_ppo_cartpole.py` with the same env and core (one jitted program).

Each row runs the config with its LSTM and with `--config.network.core=none` (the same torso
and heads), alternating `--repeat` times; SPS is timed after the first update (compilation
done), evaluation and checkpoints off. The cost is `1 - median(lstm SPS / none SPS)` over the
pairs. Written to `benchmarks/results/<device>/recurrent_throughput.json` and `.md` after every
row, so a run cut off by a timeout keeps the rows it finished.
"""

from __future__ import annotations

import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, ROOT)

import numpy as np  # noqa: E402
import provenance  # noqa: E402
from anakin_throughput import library_config, library_sps  # noqa: E402
from throughput import environment, write_result  # noqa: E402

HIDDEN = {"env_kwargs": {"obs_indices": (0, 2)}}
# The same run without its core (the core's width back at its default: nothing reads it).
NO_CORE = {"network.core": "none", "network.core_size": 128}
ROWS = {
    "ppo": (os.path.join(ROOT, "configs", "ppo_lstm_memory.py"), {}),
    "impala": (os.path.join(ROOT, "configs", "impala_lstm_memory.py"), {}),
    "anakin_ppo": (
        os.path.join(ROOT, "configs", "anakin_ppo_cartpole.py"),
        {**HIDDEN, "network.core": "lstm", "network.core_size": 64, "network.hidden_sizes": (64,)},
    ),
}


def measure(config: str, overrides: dict, steps: int, repeat: int) -> dict:
    """Alternating lstm / none runs of `config`; their SPS and the median ratio."""
    runs = {"lstm": [], "none": []}
    for _ in range(repeat):
        runs["lstm"].append(library_sps(config, steps, **overrides))
        runs["none"].append(library_sps(config, steps, **{**overrides, **NO_CORE}))
    ratios = [a["sps"] / b["sps"] for a, b in zip(runs["lstm"], runs["none"], strict=True)]
    return {
        **runs,
        "ratios": [round(r, 3) for r in ratios],
        "median_ratio": float(np.median(ratios)),
    }


def markdown(result: dict) -> str:
    env = result["environment"]
    lines = [
        "# Recurrent core throughput (CartPole-v1, velocities hidden)",
        "",
        f"{env['device']}, {env['cpu_count']} CPUs, jax {env['versions']['jax']}, "
        f"{result['steps']:,} env steps a run, {env['date']}",
        "",
        "| run | SPS, LSTM 64 | SPS, no core | LSTM / none (median of pairs) | pairs |",
        "|---|---:|---:|---:|---|",
    ]
    for name, row in result["rows"].items():
        median = lambda rs: float(np.median([r["sps"] for r in rs]))  # noqa: E731
        lines.append(
            f"| {name} | {median(row['lstm']):,.0f} | {median(row['none']):,.0f} | "
            f"{row['median_ratio']:.2f} | {', '.join(f'{r:.2f}' for r in row['ratios'])} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=100_352, help="env steps per run")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--rows", default=",".join(ROWS), help=f"some of {','.join(ROWS)}")
    parser.add_argument("--out-dir", default=None)
    provenance.add_argument(parser)
    args = parser.parse_args(argv)
    names = args.rows.split(",")
    if not set(names) <= set(ROWS):
        parser.error(f"--rows {args.rows!r}: choose from {','.join(ROWS)}")
    built = {  # each row's LSTM run as the library builds it (its pair differs in the core)
        name: library_config(ROWS[name][0], args.steps, **ROWS[name][1]) for name in names
    }
    origin = provenance.capture(args.allow_dirty, built)
    result = {"environment": environment(), "provenance": origin, "steps": args.steps, "rows": {}}
    for name in names:  # written after every row: a run cut off keeps the rows it measured
        result["rows"][name] = measure(*ROWS[name], args.steps, args.repeat)
        write_result(args.out_dir, "recurrent_throughput", result, markdown(result))


if __name__ == "__main__":
    main()
