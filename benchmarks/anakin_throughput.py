"""Anakin's throughput against the PureJaxRL-style baseline and the Sebulba path, in one run.

    python benchmarks/anakin_throughput.py                 # the whole table (~4 min on 2 cores)
    python benchmarks/anakin_throughput.py --repeat 1 --skip-separate   # the SPS rows only
    python benchmarks/anakin_throughput.py --rainbow       # Rainbow: Anakin against Sebulba

Rows (CartPole-v1, PPO, PureJaxRL's hyperparameters: 4 envs x 128 steps, 4 x 4 minibatches):

- `baseline`: `purejaxrl_ppo.py`, the whole run one jitted call; SPS of the call after compiling.
- `anakin`: the library (`Trainer` on `configs/anakin_ppo_cartpole.py`, evaluation off),
  the same number of env steps; SPS from the first chunk's end (compilation done) to the last.
- `sebulba`: the library's EnvPool path (`configs/ppo_cartpole.py`: async EnvPool, an actor
  thread, the learner), timed the same way.
- each again with 8 seeds vmapped (`--seeds 8,256`: with each count; SPS counts every seed's
  steps), and the wall time of that many seeds (the first count) in one `scripts/train.py` run
  against as many separate runs (process start, compile and all). A count of 1 is the pairs'
  own programs: its rows are the pairs' median rows, not measured again.

Baseline and library run in `--repeat` interleaved pairs, the baseline first in even pairs and
second in odd ones (ABBA); the ratio is the median of the per-pair ratios with a bootstrap 95%
interval (`--repeat 7 --skip-separate --seeds ''`: the one-seed pairs alone). Written to
`benchmarks/results/<device>/anakin_throughput.json` and `.md`, with the provenance (commit,
the library's configs as built, the machine; a dirty tree refused unless `--allow-dirty`).

`--rainbow`: Rainbow on CartPole-v1, the same agent, replay and updates per env step (one
update of 128 transitions per 16 env steps) on both runtimes: `anakin_rainbow_cartpole.py`
(replay on the device) against `rainbow_cartpole.py` (EnvPool actor thread, host replay,
learner), alternating `--repeat` times, and Anakin with `--seeds` seeds vmapped; written to
`anakin_rainbow_throughput.json` and `.md`.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, ROOT)

import numpy as np  # noqa: E402
import provenance  # noqa: E402
import purejaxrl_ppo  # noqa: E402
from seed_statistics import median_ci  # noqa: E402
from throughput import environment, write_result  # noqa: E402

from jaxrl_dist.config.cli import load_config  # noqa: E402
from jaxrl_dist.run.hooks import Hooks  # noqa: E402
from jaxrl_dist.tools.train_cli import make_trainer  # noqa: E402

ANAKIN = os.path.join(ROOT, "configs", "anakin_ppo_cartpole.py")
SEBULBA = os.path.join(ROOT, "configs", "ppo_cartpole.py")
ANAKIN_RAINBOW = os.path.join(ROOT, "configs", "anakin_rainbow_cartpole.py")
SEBULBA_RAINBOW = os.path.join(ROOT, "configs", "rainbow_cartpole.py")
QUIET = {
    "stop_at_eval_return": None,
    "eval_every_updates": 0,
    "checkpoint_every_updates": 0,
    "learning_curve": False,
    "log_every_updates": 100,
}


def library_config(config_path: str, steps: int, **overrides):
    """The config a `library_sps` run trains: `steps` env steps, no evaluation or saving."""
    return load_config(config_path, total_env_steps=steps, **{**QUIET, **overrides})


def library_sps(config_path: str, steps: int, **overrides) -> dict:
    """A library run of `steps` env steps per seed; SPS (all seeds) after the first update's
    end (compilation done), from the `on_iteration` hook's times."""
    marks = []
    hooks = Hooks(
        on_iteration=lambda episodes, env_steps: marks.append((time.perf_counter(), env_steps))
    )
    config = library_config(config_path, steps, **overrides)
    with tempfile.TemporaryDirectory() as workdir:
        t0 = time.perf_counter()
        result = make_trainer(config, workdir, quiet=True, hooks=hooks).run()
        wall = time.perf_counter() - t0
    (t_first, s_first), (t_last, s_last) = marks[0], marks[-1]
    seeds = config.anakin.num_seeds
    return {
        "num_seeds": seeds,
        "env_steps_per_seed": result.env_steps,
        "wall_s": round(wall, 3),
        "first_update_s": round(t_first - t0, 3),
        "sps": round((s_last - s_first) * seeds / (t_last - t_first), 1),
    }


