"""Several processes joined by jax.distributed (gloo on fake CPU devices), each in its own process:
2 x 2 devices equals 1 x 4 in deterministic mode, checkpoints resume across layouts, a killed
process stops the others, mismatched configs are refused."""

import json
import os
import signal
import subprocess
import sys
import time

import jax
import numpy as np
import pytest

from jaxrl_dist.checkpoints.store import restore_params, tree_digest
from jaxrl_dist.tools.launch import TRAIN, free_port, start_processes
from jaxrl_dist.tools.train_cli import main

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CARTPOLE = os.path.join(ROOT, "configs", "impala_cartpole.py")
UNROLL, ENVS, BATCH = 20, 8, 16  # two actors of 8 envs in all: one unroll of each per update


def _args(workdir, updates, actor_threads, *extra):
    return [
        "--config",
        CARTPOLE,
        "--workdir",
        str(workdir),
        "--quiet",
        "--config.deterministic=true",
        "--config.sebulba.async_envs=false",
        "--config.sebulba.actor_loop=python",
        f"--config.sebulba.envs_per_actor={ENVS}",
        f"--config.batch_size={BATCH}",
        f"--config.sebulba.num_actor_threads={actor_threads}",
        f"--config.total_env_steps={updates * BATCH * UNROLL}",
        "--config.eval_every_updates=0",
        "--config.eval_episodes=2",
        "--config.log_every_updates=2",
        "--config.checkpoint_every_updates=3",
        "--config.stop_at_eval_return=none",
        *extra,
    ]


