"""`benchmarks/best_check.py`'s rule (is a best's fresh score within the noise of what the run
recorded?) and its refusals; its whole run is in the learning results (issue 55)."""

import math
import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
import best_check  # noqa: E402


def test_the_rule_counts_standard_errors_of_the_difference():
    # 500 +/- 0 against 480 +/- 40 on 20 episodes each: one standard error is 40 / sqrt(20).
    se = 40 / math.sqrt(20)
    assert best_check.standard_errors((500.0, 0.0, 20), (480.0, 40.0, 20)) == pytest.approx(20 / se)
    assert best_check.within_noise((500.0, 0.0, 20), (480.0, 40.0, 20), z=3)
    assert not best_check.within_noise((500.0, 0.0, 20), (400.0, 40.0, 20), z=3)
    assert best_check.standard_errors((500.0, 0.0, 20), (500.0, 0.0, 20)) == 0.0
    assert best_check.standard_errors((500.0, 0.0, 20), (499.0, 0.0, 20)) == math.inf


def test_what_a_best_step_recorded_is_read_for_the_run_or_an_agent():
    meta = {
        "eval": {
            "return": 1.0,
            "return_std": 0.5,
            "episodes": 8,
            "a/return": 2.0,
            "a/return_std": 0.25,
        }
    }
    assert best_check.recorded(meta, None) == (1.0, 0.5, 8)
    assert best_check.recorded(meta, "a") == (2.0, 0.25, 8)


def test_a_folder_without_finished_runs_is_refused_in_one_line(tmp_path, capsys):
    assert best_check.main([str(tmp_path), "--out", str(tmp_path / "o.json")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1 and "no finished runs" in err
    assert not (tmp_path / "o.json").exists()
