"""The GPU check: every GPU measurement this project needs, in priority order, inside one budget.

    python benchmarks/gpu_check.py --budget-s 480 --out-dir DIR [--archive FILE.tar.gz]
    python benchmarks/gpu_check.py --tiny --budget-s 90 --out-dir DIR    # CPU smoke (the test)

Each part is its own process under its own timeout (the smaller of its cap and the budget
left), its output in `DIR/<part>.log`, its results beside it; a part that fails or runs out
of time costs only itself. After every part `DIR/gpu_check.json` and `gpu_check.md` (each part's
status, wall time and headline figure) are rewritten and, with `--archive`, the whole folder is
packed again, so a check cut off keeps what it measured. The parts, most wanted first:

1. `breakout`: Breakout-v5 (`configs/impala_atari.py`) end to end against raw EnvPool async at
   the same layout, the config as written (the XLA actor loop, two env groups per actor
   thread) and the other layouts (`sweep.py --grid gpu_actors`: the Python loop on async
   pools, the XLA loop on one pool, actor threads, envs per thread);
2. `anakin_ppo`: Anakin PPO CartPole against `purejaxrl_ppo.py` at 1, 8 and 256 seeds;
3. `central_local`: central against local inference, 8 actor threads (`throughput.py`);
4. `determinism`: two deterministic runs give identical params (`tests/gpu_determinism_runs.py`);
5. `recurrent`: what an LSTM core costs (`recurrent_throughput.py`, each row written as it ends);
6. `learning_python`: IMPALA on Breakout with the Python actor loop on async pools (the
   default until 2026-11-27) for at most 210 s, its curve saved;
7. `learning`: IMPALA on Breakout, the config as written, for the time left, its curve saved
   (`learning_curve.png`); with 6, the two loops' returns at the same env steps.

`gpu_check.json` records its provenance (`provenance.py`: commit, dirty flag and diff hash, the
machine) and each part's result its own; a tree with uncommitted changes is refused before any
part starts unless `--allow-dirty`, which a copy of the tree without `.git` (a lent machine
that got the files only) needs too, and then records no commit.

Children share a persistent compilation cache (`--cache-dir`), so a program compiled by one part
is loaded by the next. `--tiny` runs every part with CartPole-sized settings and a few seconds
each, so `tests/test_gpu_check.py` proves the commands on a CPU. A GPU node without a package
index gets EnvPool, gymnax, pgx, ml-collections and tensorboardX from
`bash benchmarks/offline_bundle.sh .offline 3.12` (README, "One GPU with 16 cores").
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import time
from collections.abc import Callable

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import provenance  # noqa: E402

from jaxrl_dist.compilation import MIN_COMPILE_S  # noqa: E402  (imports jax; starts no device)
from jaxrl_dist.errors import OneLineArgumentParser, UsageError  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
CONFIGS = os.path.join(ROOT, "configs")
ATARI = os.path.join(CONFIGS, "impala_atari.py")
CARTPOLE = os.path.join(CONFIGS, "impala_cartpole.py")
PY = sys.executable
# The check takes the tree's provenance (or refuses a dirty tree) once, before any part: its
# parts then record the tree as it is rather than refusing it again.
RECORD_TREE = ("--allow-dirty",)
PYTHON_LOOP = (
    "--config.sebulba.actor_loop=python",
    "--config.sebulba.async_envs=True",
    "--config.sebulba.env_groups_per_actor=1",
)


@dataclasses.dataclass(frozen=True)
class Part:
    """One measurement: its command (on the GPU, or `tiny` for the CPU smoke test), the most
    time it may take (`cap_s`; None: whatever is left), the least worth starting with, and a
    one-line headline read from what it wrote."""

    name: str
    command: Callable[[str, bool, float], list[str]]  # (out_dir, tiny, timeout_s) -> argv
    cap_s: float | None
    min_s: float
    headline: Callable[[str], str]


def _json(out_dir: str, name: str) -> dict:
    with open(os.path.join(out_dir, name)) as f:
        return json.load(f)


def breakout_command(out_dir: str, tiny: bool, _timeout_s: float) -> list[str]:
    config, grid, seconds = (CARTPOLE, "smoke", "0.5") if tiny else (ATARI, "gpu_actors", "10")
    return [
        *(PY, os.path.join(HERE, "sweep.py"), "--config", config, "--grid", grid),
        *("--seconds", seconds, "--final-repeat", "0", "--name", "breakout", "--out-dir", out_dir),
        *RECORD_TREE,
    ]


def breakout_headline(out_dir: str) -> str:
    points = _json(out_dir, "breakout.json")["points"]
    shown = []
    for p in points:
        label = p["point"] + (f" {_short(p['overrides'])}" if p["overrides"] else "")
        if "error" in p:
            shown.append(f"{label}: failed ({p['error'][:200]})")
        else:
            start = p.get("phases_s", {}).get("to_first_log")
            shown.append(
                f"{label}: {p['end_to_end_sps']:,.0f} SPS, {p['over_raw_async']:.2f}"
                + (f", first log after {start:.0f} s" if start is not None else "")
            )
    return "; ".join(shown) + " (end to end, of raw EnvPool async at the same layout)"


def _short(overrides: dict) -> str:
    return ",".join(f"{k.removeprefix('num_')}={v}" for k, v in overrides.items())


def central_local_command(out_dir: str, tiny: bool, _timeout_s: float) -> list[str]:
    layout = [
        "--config.sebulba.num_actor_threads=8"
        if not tiny
        else "--config.sebulba.num_actor_threads=2",
        "--config.sebulba.envs_per_actor=64" if not tiny else "--config.sebulba.envs_per_actor=16",
        "--config.sebulba.env_threads_per_actor=2"
        if not tiny
        else "--config.sebulba.env_threads_per_actor=1",
    ]
    return [
        *(PY, os.path.join(HERE, "throughput.py"), "--config", CARTPOLE if tiny else ATARI),
        *PYTHON_LOOP,
        *layout,
        *("--stages", "raw_async,end_to_end,end_to_end_central", "--repeat", "1"),
        *("--seconds", "0.5" if tiny else "10", "--no-plot"),
        *("--name", "central_local", "--out-dir", out_dir),
        *RECORD_TREE,
    ]


def central_local_headline(out_dir: str) -> str:
    stages = _json(out_dir, "central_local.json")["stages"]
    sps = {k: v.get("sps") or v.get("error") for k, v in stages.items()}
    local, central = sps.get("end_to_end"), sps.get("end_to_end_central")
    if not all(isinstance(v, float) for v in (local, central)):
        return f"stages: {sps}"
    return f"local {local:,.0f} SPS, central {central:,.0f} SPS ({central / local:.2f}x)"


def determinism_command(out_dir: str, tiny: bool, _timeout_s: float) -> list[str]:
    runs = os.path.join(ROOT, "tests", "gpu_determinism_runs.py")
    return [PY, runs, os.path.join(out_dir, "determinism")]


def determinism_headline(out_dir: str) -> str:
    result = _json(os.path.join(out_dir, "determinism"), "determinism.json")
    same = "identical" if result["identical"] else "DIFFERENT"
    return f"two deterministic runs of {result['updates']} updates: params {same}"


def anakin_command(out_dir: str, tiny: bool, _timeout_s: float) -> list[str]:
    # tiny: the 1-seed programs (the count 1 reads the pairs' rows: nothing measured twice)
    steps, seeds = ("2048", "1") if tiny else ("499712", "8,256")
    return [
        *(PY, os.path.join(HERE, "anakin_throughput.py"), "--repeat", "1", "--skip-separate"),
        *("--steps", steps, "--seeds", seeds, "--out-dir", out_dir),
        *RECORD_TREE,
    ]


def anakin_headline(out_dir: str) -> str:
    result = _json(out_dir, "anakin_throughput.json")
    counts = sorted(
        int(k.split("_")[1]) for k in result if k.startswith("anakin_") and k.endswith("_seeds")
    )
    ratios = [f"1 seed {result['anakin_over_baseline_median']:.2f}"]
    for n in counts:
        anakin, base = result[f"anakin_{n}_seeds"]["sps"], result[f"baseline_{n}_seeds"]["sps"]
        ratios.append(f"{n} seeds vmapped {anakin / base:.2f} ({anakin:,.0f} SPS)")
    return "Anakin / PureJaxRL-style baseline: " + ", ".join(ratios)


def recurrent_command(out_dir: str, tiny: bool, _timeout_s: float) -> list[str]:
    steps, rows = ("1024", "anakin_ppo") if tiny else ("50176", "ppo,impala,anakin_ppo")
    return [
        *(PY, os.path.join(HERE, "recurrent_throughput.py"), "--repeat", "1"),
        *("--steps", steps, "--rows", rows, "--out-dir", out_dir),
        *RECORD_TREE,
    ]


def recurrent_headline(out_dir: str) -> str:
    rows = _json(out_dir, "recurrent_throughput.json")["rows"]
    return "LSTM / no core: " + ", ".join(f"{k} {v['median_ratio']:.2f}" for k, v in rows.items())


LEARNING_MARGIN_S = 60  # the final evaluation, save and curve after the wall-time stop


def learning_command(
    out_dir: str, tiny: bool, timeout_s: float, name: str = "learning", extra: tuple = ()
) -> list[str]:
    workdir = os.path.join(out_dir, name)
    config = CARTPOLE + ":quick" if tiny else ATARI
    return [
        *(PY, os.path.join(ROOT, "scripts", "train.py"), "--config", config, *extra),
        *("--workdir", workdir, "--quiet", "--config.learning_curve=True"),
        f"--config.max_wall_time_s={max(timeout_s - LEARNING_MARGIN_S, 1):.0f}",
        "--config.eval_every_updates=0",  # episodes' training returns draw the curve
        "--config.eval_episodes=8",
        "--config.eval_mode=sampled",
        "--config.checkpoint_every_updates=0",
    ]


def learning_headline(out_dir: str, name: str = "learning") -> str:
    summary = _json(os.path.join(out_dir, name), "summary.json")
    return (
        f"{summary['env_steps']:,} env steps in "
        f"{summary['wall_time_s']:.0f} s, {summary['sps']:,.0f} SPS; final evaluation "
        f"return {summary['final_eval_return']}"
    )


# The Python actor loop (the Atari default until 2026-11-27) learns beside the config as written
# (the XLA loop, two env groups per actor thread), for the same seed and a fixed wall time, so
# both curves can be read at the same env steps.
PYTHON_CAP_S = 210

PARTS = (
    Part("breakout", breakout_command, cap_s=300, min_s=60, headline=breakout_headline),
    Part("anakin_ppo", anakin_command, 150, 45, anakin_headline),
    Part("central_local", central_local_command, 120, 50, central_local_headline),
    Part("determinism", determinism_command, 60, 30, determinism_headline),
    Part("recurrent", recurrent_command, 160, 40, recurrent_headline),
    Part(
        "learning_python",
        functools.partial(learning_command, name="learning_python", extra=PYTHON_LOOP),
        PYTHON_CAP_S,
        LEARNING_MARGIN_S + 30,
        functools.partial(learning_headline, name="learning_python"),
    ),
    Part("learning", learning_command, None, LEARNING_MARGIN_S + 30, learning_headline),
)


def run_part(part: Part, out_dir: str, tiny: bool, timeout_s: float, env: dict) -> dict:
    """Runs one part in its own process group (a timeout kills its children too)."""
    argv = part.command(out_dir, tiny, timeout_s)
    record = {"part": part.name, "command": " ".join(argv), "timeout_s": round(timeout_s)}
    t0 = time.perf_counter()
    with open(os.path.join(out_dir, f"{part.name}.log"), "w") as log:
        proc = subprocess.Popen(
            argv, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT, env=env, start_new_session=True
        )
        try:
            rc = proc.wait(timeout=timeout_s)
            record["status"] = "ok" if rc == 0 else f"failed (exit {rc})"
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            record["status"] = "timed out"
        except BaseException:  # the check itself stopped: its part must not run on alone
            os.killpg(proc.pid, signal.SIGKILL)
            raise
    record["wall_s"] = round(time.perf_counter() - t0, 1)
    try:
        record["headline"] = part.headline(out_dir)
    except (OSError, KeyError, ValueError, TypeError) as e:  # nothing (or half) written
        record["headline"] = f"no result ({type(e).__name__}: {e})"
    print(f"{part.name}: {record['status']} in {record['wall_s']} s: {record['headline']}")
    return record


def markdown(result: dict) -> str:
    lines = [
        f"GPU check on {result['device']}, {result['cpu_count']} cores, {result['date']}, "
        f"budget {result['budget_s']:.0f} s{' (tiny)' if result['tiny'] else ''}",
        "",
        "| part | status | wall s | headline |",
        "|---|---|---:|---|",
    ]
    for r in result["parts"]:
        lines.append(f"| {r['part']} | {r['status']} | {r.get('wall_s', '')} | {r['headline']} |")
    return "\n".join(lines) + "\n"


def save(result: dict, out_dir: str, archive: str | None) -> None:
    with open(os.path.join(out_dir, "gpu_check.json"), "w") as f:
        json.dump(result, f, indent=2)
    with open(os.path.join(out_dir, "gpu_check.md"), "w") as f:
        f.write(markdown(result))
    if archive:  # written whole, then moved: a cut-off check never leaves half an archive
        with tarfile.open(archive + ".partial", "w:gz") as tar:
            tar.add(out_dir, arcname=os.path.basename(os.path.normpath(out_dir)), filter=_small)
        os.replace(archive + ".partial", archive)


def _small(info: tarfile.TarInfo) -> tarfile.TarInfo | None:
    """Checkpoints stay out of the archive: the results are what comes back."""
    return None if "/checkpoints" in info.name else info


def main(argv: list[str] | None = None) -> int:
    try:
        args = parse(argv)
    except UsageError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return check(args, argv)


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = OneLineArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget-s", type=float, required=True, help="wall time for all parts")
    parser.add_argument("--out-dir", required=True, help="results and logs (created)")
    parser.add_argument("--archive", default=None, help="a .tar.gz of out-dir after every part")
    parser.add_argument("--parts", default=",".join(p.name for p in PARTS), help="a subset")
    parser.add_argument("--cache-dir", default=None, help="compilation cache for all parts")
    parser.add_argument("--tiny", action="store_true", help="CartPole-sized parts: a CPU smoke")
    provenance.add_argument(parser)
    args = parser.parse_args(argv)
    chosen = [p for p in args.parts.split(",") if p]
    unknown = sorted(set(chosen) - {p.name for p in PARTS})
    if unknown or args.budget_s <= 0:
        raise UsageError(
            f"--parts {unknown} or --budget-s {args.budget_s} is invalid: parts are "
            f"{','.join(p.name for p in PARTS)}, the budget > 0 seconds"
        )
    args.parts = chosen
    return args


def check(args: argparse.Namespace, argv: list[str] | None) -> int:
    """Runs the chosen parts in priority order inside the budget; 0 if every part passed."""
    out_dir = os.path.abspath(args.out_dir)
    if os.path.exists(os.path.join(out_dir, "gpu_check.json")):  # its files would be read
        print(
            f"error: --out-dir {out_dir} holds an earlier check; give a new folder", file=sys.stderr
        )
        return 2
    origin = provenance.capture(args.allow_dirty, devices=False)  # the parts need the device
    os.makedirs(out_dir, exist_ok=True)
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [ROOT, env.get("PYTHONPATH")]))
    if args.cache_dir:  # else the caller's JAX_COMPILATION_CACHE_DIR, or one beside out-dir
        env["JAX_COMPILATION_CACHE_DIR"] = args.cache_dir
    env.setdefault("JAX_COMPILATION_CACHE_DIR", os.path.join(os.path.dirname(out_dir), "cache"))
    # JAX's own variable set, JAX's 1 s minimum would apply: keep what the library's default
    # cache keeps (a run's start is many small programs).
    env.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", str(MIN_COMPILE_S))
    result = {
        "device": provenance.nvidia_smi_name(),
        "cpu_count": os.cpu_count(),
        "date": time.strftime("%Y-%m-%d %H:%M"),
        "budget_s": args.budget_s,
        "tiny": args.tiny,
        "command": " ".join([PY, *(sys.argv if argv is None else ["gpu_check.py", *argv])]),
        "provenance": origin,
        "parts": [],
    }
    t0 = time.perf_counter()  # the budget is the parts'
    for part in (p for p in PARTS if p.name in args.parts):
        left = args.budget_s - (time.perf_counter() - t0)
        if left < (0 if args.tiny else part.min_s) or left <= 0:
            record = {"part": part.name, "status": "skipped", "headline": f"{left:.0f} s left"}
        else:
            timeout = left if part.cap_s is None else min(part.cap_s, left)
            record = run_part(part, out_dir, args.tiny, timeout, env)
        result["parts"].append(record)
        save(result, out_dir, args.archive)
    for name in ("learning_python", "learning"):
        shutil.rmtree(os.path.join(out_dir, name, "checkpoints"), ignore_errors=True)
    print(markdown(result))
    return 0 if all(r["status"] == "ok" for r in result["parts"]) else 1


if __name__ == "__main__":
    sys.exit(main())
