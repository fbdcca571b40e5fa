"""A user's own environments' worker processes (`docs/guides/your-own-environment.md`): the
process pool speaks EnvPool's protocol, a worker that raises, hangs or is killed is replaced
within the restart budget (or the run stops with the reason), and a replaced worker's envs end
their episodes truncated, with no phantom episode and no hang on an answer left in the socket.
The runs train the corridor of `own_envs.py` (`test_own_envs.py` trains it to learn)."""

import json
import os
import signal
import subprocess
import sys
import time

import cloudpickle
import numpy as np
import pytest
from own_envs import CORRIDOR_ID, FAULTY_ID, KeyCorridor
from train_runs import ROOT, train_main

PPO = os.path.join(ROOT, "configs", "ppo_cartpole.py")


# ----------------------------------------------------------------------------- worker faults
FAULTS = [
    f"--config.env_id={FAULTY_ID}",
    "--config.total_env_steps=4000",
    "--config.eval_every_updates=0",
    "--config.learning_curve=false",
    "--config.sebulba.actor_hang_timeout_s=2",
    "--config.sebulba.async_envs=false",  # every recv waits for every worker: a hang is noticed
]


@pytest.mark.parametrize("fault", ["raise", "hang", "kill"])
def test_a_failed_worker_is_restarted_and_the_run_finishes(tmp_path, fault):
    """A worker whose env raises, hangs (no answer within actor_hang_timeout_s) or is killed
    with SIGKILL is replaced within the actors' restart budget; the run reaches its end."""
    once = f"--config.env_kwargs.once={str(tmp_path / 'faulted')!r}"
    summary = train_main(
        PPO + ":quick", str(tmp_path / fault), *FAULTS, f"--config.env_kwargs.fault={fault!r}", once
    )
    assert summary["env_steps"] >= 4000
    assert summary["actor_restarts"] >= 1


def test_a_worker_that_keeps_failing_stops_the_run_within_the_budget(tmp_path):
    from jaxrl_dist.tools.train_cli import main

    workdir = str(tmp_path / "run")
    flags = [*FAULTS, "--config.sebulba.actor_max_restarts=2"]  # every env raises at its step 20
    code = main(["--config", PPO + ":quick", "--workdir", workdir, "--quiet", *flags])
    assert code == 1
    summary = json.load(open(os.path.join(workdir, "summary.json")))
    assert "restart budget is spent" in summary["stop_reason"]
    assert summary["actor_restarts"] == 2


def test_a_nan_observation_stops_the_run_with_the_reason(tmp_path, capsys):
    from jaxrl_dist.tools.train_cli import main

    workdir = str(tmp_path / "run")
    flags = [*FAULTS, "--config.env_kwargs.fault='nan'"]
    code = main(["--config", PPO + ":quick", "--workdir", workdir, "--quiet", *flags])
    assert code == 1
    summary = json.load(open(os.path.join(workdir, "summary.json")))
    assert "returned a NaN or infinite observation" in summary["stop_reason"]
    assert summary["actor_restarts"] == 0  # not a fault a restart mends
    assert os.listdir(os.path.join(workdir, "checkpoints"))  # the final checkpoint


# ----------------------------------------------------------------------------- the pool itself
def test_the_process_pool_speaks_envpools_protocol():
    """Async recv batches are whole workers by env id; the step after an episode's end is a
    reset step; truncation (the TimeLimit) and termination stay apart; seeds reproduce."""
    from jaxrl_dist.envs import make_env

    env = make_env(CORRIDOR_ID, {}, 4, 2, seed=3, num_threads=2)
    try:
        env.async_reset()
        obs, reward, terminated, truncated, info = env.recv()
        assert obs.shape == (2, 20) and obs.dtype == np.float32
        assert set(info["env_id"]) in ({0, 1}, {2, 3}) and not info["elapsed_step"].any()
        np.testing.assert_array_equal(obs.argmax(1), [6, 6])  # cell 3, no key
        ends = {}
        for _ in range(400):  # always left: the key (cell 0), then stuck until truncated
            env.send(np.zeros(2, np.int32), info["env_id"])
            obs, reward, terminated, truncated, info = env.recv()
            for i, steps, tr in zip(info["env_id"], info["elapsed_step"], truncated, strict=True):
                if tr:
                    ends[int(i)] = int(steps)
            assert not terminated.any() and not reward.any()
        assert ends == {0: 40, 1: 40, 2: 40, 3: 40}
    finally:
        env.close()