def _two_processes(workdir, updates, *extra):
    """2 processes x 2 fake CPU devices, one actor thread each."""
    procs = start_processes(
        _args(workdir, updates, 1, *extra),
        2,
        devices_per_process=2,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    outs = [p.communicate(timeout=240) for p in procs]
    for p, (_, err) in zip(procs, outs, strict=True):
        assert p.returncode == 0, err[-3000:]


def _one_process(workdir, updates, *extra):
    """1 process x 4 fake CPU devices, two actor threads."""
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "JAX_NUM_CPU_DEVICES": "4"}
    out = subprocess.run(
        [sys.executable, TRAIN, *_args(workdir, updates, 2, *extra)],
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert out.returncode == 0, out.stderr[-3000:]


def _summary(workdir):
    with open(os.path.join(workdir, "summary.json")) as f:
        return json.load(f)


def _train_records(workdir):
    with open(os.path.join(workdir, "metrics.jsonl")) as f:
        return [r for r in map(json.loads, f) if "charts/sps" in r]


def _max_param_diff(run_a, run_b):
    diffs = jax.tree.map(
        lambda a, b: float(np.max(np.abs(a - b))), restore_params(run_a), restore_params(run_b)
    )
    return max(jax.tree.leaves(diffs))


def test_two_processes_equal_one_process_and_resume_across_layouts(tmp_path):
    two, one = tmp_path / "two", tmp_path / "one"
    _two_processes(two, updates=6)
    _one_process(one, updates=6)
    s2, s1 = _summary(two), _summary(one)
    assert s2["updates"] == s1["updates"] == 6
    # Both processes hold bit-identical params (each digested its own copy).
    assert len(s2["params_sha256_by_process"]) == 2
    assert len(set(s2["params_sha256_by_process"])) == 1
    # Fed the same data, the 2 x 2 run ends where the 1 x 4 run does, up to float rounding of
    # the cross-device reductions.
    assert s2["params_sha256"] != s2["initial_params_sha256"]  # they did learn
    assert _max_param_diff(two, one) < 1e-5
    r2, r1 = _train_records(two), _train_records(one)
    assert [r["stats/processes"] for r in r2] == [2, 2, 2]
    assert [r["stats/processes"] for r in r1] == [1, 1, 1]
    for a, b in zip(r2, r1, strict=True):  # losses from the same batches; episode counts summed
        assert a["charts/episodes"] == b["charts/episodes"] > 0
        np.testing.assert_allclose(a["losses/loss"], b["losses/loss"], rtol=1e-4)
    # Each checkpoint resumes in the other layout; both continue alike to update 10, with a
    # run-time change (applied before the first update after the resume) and evaluations.
    for workdir in (two, one):
        (workdir / "control.json").write_text('{"learning_rate": 5e-4, "entropy_cost": 0.02}')
    evaluate, best = "--config.eval_every_updates=2", "--config.keep_best_checkpoints=1"
    _one_process(two, 10, "--resume", evaluate, best)
    _two_processes(one, 10, "--resume", evaluate, best)
    s2, s1 = _summary(two), _summary(one)
    assert s2["updates"] == s1["updates"] == 10
    assert _max_param_diff(two, one) < 1e-5
    assert len(set(s1["params_sha256_by_process"])) == 1
    for s in (s2, s1):
        (change,) = s["hparam_changes"]
        assert change["updates"] == 6
        assert change["values"] == {"learning_rate": 5e-4, "entropy_cost": 0.02}
        # The final evaluation of the first part is in its last checkpoint; a new best is
        # saved (on process 0's request when it is not the final one) and kept.
        assert [e["updates"] for e in s["evals"]] == [6, 8, 10]
        assert s["best_checkpoint_step"] == s["best_eval"]["updates"]


def test_a_stop_beside_training_takes_back_the_scored_params_on_every_process(tmp_path):
    """The first evaluation (beside training, on process 0) crosses the target: both
    processes go on updating while it plays, then take back its snapshot (process 0's, sent to
    the other) before the final save; process 0 alone wrote it to checkpoints/best/."""
    workdir = tmp_path / "run"
    beside = ("--config.eval_in_background=true", "--config.eval_every_updates=2")
    _two_processes(workdir, 12, *beside, "--config.stop_at_eval_return=1")
    s = _summary(workdir)
    assert s["final_params_update"] == 2 and s["updates"] > 2, s["updates"]
    assert s["best_checkpoint_step"] == 2 and [e["updates"] for e in s["evals"]] == [2]
    scored = tree_digest(restore_params(os.path.join(workdir, "checkpoints", "best"), 2))
    assert s["params_sha256_by_process"] == [scored, scored]
    assert tree_digest(restore_params(str(workdir))) == scored  # the final checkpoint's


def _start_long_run(workdir, *extra):
    """2 processes x 2 fake devices on a run that will not end by itself; waits until it logs."""
    args = [
        "--config",
        CARTPOLE,
        "--workdir",
        str(workdir),
        "--quiet",
        "--config.total_env_steps=100000000",
        "--config.stop_at_eval_return=none",
        "--config.log_every_updates=5",
        *extra,
    ]
    procs = start_processes(args, 2, 2, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    metrics, deadline = workdir / "metrics.jsonl", time.monotonic() + 180
    while not (metrics.exists() and metrics.stat().st_size > 0):  # training is under way
        if any(p.poll() is not None for p in procs) or time.monotonic() > deadline:
            for p in procs:
                p.kill()
            pytest.fail(f"no training within 180 s: {procs[0].communicate()[1][-3000:]}")
        time.sleep(0.2)
    return procs


def test_sigterm_to_one_process_stops_all_cleanly(tmp_path):
    """SIGTERM to process 1 only: both stop at the same update, write the final checkpoint
    together and exit 0; the summary names the signal and where it came from."""
    workdir = tmp_path / "run"
    procs = _start_long_run(workdir)
    procs[1].send_signal(signal.SIGTERM)
    outs = [p.communicate(timeout=90) for p in procs]
    for p, (_, err) in zip(procs, outs, strict=True):
        assert p.returncode == 0, err[-3000:]
    summary = _summary(workdir)
    assert summary["stop_reason"] == "SIGTERM on process 1"
    assert summary["latest_checkpoint_step"] == summary["updates"] > 0
    assert len(set(summary["params_sha256_by_process"])) == 1


@pytest.mark.parametrize("victim", [1, 0])
def test_killing_one_process_stops_the_other(tmp_path, victim):
    """SIGKILL one process mid-run: the other exits non-zero within the heartbeat timeout (4 s
    here) plus a margin, with an error saying another process died, instead of hanging."""
    procs = _start_long_run(tmp_path / "run", "--heartbeat_timeout_s=4")
    try:
        procs[victim].send_signal(signal.SIGKILL)
        killed_at, survivor = time.monotonic(), procs[1 - victim]
        _, err = survivor.communicate(timeout=60)
        took = time.monotonic() - killed_at
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    assert survivor.returncode != 0
    assert took < 40, took
    assert "died" in err, err[-3000:]


def test_processes_with_different_configs_are_refused(tmp_path):
    port = free_port()
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "JAX_NUM_CPU_DEVICES": "1"}
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                TRAIN,
                "--config",
                CARTPOLE,
                "--workdir",
                str(tmp_path / "run"),
                f"--config.seed={i}",
                f"--coordinator_address=127.0.0.1:{port}",
                "--num_processes=2",
                f"--process_id={i}",
            ],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(2)
    ]
    errs = [p.communicate(timeout=180)[1] for p in procs]
    for p, err in zip(procs, errs, strict=True):
        assert p.returncode == 2, err[-2000:]
        assert "process(es) [1] have a different config from process 0" in err
    assert not (tmp_path / "run" / "config.json").exists()  # nothing written


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--num_processes=2", "--process_id=0"], "needs --coordinator_address"),
        (
            ["--num_processes=2", "--coordinator_address=localhost:1", "--process_id=2"],
            "--process_id=2 must be in [0, 2)",
        ),
        (["--distributed", "--num_processes=2"], "--distributed detects the cluster itself"),
        (["--process_id=1"], "--process_id=1 needs --num_processes > 1"),
    ],
)
def test_bad_launch_flags_exit_2_before_anything_starts(tmp_path, flags, message, capsys):
    """`scripts/train.py`'s `main` in this process: refused before JAX's distributed runtime
    or anything else starts."""
    code = main(["--config", CARTPOLE, "--workdir", str(tmp_path / "run"), *flags])
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1 and message in err, err
    assert not (tmp_path / "run").exists()


