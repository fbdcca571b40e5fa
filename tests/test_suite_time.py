"""`benchmarks/suite_time.py`, the suite's own timing: a fresh clone's tests timed, raw EnvPool's
speed after them, and the test-seconds by tier and by file. Nothing asserts a speed."""

import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
import suite_time  # noqa: E402


def test_one_ops_test_of_a_fresh_clone_is_timed_with_the_machines_speed(tmp_path):
    """One ops test of a fresh clone of HEAD: the wall time, pytest's line, raw EnvPool's speed
    after it, and the test-seconds read from the clone's own `--durations=0` lines."""
    out = tmp_path / "out"
    argv = ["--pytest-args", "tests/test_gae.py -n 0 -k hand_built", "--raw-seconds", "0.3"]
    assert suite_time.main([*argv, "--out-dir", str(out), "--allow-dirty"]) == 0
    (run,) = json.loads((out / "suite_time.json").read_text())["runs"]
    assert run["exit_code"] == 0 and " passed" in run["pytest"], run
    assert run["raw_envpool_async_sps"]["low"] <= run["raw_envpool_async_sps"]["median"] > 0
    assert list(run["test_seconds_by_file"]) == ["test_gae.py"]
    tiers = run["test_seconds_by_tier"]
    assert tiers["ops"] > 0 and tiers["parts"] == tiers["runs"] == 0
    assert "| 1 |" in (out / "suite_time.md").read_text()


def test_the_seconds_are_summed_by_file_and_by_tier_from_pytests_lines():
    lines = "1.50s call     tests/test_a.py::t\n0.30s setup    tests/test_b.py::u[x]\n"
    lines += "0.50s teardown tests/test_a.py::v\n1 passed in 2.30s"
    files, by_tier = suite_time.test_seconds(lines, {"ops": ("test_b.py",), "parts": ()})
    assert files == {"test_a.py": 2.0, "test_b.py": 0.3}
    assert by_tier == {"ops": 0.3, "parts": 0.0, "runs": 2.0}
