"""The statistics over seeds (benchmarks/seed_statistics.py, Agarwal et al. 2021) against the
numbers rliable itself gives, and what learning.py, restate_learning.py and compare_learning.py
make of them: first crossing against holding at the end, IQMs with intervals, the probability of
improvement of one sweep over another. Pure functions and files in tmp_path; nothing trains."""

import copy
import json
import os
import sys

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
import compare_learning  # noqa: E402
import learning_report  # noqa: E402
import restate_learning  # noqa: E402
import seed_statistics as stats  # noqa: E402

# rliable's own tests (tests/rliable/metrics_test.py at google-research/rliable 3ccd9f4): score
# matrices of 4 and 3 runs on 2 tasks, IQM 1.5 and 2, probability of improvement of x over y 1/3.
RLIABLE_X = [[1, 2], [2, 2], [1, 1], [2, 1]]
RLIABLE_Y = [[1, 1], [2, 2], [3, 3]]
# Two sweeps' last evaluations (impala_cartpole_issue41: 20 seeds; gym_impala_cartpole: 10).
ISSUE41 = [181.95, 480.3, 495.55, 500.0, 338.7, 210.9, 500.0, 500.0, 291.5, 74.05]
ISSUE41 += [468.6, 500.0, 500.0, 500.0, 176.4, 500.0, 462.1, 399.25, 210.8, 500.0]
GYM = [463.15, 340.2, 133.15, 500.0, 500.0, 127.6, 438.0, 402.5, 281.7, 500.0]
# What rliable 1.2.0 (arch 7.2.0, NumPy 2.4.6, SciPy 1.17.1, Python 3.11) printed for them after
# np.random.seed(0): rly.get_interval_estimates({k: scores}, lambda s:
# np.array([metrics.aggregate_iqm(s)]), reps=50000) and, for pairs, get_interval_estimates({"x,y":
# [x, y]}, metrics.probability_of_improvement, reps=2000).
RLIABLE_IQM = {  # name: (scores [runs, tasks], IQM, 95% interval)
    "issue41": (np.array(ISSUE41)[:, None], 443.6, (331.9741250000001, 494.445)),
    "gym": (np.array(GYM)[:, None], 404.2583333333334, (262.06666666666666, 477.60833333333335)),
    "grid": (np.arange(80.0).reshape(5, 16), 39.5, (32.55, 46.5)),  # rliable's library_test x
}
RLIABLE_IMPROVEMENT = {  # (x, y): (P(X > Y), 95% interval)
    "issue41,gym": (ISSUE41, GYM, 0.565, (0.34, 0.775)),
    "x,y": (RLIABLE_X, RLIABLE_Y, 1 / 3, (0.08333333333333333, 0.625)),
}


def test_iqm_and_improvement_give_rliables_own_test_numbers():
    assert stats.iqm(RLIABLE_X) == 1.5 and stats.iqm(RLIABLE_Y) == 2.0
    assert stats.probability_of_improvement(RLIABLE_X, RLIABLE_Y) == pytest.approx(1 / 3)
    assert stats.probability_of_improvement(RLIABLE_Y, RLIABLE_X) == pytest.approx(2 / 3)
    assert stats.probability_of_improvement(GYM, GYM) == 0.5  # a sweep against itself
    assert stats.iqm([1, 2, 3, 4, 100]) == 3.0  # the middle three of five: the outlier is out


@pytest.mark.parametrize("name", sorted(RLIABLE_IQM))
def test_the_iqm_interval_is_rliables_to_the_last_bit(name):
    scores, expected_iqm, expected_ci = RLIABLE_IQM[name]
    assert stats.iqm(scores) == pytest.approx(expected_iqm, rel=1e-12)
    low, high = stats.stratified_bootstrap_ci(scores, reps=50_000, seed=0)
    assert (low, high) == pytest.approx(expected_ci, rel=1e-12)