def test_rainbow_over_two_processes_samples_local_shards_and_saves_each(tmp_path):
    """Prioritized replay on 2 processes x 2 fake devices: each process samples its own replay,
    gets its rows of the update's priorities back and saves its own replay file; a resume takes
    both back (no refill warning) and the processes stay in step."""
    rainbow = os.path.join(ROOT, "configs", "rainbow_cartpole.py")
    workdir = tmp_path / "run"

    def run(total, *extra):
        args = [
            "--config",
            f"{rainbow}:quick",
            "--workdir",
            str(workdir),
            "--quiet",
            f"--config.total_env_steps={total}",
            *extra,
        ]
        procs = start_processes(args, 2, 2, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        outs = [p.communicate(timeout=240) for p in procs]
        for p, (_, err) in zip(procs, outs, strict=True):
            assert p.returncode == 0, err[-3000:]
        return [err for _, err in outs]

    run(1_200)
    first = _summary(workdir)
    step = first["latest_checkpoint_step"]
    files = os.listdir(workdir / "checkpoints" / str(step) / "data")
    assert sorted(f for f in files if f.startswith("bytes")) == ["bytes.0", "bytes.1"]
    weights = [r["losses/importance_weight_mean"] for r in _train_records(workdir)]
    assert weights and min(weights) < 0.95  # each process's priorities came back
    errs = run(1_800, "--resume")
    assert not any("holds no replay contents" in err for err in errs)
    resumed = _summary(workdir)
    assert resumed["resumed_from_update"] == step and resumed["updates"] > step
    assert len(set(resumed["params_sha256_by_process"])) == 1
