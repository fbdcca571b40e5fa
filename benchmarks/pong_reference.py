"""Pong runs of this library against published PPO curves at the same emulator frames.

    python benchmarks/pong_reference.py --runs DIR [DIR ...] --out PREFIX

Each run directory holds a `metrics.jsonl` (`scripts/train.py`'s workdir or a copy of it);
its training episode returns are binned by emulator frames (agent steps x the frame skip,
4). The references (`benchmarks/results/cpu/learning/pong_reference/`, `SOURCES.md` says
where each came from):

- `sb3_ppo/`: RL Baselines3 Zoo's PPO on PongNoFrameskip-v4 (DLR-RM/rl-trained-agents), the
  same Nature CNN and 8 x 128 rollout, 4 epochs, lr 2.5e-4: the 8 envs' Monitor files, whose
  episode lengths are emulator frames; one seed. Binned like the runs (global frames taken as
  8 x each env's own frames: the envs step in lockstep).
- `baselines_ppo2_from_svg.csv`: openai/baselines' ppo2 on PongNoFrameskip-v4, the average of
  6 runs, read back from the plot's SVG coordinates in `benchmarks_atari10M.htm`.

Both references play without sticky actions (v4); this library's runs play the Machado et
al. 2018 protocol (sticky actions 0.25, whole games), which is harder. The update matches
(8 segments x 128 steps, 4 epochs x 4 minibatches), the envs do not: `ppo_atari.py` steps 2
actor threads x 16 async envs, SB3 8 envs in lockstep. Writes `OUT.md` (the table) and
`OUT.png`.
"""

from __future__ import annotations

import argparse
import csv
import glob
import json
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import provenance  # noqa: E402

REFERENCE = os.path.join(HERE, "results", "cpu", "learning", "pong_reference")
Episodes = tuple[np.ndarray, np.ndarray, np.ndarray]  # frames at the end, return, weight


def frame_skip(run_dir: str) -> int:
    """The run's emulator frames per agent step: its `env_kwargs.frame_skip`, else EnvPool's
    Atari default of 4."""
    with open(os.path.join(run_dir, "config.json")) as f:
        return int(json.load(f).get("env_kwargs", {}).get("frame_skip", 4))


def run_episodes(run_dir: str) -> Episodes:
    """(frames at each log, mean episode return of the episodes it saw, how many) of a run."""
    skip = frame_skip(run_dir)
    frames, returns, counts = [], [], []
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        for line in f:
            row = json.loads(line)
            if row.get("charts/episodes", 0) > 0 and "charts/episode_return" in row:
                frames.append(row["env_steps"] * skip)
                returns.append(row["charts/episode_return"])
                counts.append(row["charts/episodes"])
    return np.array(frames), np.array(returns), np.array(counts)


def sb3_episodes(folder: str) -> Episodes:
    """(global frames at each episode's end, its return, 1) over the 8 Monitor files."""
    files = sorted(glob.glob(os.path.join(folder, "*.monitor.csv")))
    frames, returns = [], []
    for path in files:
        with open(path) as f:
            next(f)  # the Monitor's JSON header
            rows = list(csv.DictReader(f))
        lengths = np.cumsum([int(r["l"]) for r in rows])
        frames.extend(len(files) * lengths)
        returns.extend(float(r["r"]) for r in rows)
    order = np.argsort(frames)
    return np.array(frames)[order], np.array(returns)[order], np.ones(len(frames))


def binned(
    frames: np.ndarray, returns: np.ndarray, counts: np.ndarray, edges: np.ndarray
) -> list[float | None]:
    """The episode-weighted mean return in each [edges[i], edges[i + 1]) window."""
    out = []
    for lo, hi in zip(edges[:-1], edges[1:], strict=True):
        inside = (frames >= lo) & (frames < hi)
        weight = counts[inside].sum()
        out.append(float((returns[inside] * counts[inside]).sum() / weight) if weight else None)
    return out


