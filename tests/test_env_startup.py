"""Third-party envs fail in one line, never a traceback (issue 55, item 7), with stand-ins of the
tests' own (`third_party_envs.py`): the start-up check makes, resets and steps every env source
once as the run would, so what would crash the run is refused before anything is written; a
missing import is hinted with the package that provides it; a slow worker start is told apart
from a hang; and no worker process outlives a refusal or a pool."""

import os
import signal
import subprocess
import sys
import time

import numpy as np
import psutil
import pytest
from cli_refusal import assert_refused
from own_envs import CORRIDOR_ID, FAULTY_ID
from third_party_envs import CRAFTAX_ID, FAULTY_RESET_ID, JAXMARL_ID, SLOW_START_ID
from train_runs import ROOT

from jaxrl_dist.envs.jax_envs import jax_env_problem, make_jax_env
from jaxrl_dist.envs.sources import check_env, make_env
from jaxrl_dist.envs.workers import WorkerStartError

PPO = os.path.join(ROOT, "configs", "ppo_cartpole.py:quick")
ANAKIN = os.path.join(ROOT, "configs", "anakin_ppo_cartpole.py:quick")


def workers_left() -> list[psutil.Process]:
    """This process's env worker processes still alive (zombies reaped or not, none count)."""
    left = []
    for child in psutil.Process().children(recursive=True):
        try:
            if child.status() != psutil.STATUS_ZOMBIE and "jaxrl_dist.envs.steppers" in " ".join(
                child.cmdline()
            ):
                left.append(child)
        except psutil.NoSuchProcess:
            pass
    return left


@pytest.fixture
def no_worker_left():
    """Fails the test if an env worker process of this process outlives it."""
    assert not workers_left(), "a worker of an earlier test is still alive"
    yield
    assert not workers_left()


def one_line(problem: str | None, needle: str) -> None:
    assert problem is not None and "\n" not in problem and needle in problem, problem


# ----------------------------------------------------------------------------- JAX envs
def test_a_craftax_like_env_is_stepped_through_step_env():
    """Craftax's NoAutoReset env (gymnax's method names, not its base class, no
    `is_truncated`) passes the check and steps: the goal and its own time limit (counted in
    its `done`) end episodes, and the next step is a reset step, batched and jitted as the
    Anakin program steps it. Before, the check passed and the run died in `is_truncated`."""
    import jax
    import jax.numpy as jnp

    assert jax_env_problem(CRAFTAX_ID, {}) is None
    env = make_jax_env(CRAFTAX_ID, {})
    state, first = env.reset(jax.random.split(jax.random.PRNGKey(0), 2))
    step = jax.jit(env.step)
    rewards, done_at = [], []
    for t in range(14):  # env 0 walks right (goal at step 5), env 1 left (limit at step 12)
        state, ts = step(state, jnp.array([1, 0], jnp.int32))
        rewards.append(np.asarray(ts.reward))
        done_at += [(t, int(i)) for i in np.flatnonzero(np.asarray(ts.terminated))]
        assert not np.asarray(ts.truncated).any()
    assert done_at[:2] == [(4, 0), (10, 0)] and (11, 1) in done_at, done_at
    assert np.asarray(rewards)[4, 0] == 1.0 and np.asarray(rewards)[5, 0] == 0.0  # reset step


def test_a_jax_env_whose_step_would_crash_is_refused_in_one_line(tmp_path, capsys):
    """A Craftax-like env whose `step_env` reads a field its state lacks: refused by the
    start-up check's trace of one step (exit 2, nothing written), not 50 lines into the run."""
    flags = [f"--config.env_id={CRAFTAX_ID}", "--config.env_kwargs.name='Chain-BrokenStep-v1'"]
    needle = "its step failed when traced: AttributeError: 'EnvState' object has no attribute"
    assert_refused(ANAKIN, flags, needle, tmp_path, capsys)


def test_a_jax_env_whose_reset_fails_or_step_returns_a_teams_rewards_is_refused():
    problem = jax_env_problem(CRAFTAX_ID, {"name": "Chain-BrokenReset-v1"})
    one_line(problem, "its reset failed when traced: AttributeError")
    problem = jax_env_problem(CRAFTAX_ID, {"name": "Chain-TeamRewards-v1"})
    one_line(problem, "its step returns a reward (2,) per env, where the run needs an")


