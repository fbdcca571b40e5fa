"""benchmarks/soak.py: a short real soak writes a consistent result; bad arguments write nothing.

The soak is a subprocess running `scripts/train.py` (CartPole :quick, evaluation and checkpoints
on) for about 9 s; nothing here asserts that memory stays flat, only that the figures are there.
"""

import json
import math
import os
import subprocess
import sys
import time
import types

import psutil
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SOAK = os.path.join(ROOT, "benchmarks", "soak.py")
CARTPOLE_QUICK = os.path.join(ROOT, "configs", "impala_cartpole.py") + ":quick"


def _run(args: list[str], timeout: float = 150) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, SOAK, *args, "--allow-dirty"],  # a working tree may differ from HEAD
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_short_soak_records_rss_and_the_run(tmp_path):
    out, workdir = tmp_path / "results" / "soak.json", tmp_path / "run"
    args = [
        "--minutes",
        "0.15",
        "--warmup-s",
        "2",
        "--sample-s",
        "0.5",
        "--config",
        CARTPOLE_QUICK,
        "--out",
        str(out),
        "--workdir",
        str(workdir),
        "--config.eval_every_updates=40",
        "--config.checkpoint_every_updates=100",
        "--config.log_every_updates=10",
    ]
    proc = _run(args)
    assert proc.returncode == 0, f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr[-3000:]}"
    with open(out) as f:
        result = json.load(f)

    samples = result["samples"]
    assert len(samples) >= 5
    times = [t for t, _ in samples]
    assert times == sorted(times) and len(set(times)) == len(times)
    assert all(rss > 0 for _, rss in samples)
    assert result["start_s"] >= result["first_log_s"] + 2
    assert [result["start_s"], result["start_rss_mib"]] in samples
    assert [result["end_s"], result["end_rss_mib"]] == samples[-1]
    assert result["start_rss_mib"] > 0 and result["end_rss_mib"] > 0
    assert result["peak_rss_mib"] >= max(result["start_rss_mib"], result["end_rss_mib"])
    assert result["samples_after_warmup"] >= 2
    growth = 100 * (result["end_rss_mib"] / result["start_rss_mib"] - 1)
    assert math.isfinite(result["growth_pct"]) and result["growth_pct"] == pytest.approx(
        growth, abs=1e-3
    )
    assert math.isfinite(result["slope_mib_per_h"])

    assert result["exit_code"] == 0 and result["stop_reason"] == "max_wall_time_s reached"
    assert result["env_steps"] > 0 and result["sps"] > 0 and result["evals"] >= 1
    assert {"platform", "cpu_count", "python", "versions"} <= set(result["machine"])
    assert result["machine"]["versions"]["jax"] and result["machine"]["versions"]["envpool"]
    assert "--config.max_wall_time_s=9.0" in result["train_command"]
    assert result["provenance"]["config"]["max_wall_time_s"] == 9.0  # the config that ran
    assert result["train_command"].endswith("--config.log_every_updates=10")  # overrides last
    assert os.listdir(workdir / "checkpoints")  # checkpointing was on
    assert "RSS start" in proc.stdout and str(out) in proc.stdout


@pytest.mark.parametrize(
    "bad",
    [
        ["--minutes", "0"],
        ["--minutes", "1", "--warmup-s", "60"],  # no room left for samples after the warm-up
        ["--minutes", "5", "--sample-s", "-1"],
        ["--minutes", "x"],
        ["--minutes", "5", "--seconds", "3"],
        ["--minutes", "5", "--config.no_such_field=1"],
        ["--minutes", "5", "--config", "configs/no_such_config.py"],
    ],
)
def test_bad_argument_exits_2_with_one_line(tmp_path, bad, soak, capsys, monkeypatch):
    """Caught before training starts: one line naming the argument, exit 2, nothing written
    (`soak.main` in this process: the checks are the script's, no subprocess needed)."""
    monkeypatch.chdir(ROOT)  # as `_run` starts the script: relative config paths
    out = tmp_path / "out" / "soak.json"
    with pytest.raises(SystemExit) as e:
        soak.main([*bad, "--out", str(out), "--workdir", str(tmp_path / "run")])
    err = capsys.readouterr().err
    assert e.value.code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert os.listdir(tmp_path) == []


@pytest.fixture
def soak(monkeypatch):
    """`benchmarks/soak.py` as a module, for its functions."""
    monkeypatch.syspath_prepend(os.path.join(ROOT, "benchmarks"))
    import soak

    return soak


def test_a_trainer_that_exited_but_was_not_reaped_has_no_rss(soak):
    """A zombie reads RSS 0: it must count as gone (None), not as a sample of 0 MiB (a 0.5 s
    sample caught one at the end of a run)."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    process, deadline = psutil.Process(child.pid), time.monotonic() + 30
    while process.status() != psutil.STATUS_ZOMBIE and time.monotonic() < deadline:
        time.sleep(0.05)
    try:
        assert process.status() == psutil.STATUS_ZOMBIE
        assert soak.rss_mib(process) is None
    finally:
        child.wait()


def test_a_trainer_freeing_its_pages_on_exit_has_no_rss(soak, monkeypatch):
    """Before it turns zombie an exiting process frees its pages, its RSS falling towards 0 (a
    0.00 MiB sample failed a CI run): a process whose exit has begun, or under 1 MiB, counts as
    gone; a live process reads its RSS, and is not exiting."""

    class Trainer:
        pid = os.getpid()

        def __init__(self, rss):
            self.rss = rss

        def status(self):
            return psutil.STATUS_RUNNING

        def children(self, recursive):
            return []

        def memory_info(self):
            return types.SimpleNamespace(rss=self.rss)

    assert soak.rss_mib(Trainer(4096)) is None  # one page left
    assert not soak.exiting(os.getpid())
    assert soak.rss_mib(psutil.Process(os.getpid())) > 1
    assert soak.rss_mib(Trainer(64 * soak.MIB)) == 64
    monkeypatch.setattr(soak, "exiting", lambda pid: pid == os.getpid())
    assert soak.rss_mib(Trainer(64 * soak.MIB)) is None  # its exit began after the memory read
