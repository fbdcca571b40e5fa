"""What writing the best params costs the learner, per write, and what that is at a config's own
evaluation period (issue 55: keeping the scored params must stay within 2% of the speed).

    python benchmarks/best_writes.py --config configs/impala_atari.py:quick \\
        --sps-file benchmarks/results/nvidia-h100-80gb-hbm3/impala_atari_envs128.json \\
        --full-config configs/impala_atari.py --name best_writes_impala_atari

One `scripts/train.py` run of `--config` (extra `--config.` overrides after `--`) that evaluates
beside training and saves a checkpoint every `--every` updates with `keep_best_checkpoints=3`,
so most early evaluations are new bests and are written: its `summary.json`'s `best_saves`
gives the writes and the seconds the learner's thread spent on them (what the run paid; Orbax
finishes each write in the background). A `:quick` variant has the full config's network, so
its params, and what writing them costs, are the full run's, at a fraction of its updates.

The share: one write per evaluation of the full config (`--full-config`: its
`eval_every_updates` x its env steps per update) at the end-to-end SPS of a throughput file
(`--sps-file`, e.g. a GPU's), the most a run can write (only a new best is written).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import provenance  # noqa: E402
from throughput import write_result  # noqa: E402


def writes_of_a_run(config: str, every: int, overrides: list[str]) -> dict:
    """A run of `config` evaluating and saving every `every` updates: its `best_saves`, updates,
    wall time and the bytes of a best step."""
    with tempfile.TemporaryDirectory() as out:
        workdir = os.path.join(out, "run")
        command = [
            sys.executable,
            os.path.join(ROOT, "scripts", "train.py"),
            "--config",
            config,
            "--workdir",
            workdir,
            "--quiet",
            f"--config.eval_every_updates={every}",
            f"--config.checkpoint_every_updates={every}",
            "--config.eval_in_background=true",
            "--config.keep_best_checkpoints=3",
            "--config.learning_curve=false",
            *overrides,
        ]
        subprocess.run(command, cwd=ROOT, check=True, capture_output=True)
        with open(os.path.join(workdir, "summary.json")) as f:
            summary = json.load(f)
        best = summary["best_checkpoint_dir"]
        steps = [os.path.join(best, s) for s in os.listdir(best) if s.isdigit()]
        size = sum(
            os.path.getsize(os.path.join(d, name))
            for step in steps
            for d, _, names in os.walk(step)
            for name in names
        )
    saves = summary["best_saves"]
    if not saves["written"]:
        raise SystemExit(f"{config}: the run wrote no best params (evaluate more often: --every)")
    return {
        "best_saves": saves,
        "seconds_per_write": round(saves["learner_s"] / saves["written"], 4),
        "bytes_per_best_step": size // max(len(steps), 1),
        "updates": summary["updates"],
        "evaluations": len(summary["evals"]),
        "wall_time_s": summary["wall_time_s"],
        "command": [a if a != workdir else "WORKDIR" for a in command[1:]],
    }


def share_at(seconds_per_write: float, full_config: str, sps_file: str) -> dict:
    """One write per evaluation of `full_config` at the end-to-end SPS of `sps_file`: the
    evaluation period in seconds and the share of it a write takes."""
    from jaxrl_dist.config.cli import parse_args

    config, _ = parse_args(["--config", full_config, "--workdir", "unused"])
    with open(sps_file) as f:
        sps = json.load(f)["stages"]["end_to_end"]["sps"]
    steps_per_update = config.batch_size * config.unroll_length
    period_s = config.eval_every_updates * steps_per_update / sps
    return {
        "full_config": full_config,
        "sps_file": os.path.relpath(sps_file, ROOT),
        "end_to_end_sps": round(sps, 1),
        "eval_every_updates": config.eval_every_updates,
        "env_steps_per_update": steps_per_update,
        "eval_period_s": round(period_s, 2),
        "share_if_every_evaluation_is_a_new_best": round(seconds_per_write / period_s, 6),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", required=True, help="the run (a `:quick` variant)")
    parser.add_argument("--every", type=int, default=2, help="evaluate and save every N updates")
    parser.add_argument("--full-config", default=None, help="the config whose period to use")
    parser.add_argument("--sps-file", default=None, help="a throughput results file")
    parser.add_argument("--name", required=True, help="the results file's name")
    parser.add_argument("--out-dir", default=None)
    parser.add_argument("overrides", nargs="*", help="more --config. overrides, after --")
    provenance.add_argument(parser)
    args = parser.parse_args(argv)
    origin = provenance.capture(args.allow_dirty, devices=False)
    result = {**writes_of_a_run(args.config, args.every, args.overrides), "provenance": origin}
    if args.full_config and args.sps_file:
        result["at_full_config"] = share_at(
            result["seconds_per_write"], args.full_config, args.sps_file
        )
    table = (
        f"{args.config}: {result['best_saves']['written']} best writes of "
        f"{result['bytes_per_best_step']:,} bytes, {result['seconds_per_write'] * 1e3:.1f} ms "
        "of the learner's thread each"
    )
    if "at_full_config" in result:
        at = result["at_full_config"]
        table += (
            f"; {at['full_config']} evaluates every {at['eval_period_s']:.3g} s at "
            f"{at['end_to_end_sps']:,.0f} SPS: at most "
            f"{100 * at['share_if_every_evaluation_is_a_new_best']:.3f}% of it"
        )
    write_result(args.out_dir, args.name, result, table + "\n")


if __name__ == "__main__":
    main()
