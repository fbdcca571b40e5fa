"""The test suite's time in fresh clones, with the machine's speed beside each run.

    python benchmarks/suite_time.py --runs 3        # three fresh clones, one after another
    python benchmarks/suite_time.py --baseline 394a580   # and an older commit right before each

Each run clones this checkout at the commit it started on into a temporary folder (so the
compilation cache, `.jax_cache/` in the checkout, starts cold, as on CI) and times the README's
test command there (`python -m pytest -q`, with `--durations=0` so that every test's seconds are
kept; the install is not timed: CI's `.ci/run` adds it). The clone's own code runs, in the
pytest processes and in every process they start (`PYTHONPATH`). Right after, raw EnvPool's
speed (`throughput.py --stages raw_async`, 3 x 10 s): the yardstick that says how fast the
machine was (CartPole async on this project's 2-core machine: about 593k SPS on a normal day,
120k-150k on its slow ones), since a suite's minutes mean nothing without it.

Written to `benchmarks/results/cpu/suite_time.json` (and `.md`; `--name`, `--out-dir`): per run
the wall seconds, pytest's last line, the raw SPS (median and range), the 1-minute load
average before it, and the test-seconds (setup, call and teardown as pytest reports them) by
tier (`ops`, `parts`, `runs`: `tests/conftest.py`) and by file. Test-seconds add up the two
workers' time, so they sum to about twice the wall time; they say where the time goes.
`--pytest-args` picks fewer tests (the suite's own test of this script runs one file).
Each run also records the CPU seconds of the suite's processes (all of them, children included),
and with `--compile-census` where JAX's compile time went (`compile_census.py`: tracing,
lowering, backend compiles and cache hits, by function and by test file, over every process).

`--baseline COMMIT` times that commit's suite too, in a fresh clone of its own right before each
run of this one (same hour, same machine): a slow day slows both, so the ratio of the two wall
times carries over to a normal day where the minutes do not (the baseline's minutes on a normal
day, from the tests page, times the ratio). A baseline whose `conftest.py` has no tiers has its
test-seconds by file only.
"""

from __future__ import annotations

import argparse
import ast
import collections
import json
import os
import re
import resource
import shlex
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

import compile_census  # noqa: E402
import provenance  # noqa: E402

RESULTS = os.path.join(HERE, "results", "cpu")
DURATION = re.compile(r"^\s*([\d.]+)s (?:call|setup|teardown)\s+(tests/[^:\s]+)::")
RAW = ["--config", "configs/impala_cartpole.py", "--stages", "raw_async", "--no-plot"]


def _tiers(clone: str) -> dict[str, tuple[str, ...]]:
    """The clone's `OPS` and `PARTS` lists, read from its `tests/conftest.py` without importing
    it (importing sets the suite's XLA flags and cache in this process)."""
    with open(os.path.join(clone, "tests", "conftest.py")) as f:
        tree = ast.parse(f.read())
    lists = {}  # empty where the clone predates the tiers
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            name = getattr(node.targets[0], "id", None)
            if name in ("OPS", "PARTS"):
                lists[name.lower()] = ast.literal_eval(node.value)
    return lists


def test_seconds(output: str, tiers: dict[str, tuple[str, ...]]) -> tuple[dict, dict | None]:
    """(seconds by file, seconds by tier) from pytest's `--durations=0` lines in `output`; no
    tiers (None) where `tiers` is empty."""
    by_file: collections.Counter = collections.Counter()
    for line in output.splitlines():
        match = DURATION.match(line)
        if match:
            by_file[os.path.basename(match.group(2))] += float(match.group(1))
    files = {name: round(s, 1) for name, s in by_file.most_common()}
    if not tiers:
        return files, None
    by_tier: collections.Counter = collections.Counter()
    for name, seconds in by_file.items():
        tier = next((t for t, files in tiers.items() if name in files), "runs")
        by_tier[tier] += seconds
    return files, {tier: round(by_tier[tier], 1) for tier in ("ops", "parts", "runs")}