@pytest.mark.parametrize("pair", sorted(RLIABLE_IMPROVEMENT))
def test_the_improvement_interval_is_rliables_to_the_last_bit(pair):
    x, y, expected, expected_ci = RLIABLE_IMPROVEMENT[pair]
    assert stats.probability_of_improvement(x, y) == pytest.approx(expected, rel=1e-12)
    assert stats.improvement_ci(x, y, reps=2000, seed=0) == pytest.approx(expected_ci, rel=1e-12)


def _seed(seed, curve, target=475.0, budget=10**6):
    reached = [steps for steps, value in curve if value >= target and steps <= budget]
    return {
        "seed": seed,
        "success": bool(reached),
        "env_steps_to_target": reached[0] if reached else None,
        "seconds_to_target": reached[0] / 1000 if reached else None,
        "best_eval_return": max(v for _, v in curve),
        "final_eval_return": curve[-1][1],
        "command_s": 1.0,
        "error": None,
        "metrics": {},
        "eval_curve": [list(point) for point in curve],
    }


SEEDS = [
    _seed(0, [(1000, 100.0), (2000, 500.0), (3000, 200.0)]),  # crosses, falls back
    _seed(1, [(1000, 480.0), (2000, 490.0)]),  # crosses and holds
    _seed(2, [(1000, 300.0), (2000, 410.0)]),  # never crosses
    _seed(3, [(1000, 100.0), (3000, 476.0)]),  # crosses at the end
]


def test_a_seed_that_crosses_the_target_need_not_hold_it_at_its_last_evaluation():
    agg = learning_report.aggregate(SEEDS, 475.0)
    assert (agg["successes"], agg["held"], agg["held_seeds"]) == (3, 2, [1, 3])
    finals = [200.0, 490.0, 410.0, 476.0]  # four: 25% off each end leaves the middle two
    assert agg["final_eval_iqm"]["iqm"] == pytest.approx((410.0 + 476.0) / 2)
    assert agg["final_eval_iqm"]["runs"] == 4
    low, high = agg["final_eval_iqm"]["ci95"]
    assert min(finals) <= low <= agg["final_eval_iqm"]["iqm"] <= high <= max(finals)
    crossed = agg["env_steps_to_target_iqm"]  # the three that crossed: 2000, 1000, 3000
    assert crossed["runs"] == 3 and crossed["iqm"] == 2000.0
    result = {"target": 475.0, "budget": 10**6, "load": 0, "per_seed": SEEDS, "aggregate": agg}
    text = learning_report.table(result)
    assert "3/4 seeds reach 475 within 1,000,000 env steps (load 0); 2/4 hold it" in text
    assert "| 0 | 2,000 | 2.0 | 500.0 | 200.0 | no | 1.0 |" in text


def test_judging_again_at_another_target_reads_the_curves():
    judged = learning_report.at_target(SEEDS, 400.0, budget=2000)
    assert [s["env_steps_to_target"] for s in judged] == [2000, 1000, 2000, None]
    assert all(s["seconds_to_target"] is None for s in judged)  # the curves keep no clock
    agg = learning_report.aggregate(judged, 400.0)
    assert (agg["successes"], agg["held"], agg["seconds_to_target"]) == (3, 3, None)
    assert SEEDS[3]["env_steps_to_target"] == 3000  # the originals are left as they were


def _old_result(seeds=SEEDS, **fields):
    """A sweep as learning.py wrote it before the added statistics."""
    agg = learning_report.aggregate(seeds, 475.0)
    for key in learning_report.ADDED_KEYS:
        del agg[key]
    return {"name": "old", "target": 475.0, "budget": 10**6, "load": 0, "eval_key": "return"} | {
        "per_seed": copy.deepcopy(seeds),
        "aggregate": agg,
        **fields,
    }