def test_a_multi_agent_jax_env_is_refused_for_being_multi_agent(tmp_path, capsys):
    """A JaxMARL-like env has no `default_params` either: the refusal names what matters."""
    needle = "made a multi-agent env (JaxMarlLike, 2 agents), but runtime='anakin' steps single"
    assert_refused(ANAKIN, [f"--config.env_id={JAXMARL_ID}"], needle, tmp_path, capsys)
    assert "default_params" not in jax_env_problem(JAXMARL_ID, {})


# ----------------------------------------------------------------------------- missing imports
def _write_module(folder, dotted: str, text: str) -> None:
    *packages, module = dotted.split(".")
    path = folder
    for package in packages:
        path = path / package
        path.mkdir(exist_ok=True)
        (path / "__init__.py").touch()
    (path / f"{module}.py").write_text(text)


NEEDS_PYGAME = "import pygame\n\ndef env():\n    raise AssertionError('never reached')\n"


def test_a_games_package_missing_pygame_is_hinted_with_its_extra(tmp_path, monkeypatch):
    """A package of the tests' own, installed with metadata that says its classic games need
    pygame-ce under the extra "classic" (as PettingZoo's does), imported without pygame: the
    hint is `pip install 'boardgames[classic]'`, not "pip install -e your package"."""
    _write_module(tmp_path, "boardgames.classic.nim", NEEDS_PYGAME)
    info = tmp_path / "boardgames-1.0.dist-info"
    info.mkdir()
    requires = ['pygame-ce>=2.3; extra == "classic"', 'pygame-ce>=2.3; extra == "arcade"']
    lines = ["Metadata-Version: 2.1", "Name: boardgames", "Version: 1.0"]
    lines += [f"Requires-Dist: {r}" for r in requires]
    (info / "METADATA").write_text("\n".join(lines) + "\n")
    (info / "top_level.txt").write_text("boardgames\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(sys.modules, "pygame", None)  # missing, installed here or not
    problem = check_env("pettingzoo:boardgames.classic.nim:env", {})
    one_line(problem, "needs 'pygame', which is not installed (imported by boardgames.")
    assert problem.endswith("pip install 'boardgames[classic]'"), problem


def test_pettingzoos_classic_games_without_pygame_name_pettingzoo_classic(monkeypatch):
    """PettingZoo's own tic-tac-toe, pygame hidden: its requirements name the extra."""
    monkeypatch.setitem(sys.modules, "pygame", None)
    for name in [m for m in sys.modules if m.startswith("pettingzoo.classic")]:
        monkeypatch.delitem(sys.modules, name)
    problem = check_env("pettingzoo:pettingzoo.classic.tictactoe_v3:env", {})
    one_line(problem, "needs 'pygame'")
    assert problem.endswith("pip install 'pettingzoo[classic]'"), problem


def test_a_jax_env_module_missing_six_is_hinted_with_six(tmp_path, monkeypatch, capsys):
    """Brax-like: the env's module imports `six`, which is not installed."""
    _write_module(tmp_path, "physics_envs", "import six\n\ndef make():\n    pass\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(sys.modules, "six", None)
    problem = jax_env_problem("jax:physics_envs:make", {})
    one_line(problem, "module 'physics_envs' needs 'six', which is not installed")
    assert problem.endswith("; pip install six"), problem
    # The module named in the id is the one missing: make it importable.
    problem = jax_env_problem("jax:no_physics_here:make", {})
    one_line(problem, "cannot import module 'no_physics_here'; make it importable")


# ----------------------------------------------------------------------------- Python envs
def test_a_slow_worker_start_is_refused_in_one_line(tmp_path, capsys, no_worker_left):
    """A gymnasium env that takes 60 s to build in a worker, with a 2 s start timeout: the
    start-up check's worker does not start in time; one line naming the start timeout (not a
    hang, no restart), exit 2, nothing written, the worker killed."""
    flags = [
        f"--config.env_id={SLOW_START_ID}",
        "--config.env_kwargs.start_delay_s=60",
        "--config.sebulba.env_start_timeout_s=2",
    ]
    start = time.monotonic()
    needle = "did not import and build its 1 env(s) within 2s, its start timeout; raise config.seb"
    assert_refused(PPO, flags, needle, tmp_path, capsys)
    assert time.monotonic() - start < 30


@pytest.mark.parametrize(
    ("env_id", "kwargs", "needle"),
    [
        (FAULTY_RESET_ID, {}, "its first reset failed in a worker process: the env raised"),
        (FAULTY_ID, {"fault": "nan", "at": 1}, "at its first step it returned a NaN"),
    ],
)
def test_an_env_that_fails_its_first_reset_or_step_is_refused(
    env_id, kwargs, needle, no_worker_left
):
    one_line(check_env(env_id, kwargs), needle)


def test_an_env_whose_step_raises_is_refused_through_the_cli(tmp_path, capsys, no_worker_left):
    flags = [f"--config.env_id={FAULTY_ID}", "--config.env_kwargs.at=1"]
    needle = "its first step failed in a worker process: the env raised RuntimeError: the corr"
    assert_refused(PPO, flags, needle, tmp_path, capsys)


def test_a_slow_first_reset_is_part_of_the_start_not_a_hang(no_worker_left):
    """A pool whose step timeout is 0.5 s and start timeout 20 s, its envs' first reset taking
    1.5 s (in the worker): not a hang, no restart asked for (before, the first reset had the
    step timeout: the worker was replaced, and its replacement as slow, until the budget was
    spent)."""
    restarts = []
    pool = make_env(
        SLOW_START_ID,
        {"first_reset_delay_s": 1.5},
        2,
        2,
        seed=0,
        num_threads=1,
        restart=lambda why: restarts.append(why) or False,
        step_timeout_s=0.5,
        start_timeout_s=20.0,
    )
    try:
        pool.reset()
        pool.step(np.zeros(2, np.int32))
        assert restarts == []
    finally:
        pool.close()


def test_a_replaced_worker_that_does_not_start_stops_the_pool(no_worker_left):
    """A worker killed mid-run is replaced; its replacement does not start in time: one line
    naming the start timeout (no second restart asked for), and no worker is left."""
    restarts = []
    pool = make_env(
        CORRIDOR_ID,
        {},
        2,
        2,
        seed=0,
        num_threads=1,
        restart=lambda why: restarts.append(why) or True,
        start_timeout_s=20.0,
    )
    try:
        pool.reset()
        pool._start_timeout_s = 0.01  # the replacement's start (the first one's was in time)
        os.kill(pool._procs[0].pid, signal.SIGKILL)
        with pytest.raises(WorkerStartError, match=r"env worker 0 did not .* within 0.01s"):
            pool.step(np.zeros(2, np.int32))
    finally:
        pool.close()
    assert len(restarts) == 1 and "the process died" in restarts[0]


def test_an_evaluation_pool_that_does_not_start_ends_the_run_in_one_line(
    tmp_path, capsys, monkeypatch, no_worker_left
):
    """The run's evaluation pool (the worker whose slow start once ended the run in a
    traceback from the evaluation's warm-up) given a start timeout it cannot meet: the run
    stops with one line, exit 1, and leaves no worker behind."""
    from jaxrl_dist.evaluation.base import EvalSetup
    from jaxrl_dist.tools.train_cli import main

    pool = EvalSetup.pool
    monkeypatch.setattr(EvalSetup, "pool", lambda s: pool(s._replace(start_timeout_s=0.01)))
    flags = [f"--config.env_id={CORRIDOR_ID}", "--config.total_env_steps=2048"]
    code = main(["--config", PPO, "--workdir", str(tmp_path / "run"), "--quiet", *flags])
    err = capsys.readouterr().err.strip()
    assert code == 1 and len(err.splitlines()) == 1, err
    assert "env worker 0 did not import and build its" in err
    assert "env(s) within 0.01s, its start timeout; raise config.sebulba.env_start_timeout_s" in err


LEFT_OPEN = """
import numpy as np, own_envs
from jaxrl_dist.envs.process_pool import ProcessPool
make = lambda: own_envs.FaultyCorridor(fault="hang", at=1)
pool = ProcessPool(make, "faulty", 1, 1, 1, seed=0)
pool.reset()
pool.send(np.zeros(1, np.int32), np.arange(1))  # its worker sleeps in the step, reading nothing
print(pool._procs[0].pid, flush=True)
"""


def test_a_pool_left_open_has_its_workers_killed_at_exit(no_worker_left):
    """A process that exits without closing its pool, its worker inside a step that does not
    end (reading no request): the interpreter's exit kills the worker (`atexit`)."""
    out = subprocess.run(
        [sys.executable, "-c", LEFT_OPEN],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": os.path.dirname(os.path.abspath(__file__))},
    )
    assert out.returncode == 0, out.stderr[-2000:]
    pid = int(out.stdout.split()[-1])
    deadline = time.monotonic() + 5
    while psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
        assert time.monotonic() < deadline, f"worker {pid} outlived its process"
        time.sleep(0.1)