def baselines_ppo2(path: str) -> tuple[np.ndarray, np.ndarray]:
    """(frames, return) of the ppo2 line read back from openai/baselines' plot."""
    with open(path) as f:
        rows = [r for r in csv.DictReader(f) if r["algo"] == "ppo2"]
    return np.array([float(r["frames"]) for r in rows]), np.array(
        [float(r["return"]) for r in rows]
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", nargs="+", required=True, help="run directories")
    parser.add_argument(
        "--out", required=True, help="path prefix for OUT.md, OUT.png and OUT.json (provenance)"
    )
    parser.add_argument("--bin-frames", type=float, default=500_000)
    provenance.add_argument(parser)
    args = parser.parse_args(argv)
    origin = provenance.capture(args.allow_dirty, devices=False)
    runs = {os.path.basename(os.path.normpath(d)): run_episodes(d) for d in args.runs}
    empty = [name for name, r in runs.items() if not len(r[0])]
    if empty:
        parser.error(f"--runs {', '.join(empty)}: no finished episode in metrics.jsonl")
    top = max(r[0].max() for r in runs.values())
    edges = np.arange(top // args.bin_frames + 2) * args.bin_frames  # [lo, hi): top inside
    table = {name: binned(*r, edges) for name, r in runs.items()}
    sb3_frames, sb3_returns, sb3_counts = sb3_episodes(os.path.join(REFERENCE, "sb3_ppo"))
    upto = sb3_frames <= top  # the last window as far as the runs went, no further
    sb3 = binned(sb3_frames[upto], sb3_returns[upto], sb3_counts[upto], edges)
    ppo2_frames, ppo2_returns = baselines_ppo2(
        os.path.join(REFERENCE, "baselines_ppo2_from_svg.csv")
    )
    centers = (edges[:-1] + edges[1:]) / 2
    ppo2 = np.interp(centers, ppo2_frames, ppo2_returns).tolist()
    write_table(args.out + ".md", edges, table, sb3, ppo2)
    with open(args.out + ".json", "w") as f:  # the table's figures and where they came from
        json.dump(
            {
                "runs": args.runs,
                "bin_frames": args.bin_frames,
                "table": table,
                "provenance": origin,
            },
            f,
            indent=1,
        )
    plot(args.out + ".png", runs, edges, table, sb3, (ppo2_frames, ppo2_returns), top)


def _cell(v: float | None) -> str:
    return "" if v is None else f"{v:.2f}"


def write_table(path: str, edges: np.ndarray, table: dict, sb3: list, ppo2: list) -> None:
    names = list(table)
    lines = [
        "| frames (M) | " + " | ".join(names) + " | mean of runs | SB3 Zoo PPO (v4, 1 seed) "
        "| baselines ppo2 (v4, 6 runs) |",
        "|---|" + "---:|" * (len(names) + 3),
    ]
    for i, (lo, hi) in enumerate(zip(edges[:-1], edges[1:], strict=True)):
        cells = [table[n][i] for n in names]
        seen = [c for c in cells if c is not None]
        mean = sum(seen) / len(seen) if seen else None
        lines.append(
            f"| {lo / 1e6:.1f}-{hi / 1e6:.1f} | "
            + " | ".join(_cell(c) for c in cells)
            + f" | {_cell(mean)} | {_cell(sb3[i])} | {_cell(ppo2[i])} |"
        )
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


def plot(
    path: str, runs: dict, edges: np.ndarray, table: dict, sb3: list, ppo2: tuple, top: float
) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4.5))
    centers = (edges[:-1] + edges[1:]) / 2 / 1e6
    for name in runs:
        values = [np.nan if v is None else v for v in table[name]]
        ax.plot(centers, values, marker="o", ms=3, label=f"jaxrl_dist PPO, {name} (sticky 0.25)")
    sb3_values = [np.nan if v is None else v for v in sb3]
    ax.plot(centers, sb3_values, "k--", label="SB3 Zoo PPO, PongNoFrameskip-v4 (1 seed)")
    inside = ppo2[0] <= top * 1.05
    ax.plot(ppo2[0][inside] / 1e6, ppo2[1][inside], "k:", label="baselines ppo2, v4 (6 runs)")
    ax.set_xlabel("emulator frames (M)")
    ax.set_ylabel("training episode return")
    shown = [v for r in table.values() for v in r if v is not None]
    shown += [v for v in sb3 if v is not None] + list(ppo2[1][inside])
    ax.set_ylim(-21.5, max(-10.0, max(shown) + 1))
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="upper left")
    ax.set_title("Pong, PPO with the Nature CNN, 8 x 128 samples an update")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


if __name__ == "__main__":
    main()
