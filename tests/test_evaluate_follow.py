"""`scripts/evaluate.py --follow`: a running run's new steps evaluated as they come, skipping to
the newest, stopping when the run ends, gives up or goes idle."""

import json
import os
import queue
import shutil
import threading
import time

import pytest
from evaluate_runs import add_step as _add_step
from evaluate_runs import copy_run as _copy
from evaluate_runs import finished_run

from jaxrl_dist.checkpoints.policy import list_steps
from jaxrl_dist.tools import evaluate_cli


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """A finished run: 3,200 env steps = 10 updates of 320, checkpoints at updates 5 and 10
    (the final one after the final evaluation, with its metric)."""
    return finished_run(str(tmp_path_factory.mktemp("evaluate") / "run"))


def _lines(workdir):
    with open(os.path.join(workdir, "validation.jsonl")) as f:
        return [json.loads(line) for line in f]


def test_follow_gives_up_on_a_dead_run_by_default(capsys):
    """A run that died writes no summary.json: by default --follow stops after a while without
    a new checkpoint; waiting forever is the explicit --idle_exit_s 0."""
    default = evaluate_cli.parse_args(["runs/x", "--follow"]).idle_exit_s
    assert 0 < default < float("inf")
    assert default == evaluate_cli.FOLLOW_IDLE_EXIT_S == 1800
    assert evaluate_cli.parse_args(["runs/x", "--follow", "--idle_exit_s", "0"]).idle_exit_s == 0
    with pytest.raises(SystemExit) as exit_info:
        evaluate_cli.parse_args(["--help"])
    assert exit_info.value.code == 0
    text = " ".join(capsys.readouterr().out.split())  # argparse wraps to the terminal's width
    help_line = text[text.index("--idle_exit_s IDLE_EXIT_S") :]
    assert "(default 1800, 30 minutes" in help_line
    assert "0: wait until the run finishes" in help_line


def test_follow_evaluates_new_steps_skipping_to_the_newest_until_the_run_ends(
    run, tmp_path, monkeypatch
):
    work = _copy(run, tmp_path)
    polls, resume = queue.Queue(), queue.Queue()

    def wait(seconds):  # the follower found nothing new: let the test act, then go on
        polls.put(seconds)
        resume.get(timeout=120)

    monkeypatch.setattr(evaluate_cli, "_wait", wait)
    result = {}
    args = [work, "--follow", "--episodes", "2", "--poll_s", "0.01"]
    thread = threading.Thread(target=lambda: result.update(rc=evaluate_cli.main(args)))
    thread.start()
    try:
        polls.get(timeout=120)  # steps 5 and 10 were there: 10 evaluated, 5 skipped
        assert [(r["step"], r["skipped"]) for r in _lines(work)] == [(10, [5])]
        _add_step(work, 20)
        _add_step(work, 30)  # two new steps since the last look
        resume.put(None)
        polls.get(timeout=120)
    finally:  # the run has finished: the follower stops (also when an assert failed above)
        with open(os.path.join(work, "summary.json"), "w") as f:
            json.dump({}, f)
        for _ in range(3):
            resume.put(None)
        thread.join(timeout=120)
    assert result == {"rc": 0}
    lines = _lines(work)
    assert [(r["step"], r["skipped"]) for r in lines] == [(10, [5]), (30, [20])]
    assert [r["env_steps"] for r in lines] == [3200, 3200]  # step 30 holds step 10's meta
    assert all(len(r["returns"]) == 2 for r in lines)


def test_follow_skips_a_step_deleted_before_it_is_read_and_stops_when_idle(
    run, tmp_path, monkeypatch, capsys
):
    work = _copy(run, tmp_path)
    listings = []

    def list_steps_racing_retention(directory):
        if len(listings) == 1:
            _add_step(work, 20)  # the run saves a new step...
        steps = list_steps(directory)
        if not listings:
            shutil.rmtree(os.path.join(directory, "10"))  # ...and deletes a listed one
        listings.append(steps)
        return steps

    monkeypatch.setattr(evaluate_cli, "list_steps", list_steps_racing_retention)
    start = time.monotonic()
    args = [work, "--follow", "--episodes", "2", "--poll_s", "0.1", "--idle_exit_s", "1"]
    assert evaluate_cli.main(args) == 0
    assert 1 <= time.monotonic() - start < 60
    out = capsys.readouterr().out
    assert "skipped steps 5" in out and "step 10 was deleted before it could be read" in out
    assert "no new checkpoint in 1 s; evaluated 1 step(s)" in out
    assert [(r["step"], r["skipped"]) for r in _lines(work)] == [(20, [])]


def test_a_resumed_run_is_not_finished_until_it_writes_a_new_summary(tmp_path):
    summary, config = tmp_path / "summary.json", tmp_path / "config.json"
    assert not evaluate_cli.run_finished(str(tmp_path))
    summary.write_text("{}")  # the end of the first part
    config.write_text("{}")  # a resume starts
    os.utime(summary, (1_000, 1_000))
    assert not evaluate_cli.run_finished(str(tmp_path))
    summary.write_text("{}")  # the resumed part ends
    assert evaluate_cli.run_finished(str(tmp_path))
