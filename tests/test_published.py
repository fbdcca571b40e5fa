"""benchmarks/published.py: sweeps beside published figures, on hand-made sweep files whose
scores are worked out here (the training return over the last window, mean, population std,
the spread test), a sweep not run yet under --partial, and the refusals."""

import json
import os
import sys

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
import published  # noqa: E402

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _seed(seed, train, final_eval):
    """A seed logging `train` at 50k-step windows to 300k, evaluated at 150k and 300k."""
    curve = [[50_000 * (i + 1), r] for i, r in enumerate(train)]
    return {
        "seed": seed,
        "train_curve": curve,
        "eval_curve": [[150_000, final_eval / 2], [300_000, final_eval]],
        "final_eval_return": final_eval,
        "env_steps": 300_000,
        "command_s": 10.0 + seed,
    }


def _sweep(root, name, seeds):
    result = {
        "git_commit": "abc1234",
        "load": 0,
        "per_seed": seeds,
        "aggregate": {"crashed_seeds": []},
    }
    (root / f"{name}.json").write_text(json.dumps(result))


def _spec(published_mean=100.0, std=10.0, sweeps=("algo_task",)):
    entries = [
        {
            "label": name.upper(),
            "sweep": name,
            "published": {
                "mean": published_mean,
                "std": std,
                "env_steps": 300_000,
                "source_short": "Them",
            },
        }
        for name in sweeps
    ]
    return {"train_window": 100_000, "tasks": {"Task-v0": entries}}


def test_each_seed_scores_its_last_window_and_the_sweep_its_mean_and_std(tmp_path):
    """Windows at 250k and 300k are within the last 100k steps of a run ending at 300k
    (200k is not: `steps > end - window`)."""
    seeds = [_seed(0, [0, 0, 0, 50, 80, 100], 90.0), _seed(1, [0, 0, 0, 60, 100, 120], 110.0)]
    _sweep(tmp_path, "algo_task", seeds)
    result = published.report(_spec(), str(tmp_path / "out" / "cmp"), True, root=str(tmp_path))
    row = result["tasks"]["Task-v0"][0]
    assert row["train"]["per_seed"] == [90.0, 110.0]
    assert row["train"]["mean"] == 100.0 and row["train"]["std"] == 10.0  # population std
    assert row["eval"]["per_seed"] == [90.0, 110.0]
    assert row["train"]["iqm"]["iqm"] == pytest.approx(100.0)
    assert row["against_published"] == "within" and row["git_commit"] == "abc1234"
    assert row["seconds_per_seed"] == [10.0, 11.0]
    with open(tmp_path / "out" / "cmp_Task-v0.png", "rb") as f:
        assert f.read(len(PNG_MAGIC)) == PNG_MAGIC
    with open(tmp_path / "out" / "cmp.json") as f:
        assert json.load(f)["tasks"]["Task-v0"][0]["train"]["mean"] == 100.0
    text = published.table(result)
    assert "| Task-v0 | ALGO_TASK | 2 | 100 +/- 10 |" in text and text.endswith("| within |")


def test_below_within_or_above_the_published_spread_is_said(tmp_path):
    _sweep(tmp_path, "algo_task", [_seed(0, [80, 80], 80.0), _seed(1, [88, 88], 88.0)])
    result = published.report(_spec(100.0, 10.0), str(tmp_path / "cmp"), True, root=str(tmp_path))
    row = result["tasks"]["Task-v0"][0]
    assert row["train"]["mean"] == 84.0 and row["against_published"] == "below"
    assert published.table(result).endswith("| below |")
    above = published.report(_spec(70.0, 10.0), str(tmp_path / "c2"), True, root=str(tmp_path))
    assert above["tasks"]["Task-v0"][0]["against_published"] == "above"  # 84 > 70 + 10


def test_a_sweep_not_run_yet_is_a_row_under_partial_and_refused_without(tmp_path, capsys):
    _sweep(tmp_path, "algo_task", [_seed(0, [90], 90.0)])
    spec = _spec(sweeps=("algo_task", "later_task"))
    result = published.report(spec, str(tmp_path / "cmp"), True, True, root=str(tmp_path))
    assert "| Task-v0 | LATER_TASK | - | not run yet |" in published.table(result)
    with pytest.raises(published.UsageError, match="later_task.json: no such sweep"):
        published.report(spec, str(tmp_path / "cmp2"), True, root=str(tmp_path))
    assert not (tmp_path / "cmp2.json").exists()


def test_a_seed_without_an_evaluation_is_refused_in_one_line(tmp_path):
    seed = {**_seed(0, [90], 90.0), "final_eval_return": None, "eval_curve": []}
    _sweep(tmp_path, "algo_task", [seed])
    with pytest.raises(published.UsageError, match="algo_task: a seed has no evaluation"):
        published.report(_spec(), str(tmp_path / "cmp"), True, root=str(tmp_path))
    assert not (tmp_path / "cmp.json").exists()


def test_the_script_refuses_a_missing_spec_in_one_line(tmp_path, capsys):
    code = published.main(["--spec", str(tmp_path / "nope.json"), "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and "nope.json" in err
    assert not list(tmp_path.iterdir())


def test_the_shipped_spec_names_cleanrls_v4_tables():
    with open(os.path.join(ROOT, "benchmarks", "published_mujoco.json")) as f:
        spec = json.load(f)
    assert set(spec["tasks"]) == {"HalfCheetah-v4", "Hopper-v4"}
    for entries in spec["tasks"].values():
        labels = ["PPO", "SAC", "TD3"]
        assert [e["label"] for e in entries] == [*labels, *(f"{x}, load 1" for x in labels)]
        for e in entries:
            assert e["published"]["env_steps"] == 1_000_000 and e["published"]["seeds"] == 3
            assert "cleanrl/blob/fe8d8a03" in e["published"]["source"]
    assert np.isclose(spec["tasks"]["Hopper-v4"][2]["published"]["mean"], 3134.61)