def test_restating_adds_only_the_new_statistics_and_keeps_the_measured_data(tmp_path):
    path = tmp_path / "old.json"
    old = _old_result()
    old["aggregate"]["env_steps_to_target"] = {"median": 1.0, "q25": 1.0, "q75": 1.0}  # as it was
    path.write_text(json.dumps(old, indent=1))
    assert restate_learning.main([str(path), "--check"]) == 1
    assert json.loads(path.read_text()) == old  # --check writes nothing
    assert restate_learning.main([str(path), "--at-target", "400", "--allow-dirty"]) == 0
    new = json.loads(path.read_text())
    assert new["per_seed"] == old["per_seed"]
    assert {k: new["aggregate"][k] for k in old["aggregate"]} == old["aggregate"]
    assert set(new["aggregate"]) - set(old["aggregate"]) == set(learning_report.ADDED_KEYS)
    assert new["aggregate"]["held"] == 2 and new["aggregate_at"]["400"]["successes"] == 4
    assert new["restated"]["by"] == "benchmarks/restate_learning.py"
    assert "git_commit" in new["restated"]["provenance"]["source"]
    assert restate_learning.main([str(path), "--check"]) == 0


def test_restating_refuses_a_file_that_is_not_a_sweep(tmp_path, capsys):
    path = tmp_path / "summary.json"
    path.write_text('{"evals": []}')
    assert restate_learning.main([str(path), "--check"]) == 2
    assert "is not a learning.py result" in capsys.readouterr().err


def _write(tmp_path, name, result):
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps({**result, "name": name}))
    return str(path)


def test_comparing_two_sweeps_gives_the_probability_of_improvement(tmp_path, capsys):
    better = [_seed(i, [(1000, 480.0 + i)]) for i in range(4)]
    a, b = _write(tmp_path, "a", _old_result(better)), _write(tmp_path, "b", _old_result())
    out = tmp_path / "cmp.json"
    assert compare_learning.main([a, b, "--reps", "500", "--json", str(out), "--allow-dirty"]) == 0
    text = capsys.readouterr().out
    comparison = json.loads(out.read_text())
    expected = stats.probability_of_improvement([480, 481, 482, 483], [200, 490, 410, 476])
    assert comparison["probability_a_better"] == pytest.approx(expected)  # 12 of 16 pairs
    assert expected == 12 / 16 and f"P(A > B) = {expected:.3f}" in text
    assert comparison["seeds"] == [4, 4] and "git_commit" in comparison["provenance"]["source"]
    steps = compare_learning.compare(
        json.load(open(a)), json.load(open(b)), "steps", reps=200
    )  # a: all at 1000 steps; b: three crossed (1000, 2000, 3000), one never
    assert steps["probability_a_better"] == pytest.approx((0.5 + 1 + 1 + 1) / 4)
    assert steps["iqm_b"]["runs"] == 3 and steps["iqm_b"]["of_seeds"] == 4


@pytest.mark.parametrize(
    "change_b, args, message",
    [
        ({"eval_key": "return_worst_seat"}, [], "has eval_key 'return' and b 'return_worst_seat'"),
        ({"target": 400.0}, ["--score", "steps"], "has target 475.0 and b 400.0"),
        ({"budget": 5}, ["--score", "steps"], "has budget"),
        ({"crashed": True}, [], "seeds [0] crashed"),
        ({"per_seed": None}, [], "is not a learning.py result"),
    ],
)
def test_sweeps_judged_differently_are_refused_in_one_line(
    tmp_path, capsys, change_b, args, message
):
    b = _old_result()
    if change_b.pop("crashed", False):
        b["per_seed"][0]["error"] = "exit 1: boom"
    if change_b.get("per_seed", 0) is None:
        del b["per_seed"]
        change_b = {}
    a_path, b_path = _write(tmp_path, "a", _old_result()), _write(tmp_path, "b", b | change_b)
    assert compare_learning.main([a_path, b_path, "--reps", "100", *args]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0], lines