def _killed_worker_pool():
    """A sync pool of 2 envs in one worker process, whose worker the test kills."""
    from jaxrl_dist.envs import make_env

    return make_env(CORRIDOR_ID, {}, 2, 2, seed=0, num_threads=1, restart=lambda why: True)


def test_a_replaced_workers_envs_end_their_episodes_truncated_not_silently():
    """Subset sends (as the seats make them): env 0's step is answered, then the worker dies
    with env 1's in flight. Env 1's episode ends truncated at once; env 0's at its next send
    (not a silent reset inside an episode); then both start new episodes."""
    pool = _killed_worker_pool()
    try:
        pool.async_reset()
        pool.recv()
        for _ in range(3):
            pool.step(np.ones(2, np.int32))
        pool.send(np.ones(1, np.int32), np.array([0]))
        pool._collect()  # env 0's answer is in
        os.kill(pool._procs[0].pid, signal.SIGKILL)
        pool.send(np.ones(1, np.int32), np.array([1]))
        obs, reward, terminated, truncated, info = pool.recv()
        assert list(info["env_id"]) == [0, 1] and list(info["elapsed_step"]) == [4, 4]
        assert list(truncated) == [False, True]  # env 1 cut in flight
        _, _, terminated, truncated, info = pool.step(np.ones(2, np.int32))
        assert list(info["elapsed_step"]) == [5, 0] and list(truncated) == [True, False]
        assert pool.cut_episodes == 2
        _, _, _, truncated, info = pool.step(np.ones(2, np.int32))
        assert list(info["elapsed_step"]) == [0, 1] and not truncated.any()
    finally:
        pool.close()


def test_a_worker_dying_on_a_reset_step_adds_no_phantom_episode():
    """Both episodes ended (truncated at the time limit); the worker dies while their reset
    steps are in flight: the new worker answers those reset steps, nothing is cut."""
    pool = _killed_worker_pool()
    try:
        pool.async_reset()
        pool.recv()
        for _ in range(40):  # always left: stuck at the key until the 40-step limit
            *_, truncated, info = pool.step(np.zeros(2, np.int32))
        assert truncated.all() and list(info["elapsed_step"]) == [40, 40]
        pool.send(np.zeros(2, np.int32), np.arange(2))
        os.kill(pool._procs[0].pid, signal.SIGKILL)
        _, reward, terminated, truncated, info = pool.recv()
        assert list(info["elapsed_step"]) == [0, 0] and not (terminated | truncated).any()
        assert pool.cut_episodes == 0
    finally:
        pool.close()


def test_an_answer_waiting_in_the_socket_is_no_hang(tmp_path):
    """The parent busy past the step timeout with two requests queued on one worker: both
    answers are waiting, so no worker is declared hung and replaced."""
    from jaxrl_dist.envs import make_env

    restarts = []
    pool = make_env(
        CORRIDOR_ID, {}, 2, 2, seed=0, num_threads=1, restart=restarts.append, step_timeout_s=1
    )
    try:
        pool.async_reset()
        pool.recv()
        pool.send(np.ones(1, np.int32), np.array([0]))
        pool.send(np.ones(1, np.int32), np.array([1]))
        time.sleep(1.5)
        *_, truncated, info = pool.recv()
        assert not restarts and not truncated.any() and list(info["elapsed_step"]) == [1, 1]
    finally:
        pool.close()


@pytest.mark.parametrize("env_id", [CORRIDOR_ID, "factory:unpickled_corridor"])
def test_a_workers_factory_unpickles_without_jax(env_id):
    """What a worker unpickles (a Python source's factory) imports gymnasium and the user's
    module, never JAX: importing JAX is about 1 s of CPU in every worker a run starts."""
    from jaxrl_dist.envs.python_sources import python_factory, register_env_factory

    register_env_factory("unpickled_corridor", KeyCorridor)
    payload = cloudpickle.dumps(python_factory(env_id, {"max_episode_steps": 5}))
    script = (
        "import sys, cloudpickle; env = cloudpickle.loads(sys.stdin.buffer.read())(); "
        "env.reset(seed=0); print(sorted(m for m in ('jax', 'jaxlib') if m in sys.modules))"
    )
    paths = os.pathsep.join([os.path.join(ROOT, "tests"), ROOT])
    done = subprocess.run(
        [sys.executable, "-c", script],
        input=payload,
        capture_output=True,
        check=True,
        env={**os.environ, "PYTHONPATH": paths},
    )
    assert done.stdout.decode().strip() == "[]", done.stderr.decode()[-2000:]