def raw_envpool_sps(scratch: str, seconds: float) -> dict:
    """Raw EnvPool async CartPole SPS (3 repeats): median, low, high. This checkout's
    `throughput.py` measures after every run, a baseline's too: one yardstick (an older
    script may lack a flag), written under `scratch`."""
    out = os.path.join(scratch, "raw_sps")
    argv = [sys.executable, os.path.join(HERE, "throughput.py"), *RAW]
    argv += ["--seconds", str(seconds), "--repeat", "3", "--out-dir", out, "--allow-dirty"]
    subprocess.run(argv, cwd=ROOT, check=True, capture_output=True, env=_env(ROOT))
    with open(os.path.join(out, "impala_cartpole.json")) as f:
        repeats = [r["sps"] for r in json.load(f)["repeats"]["raw_async"]]
    return {
        "median": round(statistics.median(repeats)),
        "low": round(min(repeats)),
        "high": round(max(repeats)),
    }


def _env(clone: str, census: str | None = None) -> dict:
    """The clone's code first on the path; with `census`, the compile hook too, writing there.
    No JAX_COMPILATION_CACHE_DIR of the caller's (this suite's own test sets one): the clone's
    suite starts from the clone's empty cache."""
    env = {k: v for k, v in os.environ.items() if k != "JAX_COMPILATION_CACHE_DIR"}
    if census is None:
        return {**env, "PYTHONPATH": clone}
    path = os.pathsep.join([clone, os.path.join(HERE, "compile_hook")])
    return {**env, "PYTHONPATH": path, "JAXRL_DIST_COMPILE_CENSUS": census}


def _commit(name: str) -> str | None:
    """The full hash of commit `name` in this checkout, or None."""
    found = provenance._git(ROOT, "rev-parse", "--verify", "--quiet", f"{name}^{{commit}}")
    return found.strip() if found else None


def _children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def one_run(commit: str, pytest_args: list[str], raw_seconds: float, census: bool = False) -> dict:
    """A fresh clone at `commit`, its suite timed (with `census`, its compile census), then raw
    EnvPool's speed."""
    with tempfile.TemporaryDirectory(prefix="suite_time_") as parent:
        clone = os.path.join(parent, "clone")
        subprocess.run(["git", "clone", "-q", ROOT, clone], check=True)
        subprocess.run(["git", "-C", clone, "checkout", "-q", commit], check=True)
        records = os.path.join(parent, "census") if census else None
        if records:
            os.makedirs(records)
        load = os.getloadavg()[0]
        command = [sys.executable, "-m", "pytest", "-q", "--durations=0", *pytest_args]
        t0, cpu0 = time.perf_counter(), _children_cpu_s()
        env = _env(clone, records)
        proc = subprocess.run(command, cwd=clone, capture_output=True, text=True, env=env)
        wall, cpu = time.perf_counter() - t0, _children_cpu_s() - cpu0
        lines = proc.stdout.strip().splitlines()
        files, tiers = test_seconds(proc.stdout, _tiers(clone))
        run = {
            "wall_s": round(wall, 1),
            "cpu_s": round(cpu, 1),
            "exit_code": proc.returncode,
            "pytest": lines[-1] if lines else proc.stderr.strip()[-300:],
            "load_average_1min_before": round(load, 2),
            "raw_envpool_async_sps": raw_envpool_sps(parent, raw_seconds),
            "test_seconds_by_tier": tiers,
            "test_seconds_by_file": files,
        }
        if records:
            run["compile_census"] = compile_census.census(records)
        return run


