"""benchmarks/provenance.py: every results file names its commit, whether the tree differed
from it (refused unless --allow-dirty, then the diff's SHA-256), the resolved config and the
machine. The rule on tiny git repositories in tmp_path; each writer's output in process, its
measurements replaced by stand-ins (nothing is timed or trained here)."""

import ast
import hashlib
import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCHMARKS = os.path.join(ROOT, "benchmarks")
CARTPOLE_QUICK = os.path.join(ROOT, "configs", "impala_cartpole.py") + ":quick"
sys.path.insert(0, BENCHMARKS)
import provenance  # noqa: E402

from jaxrl_dist.config import jsonable  # noqa: E402
from jaxrl_dist.config.cli import parse_args  # noqa: E402


def _git(repo, *args: str) -> str:
    command = ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args]
    return subprocess.run(command, cwd=repo, check=True, capture_output=True, text=True).stdout


@pytest.fixture
def repo(tmp_path):
    """A checkout with one committed file and a committed results folder."""
    root = tmp_path / "repo"
    (root / "benchmarks" / "results").mkdir(parents=True)
    (root / "code.py").write_text("x = 1\n")
    (root / "benchmarks" / "results" / "old.json").write_text("{}\n")
    _git(root, "init", "-q")
    _git(root, "add", ".")
    _git(root, "commit", "-q", "-m", "first")
    return root


def _refused(capsys, root) -> str:
    with pytest.raises(SystemExit) as exit_:
        provenance.capture(False, root=str(root), devices=False)
    assert exit_.value.code == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), lines
    return lines[0]


def test_a_clean_tree_names_its_commit_and_results_files_do_not_make_it_dirty(repo):
    (repo / "benchmarks" / "results" / "old.json").write_text('{"new": 1}\n')  # data, not code
    (repo / "benchmarks" / "results" / "another.json").write_text("{}\n")
    origin = provenance.capture(False, root=str(repo), devices=False)
    source = origin["source"]
    assert source["git_commit"] == _git(repo, "rev-parse", "HEAD").strip()
    assert source["dirty"] is False and source["diff_sha256"] is None
    assert (source["changed"], source["untracked"]) == ([], [])
    machine = origin["machine"]
    assert machine["cpu_count"] == os.cpu_count() and machine["python"] and machine["device"]
    assert origin["config"] is None and origin["argv"] == sys.argv


def test_a_dirty_tree_is_refused_in_one_line_and_the_flag_keeps_the_diffs_hash(repo, capsys):
    (repo / "code.py").write_text("x = 2\n")
    line = _refused(capsys, repo)
    assert "code.py" in line and "--allow-dirty" in line
    source = provenance.capture(True, root=str(repo), devices=False)["source"]
    diff = subprocess.run(
        ["git", "diff", "HEAD", "--binary", "--", ".", ":(exclude)benchmarks/results"],
        cwd=repo,
        capture_output=True,
        check=True,
    ).stdout
    assert source["dirty"] is True and source["changed"] == ["code.py"]
    assert source["diff_sha256"] == hashlib.sha256(diff).hexdigest()
    assert source["diff_command"].startswith("git diff HEAD --binary")
    (repo / "code.py").write_text("x = 3\n")  # another diff, another hash
    assert provenance.source_state(str(repo))["diff_sha256"] != source["diff_sha256"]


def test_an_untracked_file_is_dirty_and_recorded_with_its_hash(repo, capsys):
    (repo / "new_module.py").write_text("y = 1\n")
    assert "new_module.py" in _refused(capsys, repo)
    source = provenance.source_state(str(repo))
    digest = hashlib.sha256(b"y = 1\n").hexdigest()
    assert source["untracked"] == [{"path": "new_module.py", "sha256": digest}]
    assert source["dirty"] is True and source["diff_sha256"] is None  # nothing tracked changed


def test_a_tree_without_git_is_refused_unless_allowed(tmp_path, capsys):
    assert "is not a git checkout" in _refused(capsys, tmp_path)
    source = provenance.capture(True, root=str(tmp_path), devices=False)["source"]
    assert source["git_commit"] is None and source["dirty"] is None


