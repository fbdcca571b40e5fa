"""Learning curves: parsing metrics.jsonl (nulls, a cut-off line, a resumed run) and the PNG."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
from PIL import Image

from jaxrl_dist.run import curves as run_curves
from jaxrl_dist.run.curves import default_labels, plot_learning_curves, read_curves

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(ROOT, "scripts", "plot.py")
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def train(steps, ret, wall=None, episodes=10.0):
    record = {"env_steps": steps, "wall_time_s": steps / 1000 if wall is None else wall}
    record |= {"losses/loss": 1.0, "charts/sps": 900.0, "charts/episodes": episodes}
    if ret is not ...:  # ... = no episode finished: the key is absent
        record["charts/episode_return"] = ret
    return record


def evaluation(steps, ret, std):
    return {
        "env_steps": steps,
        "wall_time_s": steps / 1000 + 0.01,
        "eval/greedy_return": ret,
        "eval/greedy_return_std": std,
        "eval/return": ret,
        "eval/return_std": std,
    }


def write_run(path, records, tail="", config=None):
    """A work dir with metrics.jsonl (plus `tail` verbatim, e.g. a line cut short)."""
    os.makedirs(path, exist_ok=True)
    with open(os.path.join(path, "metrics.jsonl"), "w") as f:
        f.writelines(json.dumps(r) + "\n" for r in records)
        f.write(tail)
    if config is not None:
        with open(os.path.join(path, "config.json"), "w") as f:
            json.dump(config, f)
    return str(path)


def learning_run(path, offset=0.0, config=None):
    """A realistic run: 20 log windows, an evaluation every 4."""
    records = []
    for i in range(1, 21):
        records.append(train(1600 * i, 20 + 20 * i + offset))
        if i % 4 == 0:
            records.append(evaluation(1600 * i, 30 + 22 * i + offset, 5.0 + i))
    return write_run(path, records, config=config)


def assert_png(path, size=(960, 600)):
    with open(path, "rb") as f:
        assert f.read(8) == PNG_MAGIC
    with Image.open(path) as image:
        image.verify()
    with Image.open(path) as image:
        assert image.size == size


def test_read_curves_parses_train_and_eval_series_with_nulls(tmp_path):
    run = write_run(
        tmp_path / "run",
        [
            train(1600, 18.5),
            train(3200, None),  # a non-finite return, written as null: no point
            evaluation(3200, 71.75, 21.5),
            train(4800, ..., episodes=0.0),  # no episode finished in the window: no point
            train(6400, 30.25, wall=None),
            evaluation(6400, 83.0, None),  # std null: NaN, the point kept
            evaluation(9600, None, None),  # return null: no point
            {"env_steps": 9600, "wall_time_s": 9.7, "eval/greedy_return": 5.0},  # no eval/return
        ],
    )
    curves = read_curves(run)
    np.testing.assert_array_equal(curves.train_steps, [1600, 6400])
    np.testing.assert_array_equal(curves.train_return, [18.5, 30.25])
    np.testing.assert_array_equal(curves.train_wall_time, [1.6, 6.4])
    np.testing.assert_array_equal(curves.eval_steps, [3200, 6400])
    np.testing.assert_array_equal(curves.eval_return, [71.75, 83.0])
    np.testing.assert_array_equal(curves.eval_std, [21.5, np.nan])
    assert not curves.empty


def test_read_curves_skips_a_line_cut_short(tmp_path):
    # The last line is being written; an earlier fragment is a crash's, with a resume after it.
    fragment = json.dumps(train(4800, 99.0))[:25]
    run = write_run(tmp_path / "run", [train(1600, 10.0), train(3200, 20.0)], tail=fragment)
    np.testing.assert_array_equal(read_curves(run).train_return, [10.0, 20.0])
    with open(os.path.join(run, "metrics.jsonl"), "a") as f:
        f.write(json.dumps(train(4800, 30.0)) + "\n" + fragment)
    curves = read_curves(run)
    np.testing.assert_array_equal(curves.train_steps, [1600, 3200])  # 4800 shared the bad line
    with open(os.path.join(run, "metrics.jsonl"), "a") as f:
        f.write("\n[1, 2]\n" + json.dumps(train(6400, 40.0)) + "\n")
    np.testing.assert_array_equal(read_curves(run).train_steps, [1600, 3200, 6400])


def test_read_curves_resumed_run_replaces_the_points_logged_again(tmp_path):
    first = [train(s, s / 100) for s in (1600, 3200, 4800, 6400)]
    first += [evaluation(3200, 1.0, 0.5), evaluation(6400, 2.0, 0.5)]
    # Resumed from the checkpoint at 3200: 4800 and 6400 are logged again, then the run goes on.
    resumed = [train(4800, 480.0, wall=9.0), evaluation(6400, 3.0, 0.25), train(6400, 640.0)]
    resumed += [train(8000, 800.0)]
    curves = read_curves(write_run(tmp_path / "run", first + resumed))
    np.testing.assert_array_equal(curves.train_steps, [1600, 3200, 4800, 6400, 8000])
    np.testing.assert_array_equal(curves.train_return, [16.0, 32.0, 480.0, 640.0, 800.0])
    np.testing.assert_array_equal(curves.train_wall_time, [1.6, 3.2, 9.0, 6.4, 8.0])
    np.testing.assert_array_equal(curves.eval_steps, [3200, 6400])
    np.testing.assert_array_equal(curves.eval_return, [1.0, 3.0])
    np.testing.assert_array_equal(curves.eval_std, [0.5, 0.25])


def test_read_curves_resume_truncates_even_through_a_null_record(tmp_path):
    records = [train(1600, 1.0), train(3200, 2.0), train(4800, 3.0), train(3200, None)]
    curves = read_curves(write_run(tmp_path / "run", records))
    np.testing.assert_array_equal(curves.train_steps, [1600])


def test_read_curves_without_metrics_names_the_directory(tmp_path):
    with pytest.raises(FileNotFoundError) as info:
        read_curves(str(tmp_path))
    message = str(info.value)
    assert "\n" not in message
    assert os.path.join(str(tmp_path), "metrics.jsonl") in message
    assert "not a run's work dir" in message


def test_plot_writes_a_png_atomically(tmp_path):
    run = learning_run(tmp_path / "run", config={"env_id": "CartPole-v1", "algorithm": "impala"})
    out = str(tmp_path / "curve.png")
    assert plot_learning_curves([run], out) == out
    assert_png(out)
    assert sorted(os.listdir(tmp_path)) == ["curve.png", "run"]  # no temporary file left
    figure = run_curves._draw(
        [read_curves(run)], ["run"], run_curves.default_title([run]), "env_steps"
    )
    ax = figure.axes[0]
    assert ax.get_title() == "CartPole-v1 impala"
    assert ax.get_xlabel() == "environment steps"
    assert ax.get_ylabel() == "episode return"
    np.testing.assert_array_equal(ax.lines[0].get_xdata(), 1600 * np.arange(1, 21))


def test_overlaid_runs_get_distinct_colours_and_their_labels(tmp_path):
    runs = [learning_run(tmp_path / "a"), learning_run(tmp_path / "b", offset=50.0)]
    out = str(tmp_path / "both.png")
    plot_learning_curves(runs, out, labels=["lr 1e-3", "lr 3e-4"], title="CartPole")
    assert_png(out)
    figure = run_curves._draw([read_curves(r) for r in runs], ["a", "b"], "t", "wall_time_s")
    ax = figure.axes[0]
    colours = {line.get_color() for line in ax.lines if len(line.get_xdata()) == 20}
    assert len(colours) == 2
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert legend == ["a", "b", "training episodes (window mean)", "evaluation ± std"]
    assert ax.get_xlabel() == "wall-clock time (s)"


def test_a_run_without_data_yet_still_gets_a_png(tmp_path):
    run = write_run(tmp_path / "run", [], tail='{"env_steps": 16')
    out = str(tmp_path / "empty.png")
    plot_learning_curves([run], out, x="wall_time_s")
    assert_png(out)
    ax = run_curves._draw([read_curves(run)], ["run"], "t", "env_steps").axes[0]
    assert [t.get_text() for t in ax.texts] == ["no data yet"]


def test_plot_rejects_bad_arguments_before_writing(tmp_path):
    run = learning_run(tmp_path / "run")
    out = str(tmp_path / "x.png")
    with pytest.raises(ValueError, match="one label per run"):
        plot_learning_curves([run], out, labels=["a", "b"])
    with pytest.raises(ValueError, match="wall_time_s"):
        plot_learning_curves([run], out, x="updates")
    with pytest.raises(FileNotFoundError):
        plot_learning_curves([run, str(tmp_path)], out)
    assert not os.path.exists(out)


def test_time_unit_and_default_labels():
    assert run_curves._time_unit(90.0) == (1.0, "s")
    assert run_curves._time_unit(300.0) == (60.0, "min")
    assert run_curves._time_unit(36000.0) == (3600.0, "h")
    assert default_labels(["runs/a/", "runs/b"]) == ["a", "b"]
    assert default_labels(["x/seed0", "y/seed0", "z"]) == ["x/seed0", "y/seed0", "z"]


def run_script(*args, cwd):
    return subprocess.run(
        [sys.executable, SCRIPT, *args], cwd=cwd, capture_output=True, text=True, timeout=60
    )


@pytest.mark.parametrize(
    "args, expected",
    [
        (["{empty}"], "not a run's work dir"),
        (["{empty}/typo"], "not a run's work dir"),  # not "--out: no such directory"
        (["{run}", "{empty}", "--out", "two.png"], "{empty}"),  # names the one that is no run
        (["{run}", "--labels", "a,b"], "--labels"),
        (["{run}", "--x", "updates"], "--x"),
    ],
)
def test_script_bad_input_one_line_exit_2_nothing_written(tmp_path, args, expected):
    run = learning_run(tmp_path / "run")
    empty = tmp_path / "empty"
    empty.mkdir()
    args = [a.format(run=run, empty=empty) for a in args]
    before = sorted(os.listdir(tmp_path)), sorted(os.listdir(run))
    result = run_script(*args, cwd=tmp_path)
    assert result.returncode == 2
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ")
    assert expected.format(empty=empty) in lines[0]
    assert (sorted(os.listdir(tmp_path)), sorted(os.listdir(run))) == before


def test_script_draws_one_run_into_its_work_dir(tmp_path):
    run = learning_run(tmp_path / "run")
    result = run_script(run, "--title", "T", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    out = os.path.join(run, "learning_curve.png")
    assert result.stdout.strip() == out
    assert_png(out)
