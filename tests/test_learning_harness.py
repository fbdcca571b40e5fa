"""benchmarks/learning.py and learning_report.py: seeds as separate runs, busy load, the report.

One real sweep (two seeds of CartPole :quick under `--load 1`, a subprocess) checks the whole
path; the reductions (success, quartiles, metric percentiles) are checked on hand-made work
directories against numbers worked out here. Nothing asserts that anything learns.
"""

import json
import os
import shutil
import subprocess
import sys

import numpy as np
import psutil
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCHMARKS = os.path.join(ROOT, "benchmarks")
LEARNING = os.path.join(BENCHMARKS, "learning.py")
CARTPOLE_QUICK = os.path.join(ROOT, "configs", "impala_cartpole.py") + ":quick"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"

sys.path.insert(0, BENCHMARKS)
import learning  # noqa: E402
import learning_report  # noqa: E402
import learning_seeds  # noqa: E402


def _run(args, timeout=300):
    return subprocess.run(
        [sys.executable, LEARNING, *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def _spinners() -> set[int]:
    """The pids of live background-load processes (the harness's `python -c 'while True:
    pass'`); a sweep beside the suite has its own, so a test compares before and after."""
    found = set()
    for p in psutil.process_iter(["cmdline", "status"]):
        cmd = p.info["cmdline"] or []
        if learning_seeds.SPIN in cmd and p.info["status"] != psutil.STATUS_ZOMBIE:
            found.add(p.pid)
    return found


def test_a_sweep_under_load_runs_each_seed_and_writes_json_and_png(tmp_path):
    """Two seeds, each its own train.py with its seed; one busy process meanwhile (gone after);
    target 0 is reached at the final evaluation; the JSON's aggregate follows from its seeds."""
    out_dir, runs = tmp_path / "out", tmp_path / "runs"
    args = [
        "--config",
        CARTPOLE_QUICK,
        "--seeds",
        "3,5",
        "--load",
        "1",
        "--target",
        "0",
        "--out-dir",
        str(out_dir),
        "--keep-runs",
        str(runs),
        "--metrics",
        "losses/entropy,stats/policy_lag,no/such_metric",
        "--config.total_env_steps=3200",
        "--config.checkpoint_every_updates=2",  # 10 updates of 320 steps: saves at 6, 8, 10 kept
        "--allow-dirty",
    ]
    spinning_before = _spinners()
    proc = _run(args)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert not _spinners() - spinning_before  # its own busy process is gone
    name = "impala_cartpole_quick_load1"
    with open(out_dir / f"{name}.json") as f:
        result = json.load(f)
    with open(out_dir / f"{name}.png", "rb") as f:
        assert f.read(len(PNG_MAGIC)) == PNG_MAGIC

    assert [s["seed"] for s in result["per_seed"]] == [3, 5]
    for s in result["per_seed"]:
        with open(runs / f"seed_{s['seed']}" / "config.json") as f:
            assert json.load(f)["seed"] == s["seed"]  # each run got its own seed
        assert s["success"] and s["error"] is None and s["env_steps"] == 3200
        assert s["env_steps_to_target"] == 3200  # the final (only) evaluation
        assert s["eval_curve"] == [[3200, s["final_eval_return"]]]
        assert s["train_curve"] and s["metrics"]["no/such_metric"] is None
        lag = s["metrics"]["stats/policy_lag"]
        assert lag["p10"] <= lag["p50"] <= lag["p90"]
    agg = result["aggregate"]
    assert (agg["seeds"], agg["successes"], agg["success_rate"]) == (2, 2, 1.0)
    assert agg["env_steps_to_target"] == {"median": 3200, "q25": 3200, "q75": 3200}
    assert set(agg["metric_medians"]) == {"losses/entropy", "stats/policy_lag"}
    assert (result["load"], result["target"], result["budget"]) == (1, 0.0, 3200)
    assert result["overrides"] == [
        "--config.total_env_steps=3200",
        "--config.checkpoint_every_updates=2",
    ]
    assert result["environment"]["cpu_count"] == os.cpu_count()
    assert agg["held"] == 2 and agg["held_seeds"] == [3, 5]  # the last evaluation is >= 0
    finals = sorted(s["final_eval_return"] for s in result["per_seed"])
    assert finals[0] <= agg["final_eval_iqm"]["iqm"] <= finals[1]  # two seeds: their mean
    origin = result["provenance"]  # the commit, the config as train.py built it, the machine
    assert origin["config"]["total_env_steps"] == 3200 and origin["config"]["env_id"]
    assert (
        len(origin["source"]["git_commit"]) == 40
        and origin["machine"]["cpu_count"] == os.cpu_count()
    )
    assert "2/2 seeds reach 0 within 3,200 env steps (load 1); 2/2 hold it" in proc.stdout

    # The same sweep again over the kept runs: each finished seed is taken back, not trained.
    again = _run(args)
    assert again.returncode == 0 and again.stdout.count("(taken back: ran at ") == 2
    with open(out_dir / f"{name}.json") as f:
        retaken = json.load(f)["per_seed"]
    assert [{k: v for k, v in s.items() if k != "reused_from"} for s in retaken] == result[
        "per_seed"
    ]
    # A seed that did not finish (its sitting ended) but saved a checkpoint resumes from it,
    # also when the harness itself was killed before it could note the attempt's end. Its
    # saves after update 6 are gone: the resumed run logs 3,200 steps' window again, which
    # supersedes the first attempt's (one history, not two).
    unfinished = runs / "seed_5"
    for name_left in (learning_seeds.RESULT_FILE, "summary.json"):
        os.remove(unfinished / name_left)
    for step in os.listdir(unfinished / "checkpoints"):
        if step.isdigit() and int(step) > 6:
            shutil.rmtree(unfinished / "checkpoints" / step)
    started_file = unfinished / learning_seeds.STARTED_FILE
    started = json.loads(started_file.read_text())
    started_file.write_text(json.dumps({**started, "attempts_s": [None], "ends": [None]}))
    resumed = _run(args)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "seed_5 holds an unfinished run of this sweep; it resumes" in resumed.stdout
    with open(unfinished / "summary.json") as f:
        assert json.load(f)["resumed_from_update"] == 6
    attempts = json.loads(started_file.read_text())["attempts_s"]
    assert attempts[0] is None and attempts[1] > 0
    with open(out_dir / f"{name}.json") as f:
        seed_5 = json.load(f)["per_seed"][1]
    assert seed_5["attempts"] == 2 and seed_5["env_steps"] == 3200 and seed_5["error"] is None
    assert seed_5["command_s"] == attempts[1]  # the killed attempt's seconds are unknown
    steps = [point[0] for point in seed_5["train_curve"]]
    assert steps == [p[0] for p in result["per_seed"][1]["train_curve"]] == [1600, 3200]
    # A seed whose last attempt crashed is not resumed (its error would come again): it runs
    # afresh, its dir cleared.
    started = json.loads(started_file.read_text())
    started_file.write_text(json.dumps({**started, "ends": [*started["ends"][:-1], "crashed"]}))
    os.remove(unfinished / learning_seeds.RESULT_FILE)
    assert (
        learning_seeds.reused_seed(*learning._parser().parse_known_args(args), 5, str(unfinished))
        is None
    )
    assert not unfinished.exists()
    # Another sweep's seed (here another target) is not: its dir is cleared for it to run.
    other = learning._parser().parse_known_args([*args, "--target", "1"])
    assert learning_seeds.reused_seed(*other, 3, str(runs / "seed_3")) is None
    assert not (runs / "seed_3").exists()


@pytest.mark.parametrize(
    "args, message",
    [
        (["--target", "1", "--seeds", "5-2"], "--seeds '5-2'"),
        (["--target", "1", "--seeds", "a"], "--seeds 'a'"),
        (["--target", "1", "--load", "-1"], "--load -1"),
        (["--target", "1", "--config.seed=3"], "--config.seed is set per run"),
        (["--target", "1", "--bogus"], "unrecognized arguments: --bogus"),
        ([], "has no stop_at_eval_return: give --target RETURN"),
        (["--target", "1", "--config.algo.learning_rate=-1"], "learning_rate=-1.0 must be > 0"),
        (["--config", "configs/nope.py"], "no such file"),
    ],
)
def test_bad_arguments_are_one_line_exit_2_and_write_nothing(tmp_path, capsys, args, message):
    """The script's `main` in this process (its parsing and checks; the exit code it leaves
    with); the next test runs one bad argument as the script itself."""
    base = ["--config", CARTPOLE_QUICK, "--out-dir", str(tmp_path / "out")]
    try:
        code = learning.main([*base, *args])
    except SystemExit as e:
        code = e.code
    err = capsys.readouterr().err
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:") and message in lines[0], lines
    assert not (tmp_path / "out").exists()


def test_the_script_itself_exits_2_with_one_line_and_writes_nothing(tmp_path):
    base = ["--config", CARTPOLE_QUICK, "--out-dir", str(tmp_path / "out")]
    proc = _run([*base, "--target", "1", "--seeds", "5-2"], timeout=60)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: --seeds '5-2': give seeds like"), lines
    assert not (tmp_path / "out").exists()


def _workdir(tmp_path, evals, metrics=(), returncode=0):
    work = tmp_path / "run"
    work.mkdir()
    summary = {
        "evals": [{"env_steps": s, "return": r, "wall_time_s": s / 1000} for s, r in evals],
        "env_steps": evals[-1][0] if evals else 0,
        "stop_reason": "finished",
    }
    (work / "summary.json").write_text(json.dumps(summary))
    (work / "metrics.jsonl").write_text("".join(json.dumps(m) + "\n" for m in metrics))
    return str(work)


def test_a_resumed_runs_records_supersede_those_logged_after_its_checkpoint(tmp_path):
    """Attempt one logs steps 10-40 and stops; attempt two resumes from 20 and logs 30-50: the
    history is 10, 20 and attempt two's 30-50. A line cut short by the stop is skipped, and an
    evaluation line at a training line's step does not supersede it (another key)."""
    first = [{"env_steps": s, "charts/episode_return": s / 10, "x": 1.0} for s in (10, 20, 30, 40)]
    second = [{"env_steps": s, "charts/episode_return": -s / 10, "x": 2.0} for s in (30, 40, 50)]
    evaluation = {"env_steps": 50, "eval/return": 7.0}
    work = _workdir(tmp_path, [(50, 7.0)], [*first, *second, evaluation])
    with open(os.path.join(work, "metrics.jsonl"), "a") as f:
        f.write('{"env_steps": 60, "charts/epi')  # a write the stop cut short
    s = learning_seeds.seed_result(0, work, 0, 1.0, 0, 50, ["x"])
    assert s["train_curve"] == [[10, 1.0], [20, 2.0], [30, -3.0], [40, -4.0], [50, -5.0]]
    assert s["metrics"]["x"] == pytest.approx({"p10": 1.0, "p50": 2.0, "p90": 2.0})


def test_success_is_the_first_evaluation_at_the_target_within_the_budget(tmp_path):
    evals = [(1000, 10.0), (2000, 480.0), (3000, 200.0), (4000, 500.0)]
    work = _workdir(tmp_path, evals)
    s = learning_seeds.seed_result(0, work, 0, 1.0, target=475, budget=4000)
    assert s["success"] and s["env_steps_to_target"] == 2000 and s["seconds_to_target"] == 2.0
    assert (s["best_eval_return"], s["final_eval_return"]) == (500.0, 500.0)
    late = learning_seeds.seed_result(0, work, 0, 1.0, target=490, budget=3999)  # 500 came too late
    assert not late["success"] and late["env_steps_to_target"] is None


def test_a_crashed_run_is_a_failure_with_its_error(tmp_path):
    work = _workdir(tmp_path, [(1000, 500.0)])
    (tmp_path / "run" / "train.log").write_text("a\nb\nRuntimeError: boom\n")
    s = learning_seeds.seed_result(0, work, 1, 1.0, target=475, budget=10**6)
    assert s["error"] == "exit 1: a | b | RuntimeError: boom"
    assert learning_report.aggregate([s], 475)["crashed_seeds"] == [0]


def test_quartiles_percentiles_and_the_aggregate_against_numbers_worked_out_here(tmp_path):
    assert learning_report.quartiles([]) is None
    assert learning_report.quartiles([10, 20, 30, 40, 50]) == {"median": 30, "q25": 20, "q75": 40}
    p = learning_report.percentiles(list(range(11)))
    assert p == pytest.approx({"p10": 1.0, "p50": 5.0, "p90": 9.0})
    metrics = [{"env_steps": i, "stats/policy_lag": v} for i, v in enumerate((1.0, 2.0, 3.0))]
    work = _workdir(tmp_path, [(1000, 500.0)], metrics)
    ok = learning_seeds.seed_result(7, work, 0, 2.0, 475, 1000, ["stats/policy_lag"])
    assert ok["metrics"]["stats/policy_lag"]["p50"] == 2.0
    failed = {
        **ok,
        "seed": 8,
        "success": False,
        "env_steps_to_target": None,
        "seconds_to_target": None,
        "metrics": {"stats/policy_lag": None},
    }
    agg = learning_report.aggregate([ok, failed], 475)
    assert (agg["successes"], agg["success_rate"], agg["failed_seeds"]) == (1, 0.5, [8])
    assert agg["env_steps_to_target"]["median"] == 1000
    assert agg["metric_medians"] == {"stats/policy_lag": 2.0}
    assert learning.parse_seeds("0-2,7,1") == [0, 1, 2, 7]
    np.testing.assert_equal(learning_report.quartiles([5.0])["q75"], 5.0)


def test_a_sweep_with_a_crashed_seed_leaves_the_result_it_would_replace(tmp_path, monkeypatch):
    out = tmp_path / "out"
    out.mkdir()
    (out / "impala_cartpole.json").write_text("kept")
    crashed = learning_seeds.seed_result(0, str(tmp_path), 1, 0.1, target=475, budget=1000)
    monkeypatch.setattr(learning, "run_seed", lambda *args: crashed)
    argv = ["--config", "configs/impala_cartpole.py", "--seeds", "0", "--out-dir", str(out)]
    argv.append("--allow-dirty")
    assert learning.main(argv) == 1
    assert (out / "impala_cartpole.json").read_text() == "kept"
    with open(out / "impala_cartpole.crashed.json") as f:
        assert json.load(f)["aggregate"]["crashed_seeds"] == [0]
    assert not (out / "impala_cartpole.png").exists()


def test_success_can_judge_another_evaluation_statistic(tmp_path):
    work = _workdir(tmp_path, [(1000, 0.9), (2000, 0.95)])
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    for e, worst in zip(summary["evals"], (0.6, 0.88), strict=True):
        e["return_worst_seat"] = worst
    (tmp_path / "run" / "summary.json").write_text(json.dumps(summary))
    s = learning_seeds.seed_result(0, work, 0, 1.0, 0.85, 10**6, eval_key="return_worst_seat")
    assert s["env_steps_to_target"] == 2000 and s["best_eval_return"] == 0.88


def test_a_board_game_sweep_judges_the_weaker_seat_and_plays_perfect_play_after(tmp_path):
    out_dir = tmp_path / "out"
    args = [
        "--config",
        os.path.join(ROOT, "configs", "ppo_tictactoe.py") + ":quick",
        "--seeds",
        "2",
        "--target",
        "-1",
        "--budget",
        "10000",
        "--eval-key",
        "return_worst_seat",
        "--also-eval",
        "perfect",
        "--also-eval-episodes",
        "4",
        "--out-dir",
        str(out_dir),
        "--allow-dirty",
    ]
    proc = _run(args)
    assert proc.returncode == 0, proc.stderr[-3000:]
    with open(out_dir / "ppo_tictactoe_quick.json") as f:
        result = json.load(f)
    (seed,) = result["per_seed"]
    assert result["eval_key"] == "return_worst_seat" and seed["success"]
    after = seed["also_eval"]
    assert after["opponent"] == "perfect" and after["episodes"] == 4 and after["win_rate"] == 0.0
    assert result["aggregate"]["also_eval"]["loss_rate_max"] == after["loss_rate"]
    assert "against perfect after the run" in proc.stdout


def test_the_after_run_evaluation_is_summarised_with_its_exact_losses(tmp_path):
    work = _workdir(tmp_path, [(1000, 0.9)])
    seeds = []
    for seed, (loss, exact) in enumerate([(0.0, 0.0), (0.055, 0.04), (0.02, 0.01)]):
        s = learning_seeds.seed_result(seed, work, 0, 1.0, target=0.85, budget=1000)
        s["also_eval"] = {
            "opponent": "perfect",
            "return": -loss,
            "loss_rate": loss,
            "exact_loss_rate": exact,
        }
        seeds.append(s)
    also = learning_report.aggregate(seeds, 0.85)["also_eval"]
    assert (also["loss_rate_max"], also["exact_loss_rate_max"]) == (0.055, 0.04)
    assert also["exact_loss_rate"]["median"] == 0.01
    del seeds[0]["also_eval"]["exact_loss_rate"]  # one seed without: no exact summary
    assert "exact_loss_rate" not in learning_report.aggregate(seeds, 0.85)["also_eval"]
