"""The GPU check (`benchmarks/gpu_check.py`) runs on a CPU with `--tiny`: every part's command,
its result files and headline, the budget that cuts a part off and skips the rest, the archive.

The determinism part's helper runs in `test_run_control.py` (the same two runs); here it is left
out to keep the suite short. Nothing asserts a speed.
"""

import json
import os
import subprocess
import sys
import tarfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GPU_CHECK = os.path.join(ROOT, "benchmarks", "gpu_check.py")
PARTS = ("breakout", "anakin_ppo", "central_local", "recurrent", "learning")


def _check(tmp_path, *args: str) -> tuple[subprocess.CompletedProcess, dict]:
    out = tmp_path / "out"
    proc = subprocess.run(
        [sys.executable, GPU_CHECK, "--tiny", "--out-dir", str(out), "--allow-dirty", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    with open(out / "gpu_check.json") as f:
        return proc, json.load(f)


def test_every_part_runs_tiny_and_writes_its_result_and_archive(tmp_path):
    archive = tmp_path / "check.tar.gz"
    proc, result = _check(
        tmp_path, "--budget-s", "400", "--parts", ",".join(PARTS), "--archive", str(archive)
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert [r["part"] for r in result["parts"]] == list(PARTS)
    for record in result["parts"]:
        assert record["status"] == "ok", record
        assert not record["headline"].startswith("no result"), record
    headlines = {r["part"]: r["headline"] for r in result["parts"]}
    assert "base: " in headlines["breakout"] and "of raw EnvPool async" in headlines["breakout"]
    assert "first log after " in headlines["breakout"]  # where a point's wall time goes
    assert "local " in headlines["central_local"] and "central " in headlines["central_local"]
    assert "1 seed " in headlines["anakin_ppo"] and "1 seeds vmapped " in headlines["anakin_ppo"]
    assert headlines["recurrent"].startswith("LSTM / no core: anakin_ppo ")
    assert "env steps" in headlines["learning"]
    out = tmp_path / "out"
    assert (out / "learning" / "learning_curve.png").exists()
    assert not (out / "learning" / "checkpoints").exists()  # results only
    with tarfile.open(archive) as tar:
        names = tar.getnames()
    assert "out/gpu_check.md" in names and "out/learning/learning_curve.png" in names
    assert not any("/checkpoints" in n for n in names)
    table = (out / "gpu_check.md").read_text()
    assert all(f"| {p} | ok |" in table for p in PARTS)


def test_the_budget_cuts_a_part_off_and_skips_the_rest(tmp_path):
    proc, result = _check(tmp_path, "--budget-s", "2", "--parts", "breakout,learning")
    assert proc.returncode == 1
    first, second = result["parts"]
    assert first["part"] == "breakout" and first["status"] == "timed out"
    assert first["timeout_s"] == 2 and first["wall_s"] < 30  # its child processes killed too
    assert second == {"part": "learning", "status": "skipped", "headline": second["headline"]}
    assert second["headline"].endswith("s left")
    # The same folder again: refused in one line, the earlier check's files left as they were.
    before = (tmp_path / "out" / "gpu_check.json").read_text()
    again = subprocess.run(
        [sys.executable, GPU_CHECK, "--budget-s", "2", "--out-dir", str(tmp_path / "out")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert again.returncode == 2 and "holds an earlier check" in again.stderr.strip()
    assert (tmp_path / "out" / "gpu_check.json").read_text() == before


def test_an_unknown_part_is_a_one_line_error_and_writes_nothing(tmp_path):
    proc = subprocess.run(
        [sys.executable, GPU_CHECK, "--budget-s", "9", "--out-dir", str(tmp_path / "o")]
        + ["--parts", "breakout,warp_drive"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2
    assert "warp_drive" in proc.stderr.strip().splitlines()[-1]
    assert not (tmp_path / "o").exists()


def test_the_python_loop_learning_part_trains_beside_the_default_in_its_own_folder(
    tmp_path, monkeypatch
):
    """The Python actor loop learns beside the Atari config as written (the XLA loop, two env
    groups): its own workdir and headline, the same wall-time rule as `learning`, and flags the
    config accepts (checked in process, as train.py would: no run, so no suite time)."""
    monkeypatch.syspath_prepend(os.path.join(ROOT, "benchmarks"))
    import gpu_check

    from jaxrl_dist.config.cli import parse_args

    parts = {p.name: p for p in gpu_check.PARTS}
    names = [p.name for p in gpu_check.PARTS]
    assert names.index("learning_python") == names.index("learning") - 1
    layouts = {}
    for name in ("learning_python", "learning"):
        argv = parts[name].command(str(tmp_path), False, 200)
        assert argv[argv.index("--workdir") + 1] == str(tmp_path / name)
        assert f"--config.max_wall_time_s={200 - gpu_check.LEARNING_MARGIN_S}" in argv
        config, _ = parse_args(argv[2:])
        assert config.env_id == "Breakout-v5" and config.learning_curve
        layouts[name] = (
            config.sebulba.actor_loop,
            config.sebulba.async_envs,
            config.sebulba.env_groups_per_actor,
        )
    assert layouts == {"learning_python": ("python", True, 1), "learning": ("xla", False, 2)}
    (tmp_path / "learning_python").mkdir()
    (tmp_path / "learning_python" / "summary.json").write_text(
        json.dumps({"env_steps": 1000, "wall_time_s": 10.0, "sps": 100.0, "final_eval_return": 4})
    )
    assert parts["learning_python"].headline(str(tmp_path)).startswith("1,000 env steps in 10 s")