def separate_vs_vmapped(seeds: int, steps: int) -> dict:
    """Wall time of `seeds` runs of `scripts/train.py` one after another against one run with
    `anakin.num_seeds=seeds` (each a fresh process: start, compile, train, final save)."""
    train = os.path.join(ROOT, "scripts", "train.py")
    flags = [f"--config.{k}={v}" for k, v in {**QUIET, "total_env_steps": steps}.items()]

    def run(extra: list[str]) -> float:
        with tempfile.TemporaryDirectory() as workdir:
            t0 = time.perf_counter()
            subprocess.run(
                [
                    sys.executable,
                    train,
                    "--config",
                    ANAKIN,
                    "--workdir",
                    workdir,
                    "--quiet",
                    *flags,
                    *extra,
                ],
                check=True,
            )
            return time.perf_counter() - t0

    separate = [run([f"--config.seed={s}"]) for s in range(seeds)]
    vmapped = run([f"--config.anakin.num_seeds={seeds}"])
    return {
        "seeds": seeds,
        "env_steps_per_seed": steps,
        "separate_runs_s": round(sum(separate), 2),
        "separate_each_s": [round(s, 2) for s in separate],
        "vmapped_run_s": round(vmapped, 2),
        "vmapped_over_separate": round(vmapped / sum(separate), 3),
    }


def rainbow(args: argparse.Namespace) -> tuple[str, dict, str]:
    """Rainbow's rows: Anakin against Sebulba per alternating pair, and Anakin's vmapped seeds."""
    steps = args.steps
    paths = {"sebulba": SEBULBA_RAINBOW, "anakin": ANAKIN_RAINBOW}
    rows = interleaved(
        args.repeat, {k: lambda p=p: library_sps(p, steps) for k, p in paths.items()}
    )
    ratios = [a["sps"] / b["sps"] for a, b in zip(rows["anakin"], rows["sebulba"], strict=True)]
    seeds = args.seeds[0]
    vmapped = library_sps(ANAKIN_RAINBOW, steps, **{"anakin.num_seeds": seeds})
    result = {
        "environment": environment(),
        "provenance": args.origin,
        "steps_per_seed": steps,
        "rows": rows,
        "anakin_over_sebulba": [round(r, 3) for r in ratios],
        "anakin_over_sebulba_median": round(float(np.median(ratios)), 3),
        "anakin_over_sebulba_ci95": median_ci(ratios),
        f"anakin_{seeds}_seeds": vmapped,
    }
    median = lambda rows: float(np.median([r["sps"] for r in rows]))  # noqa: E731
    base = median(rows["sebulba"])
    entries = [
        ("Sebulba (EnvPool actor thread, host replay), 1 seed", base),
        ("Anakin (replay on the device), 1 seed", median(rows["anakin"])),
        (f"Anakin, {seeds} seeds vmapped", vmapped["sps"]),
    ]
    lines = [
        f"CartPole-v1 Rainbow (one update of 128 transitions per 16 env steps), "
        f"{result['environment']['device']}, {result['environment']['cpu_count']} cores",
        "",
        "| run | SPS (all seeds) | x Sebulba (1 seed) |",
        "|---|---:|---:|",
        *[f"| {name} | {sps:,.0f} | {sps / base:.2f} |" for name, sps in entries],
        "",
        f"Anakin / Sebulba per pair: {result['anakin_over_sebulba']} "
        f"(median {result['anakin_over_sebulba_median']}, 95% CI "
        f"{result['anakin_over_sebulba_ci95'][0]}-{result['anakin_over_sebulba_ci95'][1]})",
    ]
    return "anakin_rainbow_throughput", result, "\n".join(lines) + "\n"


def interleaved(pairs: int, measure: dict) -> dict[str, list]:
    """`pairs` measurements of each of two sides, alternately, the first side first in even
    pairs and second in odd ones (ABBA), so a drift of the machine's speed falls on both;
    each row also says which pair and position it was."""
    first, second = measure
    rows: dict[str, list] = {first: [], second: []}
    for i in range(pairs):
        for position, side in enumerate((first, second) if i % 2 == 0 else (second, first)):
            rows[side].append({**shown(side, measure[side]()), "pair": i, "position": position})
    return rows


def configs(args: argparse.Namespace) -> dict:
    """What the rows train, as the library builds it (recorded in the provenance)."""
    if args.rainbow:
        return {
            "sebulba": library_config(SEBULBA_RAINBOW, args.steps),
            "anakin": library_config(ANAKIN_RAINBOW, args.steps),
        }
    return {
        "anakin": library_config(ANAKIN, args.steps),
        "sebulba": library_config(SEBULBA, min(200_704, args.steps)),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--steps", type=int, default=0, help="env steps per seed (0: 499,712; Rainbow 65,536)"
    )
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--seeds",
        type=lambda text: [int(n) for n in text.split(",") if n],
        default=[8],
        help="the vmapped rows' seed counts, a comma list (Rainbow: the first); '' for none "
        "(the one-seed pairs and Sebulba's row only)",
    )
    parser.add_argument("--skip-separate", action="store_true")
    parser.add_argument("--rainbow", action="store_true", help="Rainbow's rows instead")
    parser.add_argument("--out-dir", default=None)
    parser.add_argument(
        "--name", default=None, help="result file name (anakin_throughput, anakin_rainbow_...)"
    )
    provenance.add_argument(parser)
    args = parser.parse_args(argv)
    if args.rainbow and not args.seeds:
        parser.error("--rainbow needs a seed count for its vmapped row (--seeds 8)")
    args.steps = args.steps or (65_536 if args.rainbow else 499_712)
    args.origin = provenance.capture(args.allow_dirty, configs(args))
    name, result, table = rainbow(args) if args.rainbow else ppo(args)
    write_result(args.out_dir, args.name or name, result, table)


