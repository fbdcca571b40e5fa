"""`benchmarks/suite_time.py`, the suite's own timing: a fresh clone's tests timed, raw EnvPool's
speed after them, and the test-seconds by tier and by file. Nothing asserts a speed."""

import json
import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
import compile_census  # noqa: E402
import suite_time  # noqa: E402


def test_one_ops_test_of_a_fresh_clone_is_timed_with_the_machines_speed(tmp_path):
    """One ops test of a fresh clone of HEAD, right after the same test of a baseline's clone
    (here HEAD too): the wall times and their ratio, pytest's line, raw EnvPool's speed after
    each, the test-seconds read from each clone's own `--durations=0` lines, the processes' CPU
    seconds and the compile census of each (the hook ran in the pytest process)."""
    out = tmp_path / "out"
    argv = ["--pytest-args", "tests/test_gae.py -n 0 -k hand_built", "--raw-seconds", "0.3"]
    argv += ["--baseline", "HEAD", "--out-dir", str(out), "--allow-dirty", "--compile-census"]
    assert suite_time.main(argv) == 0
    result = json.loads((out / "suite_time.json").read_text())
    (before,) = result["baseline"]["runs"]
    for run in (*result["runs"], before):
        assert run["exit_code"] == 0 and " passed" in run["pytest"], run
        assert run["raw_envpool_async_sps"]["low"] <= run["raw_envpool_async_sps"]["median"] > 0
        assert list(run["test_seconds_by_file"]) == ["test_gae.py"]
        tiers = run["test_seconds_by_tier"]
        assert tiers["ops"] > 0 and tiers["parts"] == tiers["runs"] == 0
        assert run["cpu_s"] > 0
        totals = run["compile_census"]["totals"]
        assert totals["processes"] == 1 and totals["lower_s"] > 0 and totals["small_n"] > 0
        assert list(run["compile_census"]["by_test_file"]) == ["test_gae.py"]
    (ratio,) = result["baseline"]["wall_ratios"]
    assert ratio == round(result["runs"][0]["wall_s"] / before["wall_s"], 4)
    assert result["baseline"]["commit"] == result["provenance"]["source"]["git_commit"]
    table = (out / "suite_time.md").read_text()
    assert "| 1, baseline " in table and f"over the baseline's, run by run: {ratio:.3f}" in table
    assert "Run 1: " in table and "Compile census (1 processes with JAX)" in table


def test_the_census_tells_hits_programs_and_small_compiles_apart(tmp_path):
    """A process's records as the hook writes them: a thread's backend compile right after its
    cache hit is the hit's (another thread's compile in between is not); one over `BIG_S` a
    program; the rest small; each counted by test file."""
    compile = "/jax/core/compile/backend_compile_duration"
    test = "tests/test_x.py::t (call)"
    records = [
        {"event": "/jax/core/compile/jaxpr_trace_duration", "seconds": 0.5, "fun": "f"},
        {
            "event": "/jax/core/compile/jaxpr_to_mlir_module_duration",
            "seconds": 0.25,
            "fun": "jit(f)",
        },
        {"event": compile, "seconds": 2.0, "fun": "jit(f)", "test": test},
        {"event": "/jax/compilation_cache/cache_hits", "thread": 1},
        {"event": compile, "seconds": 0.01, "fun": "jit(add)", "thread": 2},  # another thread's
        {"event": compile, "seconds": 0.5, "fun": "jit(f)", "test": test, "thread": 1},
        {"event": "exit", "cpu_s": 7.0, "argv": ["x"]},
    ]
    lines = "".join(json.dumps(r) + "\n" for r in records)
    (tmp_path / "1.jsonl").write_text(lines + '{"event": "cut')  # a line cut by a kill
    result = compile_census.census(str(tmp_path))
    assert result["totals"] == {
        "processes": 1, "exited_cpu_s": 7.0, "trace_s": 0.5, "lower_s": 0.2,
        "program_n": 1, "program_s": 2.0, "hit_n": 1, "hit_s": 0.5, "small_n": 1, "small_s": 0.0,
    }  # fmt: skip
    assert result["by_function"]["jit(f)"]["program_n"] == 1
    assert result["by_test_file"]["test_x.py"] == {
        "program_n": 1,
        "program_s": 2.0,
        "hit_n": 1,
        "hit_s": 0.5,
    }


def test_a_baseline_that_is_no_commit_is_refused_in_one_line(tmp_path, capsys):
    out = tmp_path / "out"
    with pytest.raises(SystemExit) as stop:
        suite_time.main(["--baseline", "no-such-commit", "--out-dir", str(out)])
    assert stop.value.code == 2 and not out.exists()
    assert "--baseline no-such-commit: no such commit" in capsys.readouterr().err


def test_the_seconds_are_summed_by_file_and_by_tier_from_pytests_lines():
    lines = "1.50s call     tests/test_a.py::t\n0.30s setup    tests/test_b.py::u[x]\n"
    lines += "0.50s teardown tests/test_a.py::v\n1 passed in 2.30s"
    files, by_tier = suite_time.test_seconds(lines, {"ops": ("test_b.py",), "parts": ()})
    assert files == {"test_a.py": 2.0, "test_b.py": 0.3}
    assert by_tier == {"ops": 0.3, "parts": 0.0, "runs": 2.0}
    assert suite_time.test_seconds(lines, {}) == (files, None)  # a baseline without tiers