def test_the_config_is_recorded_as_train_py_builds_it_overrides_included():
    config, _ = parse_args(["--config", CARTPOLE_QUICK, "--workdir", "x", "--config.seed=7"])
    origin = provenance.capture(True, config, devices=False)
    assert origin["config"]["seed"] == 7 and origin["config"] == jsonable(config.to_dict())
    json.dumps(origin)  # JSON-able as it is
    both = provenance.capture(True, {"a": config, "b": config}, devices=False)["config"]
    assert set(both) == {"a", "b"}


# --- each writer --------------------------------------------------------------------------------


def _has_provenance(result: dict, config_names=None) -> dict:
    origin = result["provenance"]
    assert {"source", "config", "machine", "argv", "date"} <= set(origin)
    assert "git_commit" in origin["source"] and "dirty" in origin["source"]
    assert origin["machine"]["cpu_count"] == os.cpu_count()
    if config_names is not None:
        assert set(origin["config"]) == set(config_names)
    return origin


def _read(path) -> dict:
    with open(path) as f:
        return json.load(f)


def test_a_writer_refuses_a_dirty_tree_before_it_measures(tmp_path, monkeypatch, capsys):
    import sps_pairs

    dirty = {"git_commit": "a" * 40, "dirty": True, "changed": ["x.py"], "untracked": []}
    monkeypatch.setattr(provenance, "source_state", lambda root=None: dirty)
    monkeypatch.setattr(sps_pairs, "measure", lambda *a: pytest.fail("measured a dirty tree"))
    argv = ["--old", "o", "--new", "n", "--what", "anakin_ppo", "--out-dir", str(tmp_path)]
    with pytest.raises(SystemExit) as exit_:
        sps_pairs.main(argv)
    assert exit_.value.code == 2 and "x.py" in capsys.readouterr().err
    assert not os.listdir(tmp_path)


def test_sps_pairs_and_anakin_throughput_record_provenance_and_interleave(tmp_path, monkeypatch):
    import anakin_throughput
    import purejaxrl_ppo
    import sps_pairs

    speed = lambda tree, *a: sps_pairs.Measurement(100.0 if tree == "o" else 110.0)  # noqa: E731
    monkeypatch.setattr(sps_pairs, "measure", speed)
    argv = ["--old", "o", "--new", "n", "--what", "anakin_ppo", "--pairs", "2"]
    sps_pairs.main([*argv, "--out-dir", str(tmp_path), "--allow-dirty"])
    pairs = _read(tmp_path / "sps_pairs_anakin_ppo.json")
    _has_provenance(pairs)
    assert pairs["median_ratio"] == 1.1 and pairs["ratio_ci95"] == [1.1, 1.1]

    # baseline, anakin; then anakin, baseline (ABBA); then 3 seeds vmapped; then Sebulba's row
    speeds, seeds_asked = iter([100.0, 95.0, 90.0, 99.0, 80.0, 70.0, 50.0]), []
    monkeypatch.setattr(
        purejaxrl_ppo,
        "measure",
        lambda config, seeds: seeds_asked.append(seeds) or {"sps": next(speeds)},
    )
    monkeypatch.setattr(
        anakin_throughput,
        "library_sps",
        lambda *a, **k: seeds_asked.append(k.get("anakin.num_seeds")) or {"sps": next(speeds)},
    )
    argv = ["--repeat", "2", "--skip-separate", "--seeds", "1,3", "--steps", "1024"]
    anakin_throughput.main([*argv, "--out-dir", str(tmp_path), "--allow-dirty"])
    result = _read(tmp_path / "anakin_throughput.json")
    origin = _has_provenance(result, {"anakin", "sebulba"})
    assert origin["config"]["anakin"]["total_env_steps"] == 1024
    assert result["anakin_over_baseline"] == [0.95, round(90.0 / 99.0, 3)]
    assert [r["position"] for r in result["rows"]["baseline"]] == [0, 1]  # first, then second
    low, high = result["anakin_over_baseline_ci95"]
    assert low <= result["anakin_over_baseline_median"] <= high
    assert result["sebulba"]["sps"] == 50.0
    # A count of 1 is the pairs' programs: their median rows, nothing measured again.
    assert seeds_asked == [1, None, None, 1, 3, 3, None]
    assert result["baseline_1_seeds"]["sps"] == 99.0 and result["anakin_1_seeds"]["sps"] == 90.0
    assert (result["baseline_3_seeds"]["sps"], result["anakin_3_seeds"]["sps"]) == (80.0, 70.0)