def ppo(args: argparse.Namespace) -> tuple[str, dict, str]:
    """PPO's rows: the library against the PureJaxRL-style baseline, and Sebulba."""
    config = {**purejaxrl_ppo.CONFIG, "TOTAL_TIMESTEPS": args.steps}
    sides = {
        "baseline": lambda: purejaxrl_ppo.measure(config, 1),
        "anakin": lambda: library_sps(ANAKIN, args.steps),
    }
    rows = interleaved(args.repeat, sides)
    ratios = [a["sps"] / b["sps"] for a, b in zip(rows["anakin"], rows["baseline"], strict=True)]
    result = {
        "environment": environment(),
        "provenance": args.origin,
        "baseline_config": config,
        "steps_per_seed": args.steps,
        "rows": rows,
        "anakin_over_baseline": [round(r, 3) for r in ratios],
        "anakin_over_baseline_median": round(float(np.median(ratios)), 3),
        "anakin_over_baseline_ci95": median_ci(ratios),
    }
    for seeds in args.seeds:  # before Sebulba's row: the vmapped rows matter more
        if seeds == 1:  # the pairs' own programs (the tiny check's count): their median rows
            result["baseline_1_seeds"] = median_row(rows["baseline"])
            result["anakin_1_seeds"] = median_row(rows["anakin"])
            continue
        result[f"baseline_{seeds}_seeds"] = shown(
            f"baseline_{seeds}_seeds", purejaxrl_ppo.measure(config, seeds)
        )
        result[f"anakin_{seeds}_seeds"] = shown(
            f"anakin_{seeds}_seeds", library_sps(ANAKIN, args.steps, **{"anakin.num_seeds": seeds})
        )
    result["sebulba"] = shown("sebulba", library_sps(SEBULBA, min(200_704, args.steps)))
    if not args.skip_separate and args.seeds:
        result["separate_vs_vmapped"] = separate_vs_vmapped(args.seeds[0], args.steps)
    return "anakin_throughput", result, markdown(result, args.seeds)


def median_row(rows: list[dict]) -> dict:
    """The row of median SPS (the lower of the middle two for an even count)."""
    return sorted(rows, key=lambda row: row["sps"])[(len(rows) - 1) // 2]


def shown(row: str, measured: dict) -> dict:
    """Prints a row as soon as it is measured: a run cut off still leaves its figures."""
    print(f"{row}: {json.dumps(measured)}", flush=True)
    return measured


def markdown(result: dict, seed_counts: list[int]) -> str:
    median = lambda rows: float(np.median([r["sps"] for r in rows]))  # noqa: E731
    base = median(result["rows"]["baseline"])
    lines = [
        f"CartPole-v1 PPO, {result['environment']['device']}, "
        f"{result['environment']['cpu_count']} cores",
        "",
        "| run | SPS (all seeds) | x baseline (1 seed) |",
        "|---|---:|---:|",
    ]
    entries = [
        ("PureJaxRL-style baseline, 1 seed", base),
        ("Anakin (library), 1 seed", median(result["rows"]["anakin"])),
        ("Sebulba (library, EnvPool), 1 seed", result["sebulba"]["sps"]),
    ]
    for n in seed_counts:
        entries += [
            (f"PureJaxRL-style baseline, {n} seeds vmapped", result[f"baseline_{n}_seeds"]["sps"]),
            (f"Anakin (library), {n} seeds vmapped", result[f"anakin_{n}_seeds"]["sps"]),
        ]
    lines += [f"| {name} | {sps:,.0f} | {sps / base:.2f} |" for name, sps in entries]
    lines += [
        "",
        f"Anakin / baseline per pair: {result['anakin_over_baseline']} "
        f"(median {result['anakin_over_baseline_median']}, 95% CI "
        f"{result['anakin_over_baseline_ci95'][0]}-{result['anakin_over_baseline_ci95'][1]}; "
        "interleaved, ABBA)",
    ]
    sep = result.get("separate_vs_vmapped")
    if sep:
        lines.append(
            f"{sep['seeds']} seeds: {sep['separate_runs_s']} s as separate runs, "
            f"{sep['vmapped_run_s']} s vmapped in one run ({sep['vmapped_over_separate']}x)"
        )
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