def _row(label: str, run: dict) -> str:
    raw, tiers = run["raw_envpool_async_sps"], run["test_seconds_by_tier"]
    minutes, seconds = divmod(round(run["wall_s"]), 60)
    split = (
        "-" if tiers is None else " / ".join(f"{tiers[t]:.0f}" for t in ("ops", "parts", "runs"))
    )
    return (
        f"| {label} | {minutes} min {seconds} s | {run['pytest']} | {raw['median']:,} "
        f"({raw['low']:,}-{raw['high']:,}) | {split} |"
    )


def markdown(result: dict) -> str:
    rows = [
        "| run | wall | pytest | raw EnvPool async SPS (median, range) | ops / parts / runs "
        "test-s |",
        "|---|---|---|---|---|",
    ]
    commit = (result["provenance"]["source"]["git_commit"] or "?")[:7]
    baseline = result.get("baseline")
    for i, run in enumerate(result["runs"], 1):
        if baseline:
            rows.append(_row(f"{i}, baseline {baseline['commit'][:7]}", baseline["runs"][i - 1]))
        rows.append(_row(f"{i}" + (f", {commit}" if baseline else ""), run))
    text = f"# Suite time at {commit}\n\n" + "\n".join(rows) + "\n"
    if baseline:
        ratios = ", ".join(f"{r:.3f}" for r in baseline["wall_ratios"])
        text += f"\nWall time over the baseline's, run by run: {ratios}.\n"
    for i, run in enumerate(result["runs"], 1):
        if "compile_census" in run:
            text += f"\nRun {i}: {run['cpu_s']:.0f} CPU s. " + compile_census.markdown(
                run["compile_census"]
            )
    return text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1, help="fresh clones, one after another")
    parser.add_argument("--pytest-args", default="", help="instead of the whole suite")
    parser.add_argument("--raw-seconds", type=float, default=10.0, help="per raw SPS repeat")
    parser.add_argument("--out-dir", default=RESULTS)
    parser.add_argument("--name", default="suite_time")
    parser.add_argument("--baseline", help="a commit timed right before each run (a ratio)")
    parser.add_argument(
        "--compile-census", action="store_true", help="where compile time goes (slower runs)"
    )
    provenance.add_argument(parser)
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error(f"--runs {args.runs}: give at least 1")
    baseline = _commit(args.baseline) if args.baseline else None
    if args.baseline and baseline is None:
        parser.error(f"--baseline {args.baseline}: no such commit here; give one `git log` shows")
    # Only HEAD is cloned: a dirty tree's changes would not run (--allow-dirty records them).
    origin = provenance.capture(args.allow_dirty, devices=False)
    result = {"provenance": origin, "pytest_args": args.pytest_args, "runs": []}
    os.makedirs(args.out_dir, exist_ok=True)
    commit = origin["source"]["git_commit"]  # every run the same code, whatever lands meanwhile
    if baseline:
        result["baseline"] = {"commit": baseline, "runs": [], "wall_ratios": []}
    pytest_args = shlex.split(args.pytest_args)
    for i in range(args.runs):
        if baseline:
            before = one_run(baseline, pytest_args, args.raw_seconds, args.compile_census)
            result["baseline"]["runs"].append(before)
            print(f"run {i + 1}, baseline: {before['wall_s']} s, {before['pytest']}", flush=True)
        result["runs"].append(one_run(commit, pytest_args, args.raw_seconds, args.compile_census))
        run = result["runs"][-1]
        print(f"run {i + 1}: {run['wall_s']} s, {run['pytest']}", flush=True)
        if baseline:
            result["baseline"]["wall_ratios"].append(round(run["wall_s"] / before["wall_s"], 4))
        with open(os.path.join(args.out_dir, f"{args.name}.json"), "w") as f:  # after each run
            json.dump(result, f, indent=2)
    with open(os.path.join(args.out_dir, f"{args.name}.md"), "w") as f:
        f.write(markdown(result))
    print(markdown(result))
    return 0 if all(r["exit_code"] == 0 for r in result["runs"]) else 1


if __name__ == "__main__":
    sys.exit(main())