def test_startup_eval_beside_training_and_recurrent_record_their_configs(tmp_path, monkeypatch):
    import eval_beside_training
    import recurrent_throughput
    import startup

    compiled = {"compiles": 1, "backend_s": 0.1, "trace_s": 0.1, "lower_s": 0.1, "cache_hits": 0}
    run = {"process_s": 1.0, "startup_s": 0.5, **compiled}
    monkeypatch.setattr(startup, "one_run", lambda config, cache: run)
    argv = ["--configs", CARTPOLE_QUICK, "--warm", "0", "--out-dir", str(tmp_path)]
    assert startup.main([*argv, "--allow-dirty"]) == 0
    origin = _has_provenance(_read(tmp_path / "startup.json"), {CARTPOLE_QUICK})
    assert origin["config"][CARTPOLE_QUICK]["total_env_steps"] == 1280  # the one-step flags

    timed = {"sps": 10.0, "updates": 3, "evaluations_during_training": 1}
    monkeypatch.setattr(eval_beside_training, "timed_run", lambda steps, overrides: timed)
    argv = ["--repeat", "1", "--steps", "2000", "--out-dir", str(tmp_path), "--allow-dirty"]
    eval_beside_training.main(argv)
    arms = set(eval_beside_training.ARMS)
    origin = _has_provenance(_read(tmp_path / "eval_beside_training.json"), arms)
    assert origin["config"]["background"]["eval_in_background"] is True

    monkeypatch.setattr(recurrent_throughput, "library_sps", lambda *a, **k: {"sps": 5.0})
    argv = ["--rows", "anakin_ppo", "--repeat", "1", "--steps", "2048", "--out-dir", str(tmp_path)]
    recurrent_throughput.main([*argv, "--allow-dirty"])
    origin = _has_provenance(_read(tmp_path / "recurrent_throughput.json"), {"anakin_ppo"})
    path, overrides = recurrent_throughput.ROWS["anakin_ppo"]
    expected = recurrent_throughput.library_config(path, 2048, **overrides)
    assert origin["config"]["anakin_ppo"] == jsonable(expected.to_dict())


def test_the_gpu_check_records_its_provenance_and_its_parts_record_theirs(tmp_path, monkeypatch):
    import gpu_check

    def part(part, out_dir, tiny, timeout_s, env):
        return {"part": part.name, "status": "ok", "headline": "stand-in"}

    monkeypatch.setattr(gpu_check, "run_part", part)
    argv = ["--tiny", "--budget-s", "5", "--parts", "breakout", "--out-dir", str(tmp_path / "o")]
    assert gpu_check.main([*argv, "--allow-dirty"]) == 0
    _has_provenance(_read(tmp_path / "o" / "gpu_check.json"))
    children = [p for p in gpu_check.PARTS if p.name not in ("determinism",)]
    children = [p for p in children if not p.name.startswith("learning")]  # train.py: no flag
    for p in children:  # the check refused a dirty tree itself: its parts record, not refuse
        assert "--allow-dirty" in p.command(str(tmp_path), True, 10.0), p.name


WRITES = ("json.dump(", "write_result(", ".savefig(", "write_table(")
# Modules that write for a writer that takes the provenance itself (learning_seeds.py: a
# finished seed's `seed_result.json` in its work dir, for learning.py, which takes it).
HELPERS = ("provenance.py", "learning_report.py", "stages.py", "learning_seeds.py")


def test_every_benchmark_that_writes_a_result_takes_its_provenance_first():
    """A static check that no writer is left out: each script under benchmarks/ that dumps
    JSON, calls `write_result` or saves a figure also adds `--allow-dirty` and calls
    `provenance.capture` in the function that parses its arguments."""
    missing = []
    for name in sorted(os.listdir(BENCHMARKS)):
        if not name.endswith(".py") or name in HELPERS:
            continue
        with open(os.path.join(BENCHMARKS, name)) as f:
            source = f.read()
        if not any(w in source for w in WRITES):
            continue
        calls = {
            ast.unparse(node.func)
            for node in ast.walk(ast.parse(source))
            if isinstance(node, ast.Call)
        }
        if not {"provenance.capture", "provenance.add_argument"} <= calls:
            missing.append(name)
    assert not missing, f"writers without provenance: {missing}"
