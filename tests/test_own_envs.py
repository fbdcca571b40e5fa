"""A user's own environments (`docs/guides/your-own-environment.md`): a gymnasium env defined
in `own_envs.py` trained by PPO and Rainbow through `scripts/train.py`, with an evaluation env
of its own, checkpoints, `scripts/evaluate.py` and an exact resume; the bad inputs refused
before anything is written. Its worker processes and their faults: `test_own_env_workers.py`."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest
from cli_refusal import assert_refused
from own_envs import CORRIDOR_ID
from train_runs import ROOT, train_main

PPO = os.path.join(ROOT, "configs", "ppo_cartpole.py")
RAINBOW = os.path.join(ROOT, "configs", "rainbow_cartpole.py")
TESTS = os.path.dirname(os.path.abspath(__file__))
# The corridor's module is importable where the tests are: the user's PYTHONPATH.
USER_PATH = {"PYTHONPATH": os.pathsep.join([TESTS, os.environ.get("PYTHONPATH", "")])}

CORRIDOR = [f"--config.env_id={CORRIDOR_ID}", "--config.stop_at_eval_return=1.0"]


def _script(name: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, os.path.join(ROOT, "scripts", name), *args],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
        env={**os.environ, **USER_PATH},
    )


def test_ppo_learns_the_corridor_through_train_py_and_evaluates_on_its_own_env(tmp_path, capsys):
    """`scripts/train.py --config.env_id=gymnasium:own_envs:KeyCorridor-v0`: PPO opens the door
    (return 1, the optimum), evaluated on an env of its own (`eval_env_kwargs`): a time limit
    of exactly the shortest path's 12 steps, so only the optimal path scores. The checkpoint
    that scored (`keep_best_checkpoints=1`, `--step best`) plays through `scripts/evaluate.py`, on
    the run's evaluation env. The latest one is not asked to: the stop comes an update or more
    after the evaluated params, and a greedy policy on the edge of the time limit can lose them
    (CI saw it once)."""
    workdir = str(tmp_path / "ppo")
    out = _script(
        "train.py",
        "--config",
        PPO,
        "--workdir",
        workdir,
        *CORRIDOR,
        "--config.total_env_steps=60000",
        "--config.eval_every_updates=4",
        "--config.eval_env_kwargs.max_episode_steps=12",  # 3 steps left, 9 right: no detour
        "--config.eval_episodes=4",
        "--config.keep_best_checkpoints=1",
    )
    assert out.returncode == 0, out.stderr[-3000:]
    summary = json.load(open(os.path.join(workdir, "summary.json")))
    assert summary["best_eval_return"] == 1.0, summary["evals"]
    assert summary["stop_reason"].startswith("eval return")
    assert os.listdir(os.path.join(workdir, "checkpoints"))

    flags = ["--step", "best", "--episodes", "3", "--json", str(tmp_path / "e.json")]
    out = _script("evaluate.py", workdir, *flags)
    assert out.returncode == 0, out.stderr[-3000:]
    record = json.load(open(tmp_path / "e.json"))
    assert record["env_id"] == CORRIDOR_ID and record["returns"] == [[1.0]] * 3
    assert record["env_kwargs"] == {"max_episode_steps": 12}  # the run's evaluation env

    # The script's main in this process (the corridor's module is importable here too).
    from jaxrl_dist.tools.evaluate_cli import main as evaluate_main

    # Another env of the same spaces: the corridor from another start cell.
    other = "{'start': 1, 'max_episode_steps': 40}"
    flags = ["--episodes", "2", "--eval_env_kwargs", other, "--json", str(tmp_path / "e2.json")]
    assert evaluate_main([workdir, *flags]) == 0
    record = json.load(open(tmp_path / "e2.json"))
    assert record["env_kwargs"] == {"start": 1, "max_episode_steps": 40}
    assert len(record["returns"]) == 2

    capsys.readouterr()
    assert evaluate_main([workdir, "--eval_env_id", "CartPole-v1"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "other spaces than the policy's env" in err, err


def test_rainbow_learns_the_corridor(tmp_path):
    summary = train_main(
        RAINBOW,
        str(tmp_path / "rainbow"),
        *CORRIDOR,
        "--config.total_env_steps=60000",
        "--config.eval_every_updates=100",
        "--config.algo.v_max=2.0",  # returns are at most 1
        "--config.learning_curve=false",
    )
    assert summary["best_eval_return"] == 1.0, summary["evals"]


DETERMINISTIC = [
    f"--config.env_id={CORRIDOR_ID}",
    "--config.deterministic=true",
    "--config.sebulba.async_envs=false",
    "--config.sebulba.envs_per_actor=8",
    "--config.batch_size=8",
    "--config.unroll_length=16",
    "--config.sebulba.env_epoch_updates=4",
    "--config.eval_every_updates=4",
    "--config.eval_episodes=2",
    "--config.checkpoint_every_updates=4",
    "--config.stop_at_eval_return=none",
    "--config.learning_curve=false",
    "--config.algo.anneal_lr=false",
]


def test_a_deterministic_run_resumes_to_the_same_params(tmp_path):
    """10 updates in one go, and 5 then `--resume` to 10: bit-identical params (the resume
    rebuilds the worker processes' envs of its env epoch by replaying their actions)."""
    whole = train_main(
        PPO, str(tmp_path / "whole"), *DETERMINISTIC, "--config.total_env_steps=1280"
    )
    half = str(tmp_path / "half")
    first = train_main(PPO, half, *DETERMINISTIC, "--config.total_env_steps=640")
    resumed = train_main(PPO, half, *DETERMINISTIC, "--config.total_env_steps=1280", "--resume")
    assert (whole["updates"], first["updates"], resumed["updates"]) == (10, 5, 10)
    assert resumed["initial_params_sha256"] == first["params_sha256"]
    assert resumed["params_sha256"] == whole["params_sha256"]


def test_a_ctrl_c_to_the_whole_process_group_stops_the_run_cleanly(tmp_path):
    """SIGINT to the run's process group, as a terminal's Ctrl-C sends it (SIGTERM from
    `timeout` or a scheduler reaches the group alike): the workers (in sessions of their own)
    are not interrupted mid-step, so the run stops as a signalled run does, with no worker
    restarted: its checkpoint, exit 0; and no worker process is left behind."""
    sig = signal.SIGINT
    workdir = tmp_path / "run"
    args = [os.path.join(ROOT, "scripts", "train.py"), "--config", PPO + ":quick"]
    args += ["--workdir", str(workdir), "--quiet", *CORRIDOR[:1]]
    args += ["--config.total_env_steps=100000000", "--config.log_every_updates=2"]
    proc = subprocess.Popen(
        [sys.executable, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **USER_PATH},
        start_new_session=True,  # its own process group, as a shell gives a command
    )
    try:
        metrics, deadline = workdir / "metrics.jsonl", time.monotonic() + 120
        while not (metrics.exists() and metrics.read_text().count("\n") >= 2):
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()[1]
            time.sleep(0.2)
        pgrep = ["pgrep", "-P", str(proc.pid), "-f", "jaxrl_dist.envs.steppers"]
        workers = subprocess.run(pgrep, capture_output=True, text=True).stdout.split()
        assert workers
        os.killpg(proc.pid, sig)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:  # a run that did not stop must not outlive the test
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err[-3000:]
    summary = json.load(open(workdir / "summary.json"))
    assert (summary["stop_reason"], summary["actor_restarts"]) == (sig.name, 0)
    time.sleep(1)
    left = [p for p in workers if os.path.exists(f"/proc/{p}")]
    assert not left, f"worker processes {left} outlived the run"


# ----------------------------------------------------------------------------- bad inputs
BAD = [
    (["--config.env_id=gymnasium:KeyCoridor-v0"], "is not a registered gymnasium env"),
    (["--config.env_id=gymnasium:no_such_pkg:Maze-v0"], "cannot import module 'no_such_pkg'"),
    ([f"--config.env_id={CORRIDOR_ID}", "--config.env_kwargs.size=3"], "rejected by gymnasium"),
    (["--config.env_id=gymnasium:own_envs:VectorCorridor-v0"], "does not make a gymnasium.Env"),
    (["--config.env_id=gymnasium:own_envs:AutoresetCorridor-v0"], "Autoreset"),
    (["--config.env_id=gymnasium:own_envs:ShiftingCorridor-v0"], "spaces change between"),
    (["--config.env_id=gymnasium:own_envs:TextCorridor-v0"], "observation space Text"),
    (["--config.env_id=gymnasium:own_envs:MultiActionCorridor-v0"], "action space MultiDiscrete"),
    (["--config.env_id=gymnasium:own_envs:BrokenCorridor-v0"], "making the env failed"),
    (
        [
            f"--config.env_id={CORRIDOR_ID}",
            "--config.sebulba.actor_loop=xla",
            "--config.sebulba.async_envs=false",
        ],
        "is a Python env",
    ),
    (
        [f"--config.env_id={CORRIDOR_ID}", "--config.sebulba.env_thread_affinity_offset=0"],
        "set it to -1",
    ),
    (
        [f"--config.env_id={CORRIDOR_ID}", "--config.sebulba.env_threads_per_actor=3"],
        "cannot hold 32 envs",
    ),
    (
        [f"--config.env_id={CORRIDOR_ID}", "--config.eval_env_id=CartPole-v1"],
        "evaluate on an env with the same spaces",
    ),
    (
        [f"--config.env_id={CORRIDOR_ID}", "--config.eval_env_id=gymnasium:Nope-v0"],
        "config.eval_env_id='gymnasium:Nope-v0' is not a registered",
    ),
    (["--config.env_id=jax:own_envs:make_jax_corridor"], "runtime='anakin'"),
    (["--config.env_id=factory:maze"], "names no registered factory"),
]


@pytest.mark.parametrize(("overrides", "needle"), BAD)
def test_bad_input_is_one_line_exit_2_nothing_written(tmp_path, capsys, overrides, needle):
    assert_refused(PPO + ":quick", overrides, needle, tmp_path, capsys)


def test_train_takes_an_env_factory(tmp_path):
    """`Trainer(config, workdir, env_factory=...)`: a lambda over a class of the caller's,
    registered as `factory:NAME` and stepped in worker processes."""
    from own_envs import KeyCorridor

    from jaxrl_dist import Trainer, load_config

    config = load_config(
        PPO,
        stop_at_eval_return=1.0,
        eval_every_updates=4,
        env_id="factory:corridor",
        learning_curve=False,
        # The class alone has no time limit (gymnasium.make adds the registered one).
        **{"env_kwargs.max_episode_steps": 40},
    )
    workdir = str(tmp_path / "run")
    factory = lambda **kw: KeyCorridor(**kw)  # noqa: E731  a lambda: pickled by value
    run = Trainer(config, workdir, quiet=True, env_factory=factory).run()
    assert run.summary["best_eval_return"] == 1.0
    assert json.load(open(os.path.join(workdir, "config.json")))["env_id"] == "factory:corridor"


def test_a_factory_is_checked_like_a_registered_env():
    """`register_env_factory` (what `train(config, env_factory=...)` uses): a factory returning
    something else than one gymnasium.Env is refused in one line."""
    import gymnasium
    from own_envs import KeyCorridor

    from jaxrl_dist.envs import check_env, env_spec, register_env_factory

    assert check_env(register_env_factory("corridor", KeyCorridor), {}) is None
    assert env_spec("factory:corridor", {"length": 4}).obs_shape == (8,)
    env_id = register_env_factory("number", lambda: 3)
    assert "made a int, not a gymnasium.Env" in check_env(env_id, {})
    env_id = register_env_factory("vector", lambda: gymnasium.vector.SyncVectorEnv([KeyCorridor]))
    assert "makes a VectorEnv" in check_env(env_id, {})
    with pytest.raises(TypeError, match="not callable"):
        register_env_factory("bad", "own_envs:KeyCorridor")
