"""Bad configs: one line naming the field and the fix, exit code 2, nothing written."""

import os
import subprocess
import sys

import pytest

from jaxrl_dist.config.cli import EXIT_CONFIG_ERROR, parse_args
from jaxrl_dist.tools.train_cli import main

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CARTPOLE = os.path.join(ROOT, "configs", "impala_cartpole.py")

BAD = [
    (["--config.no_such_field=1"], "no_such_field"),
    (["--config.batch_sizee=8"], "did you mean batch_size"),
    (["--config.batch_size=abc"], "batch_size"),
    (["--config.batch_size=-16"], "batch_size"),
    (["--config.unroll_length=0"], "unroll_length"),
    (["--config.sebulba.queue_size=0"], "queue_size"),
    (
        [
            "--config.sebulba.actor_loop=python",
            "--config.sebulba.async_envs=true",
            "--config.sebulba.envs_per_actor=7",
        ],
        "envs_per_actor",
    ),  # an async pool returns half its envs per recv()
    (["--config.env_id=CartPole-v9"], "did you mean"),
    (["--config.env_kwargs.max_episode_stepz=10"], "max_episode_steps"),
    (["--config.algo.learning_rate=-1e-3"], "algo.learning_rate"),
    (["--config.algo.optimizer=sgd"], "algo.optimizer"),
    (["--config.algo.learnin_rate=1e-3"], "learning_rate"),
    (["--config.network.torso=transformer"], "network.torso"),
    (["--config.eval_mode=best"], "eval_mode"),
    (["--config.sebulba.async_envs=maybe"], "async_envs"),
    (["--config.algorithm=dqn"], "algorithm"),
    (["--config.learner_device_ids=(5,)"], "learner_device_ids"),
    (["--config.total_env_steps"], "--config.total_env_steps=VALUE"),
    (["--config.network.torso=nature_cnn"], "network.torso"),  # fits no vector observation
    (["--config.env_kwargs.max_episode_steps='abc'"], "max_episode_steps"),
    (["--config.env_kwargs.max_episode_steps=-5"], "max_episode_steps"),
    (["--config.seed=-1"], "config.seed"),
    (["--config.algo.rmsprop_decay=5.0"], "rmsprop_decay"),
    (["--config.algo.learning_rate=1e999"], "finite"),
    (["--config.sebulba.env_threads_per_actor=-3"], "env_threads_per_actor"),
    (["--config.warm_start=/nonexistent/run"], "warm_start"),
    (
        ["--config.sebulba.actor_max_restarts=-1"],
        "config.sebulba.actor_max_restarts=-1 must be >= 0",
    ),
    (
        ["--config.sebulba.actor_restart_window_s=0"],
        "config.sebulba.actor_restart_window_s=0.0 must be > 0",
    ),
    (["--config.sebulba.env_epoch_updates=0"], "config.sebulba.env_epoch_updates=0 must be > 0"),
    (["--config.eval_every_episodes=-5"], "config.eval_every_episodes=-5 must be >= 0"),
    (
        ["--config.eval_every_episodes=50"],  # the config's eval_every_updates=... stays set
        "and config.eval_every_updates=",
    ),
    (["--config.eval_envs=-1"], "config.eval_envs=-1 must be >= 0"),
    (["--config.eval_envs=64"], "config.eval_envs=64 is more than config.eval_episodes="),
    (["--config.max_updates_per_s=0"], "config.max_updates_per_s=0.0 must be a number > 0"),
    (["--config.max_updates_per_s=-2"], "config.max_updates_per_s=-2.0 must be a number > 0"),
    (["--config.max_updates_per_s=inf"], "max_updates_per_s"),
    (["--config.deterministic=true"], "actor_loop"),  # lockstep actors are Python loops
    (
        [
            "--config.sebulba.actor_loop=python",
            "--config.deterministic=true",
            "--config.sebulba.async_envs=true",
            "--config.batch_size=32",
        ],
        "config.sebulba.async_envs=True must be False when deterministic=True",
    ),  # lockstep needs synchronous pools (Sebulba's: Anakin's envs step together anyway)
    (["--config.replay.capacity=500"], "config.replay.capacity=500 is not used by"),
    (["--config.sebulba.inference.broadcast_period=4"], "is the inference server's"),
    (
        ["--config.sebulba.actor_loop=python", "--config.deterministic=true"],
        "--config.batch_size=32",
    ),
    (["--config.learner_device_ids=(0,0)"], "learner_device_ids"),
]


@pytest.mark.parametrize(("overrides", "needle"), BAD)
def test_bad_config_is_one_line_exit_2_nothing_written(tmp_path, capsys, overrides, needle):
    workdir = tmp_path / "run"
    code = main(["--config", CARTPOLE, "--workdir", str(workdir), *overrides])
    err = capsys.readouterr().err.strip()
    assert code == EXIT_CONFIG_ERROR
    assert len(err.splitlines()) == 1, err
    assert err.startswith("error: ") and needle in err, err
    assert not workdir.exists()


def test_ppo_minibatches_must_divide_the_batch(tmp_path, capsys):
    ppo = os.path.join(ROOT, "configs", "ppo_cartpole.py")
    code = main(
        ["--config", ppo, "--workdir", str(tmp_path / "r"), "--config.algo.num_minibatches=3"]
    )
    assert code == EXIT_CONFIG_ERROR and "num_minibatches" in capsys.readouterr().err
    assert not (tmp_path / "r").exists()


def test_missing_config_file(tmp_path, capsys):
    code = main(["--config", "configs/nope.py", "--workdir", str(tmp_path / "run")])
    assert code == EXIT_CONFIG_ERROR
    assert "no such file" in capsys.readouterr().err


BAD_FLAGS = [
    (["--no_such_flag"], "unrecognized arguments: --no_such_flag"),
    (["stray"], "unrecognized arguments: stray"),
    (["--num_processes", "two"], "argument --num_processes: invalid int value: 'two'"),
    (["--heartbeat_timeout_s"], "argument --heartbeat_timeout_s: expected one argument"),
]


@pytest.mark.parametrize(("flags", "needle"), BAD_FLAGS)
def test_bad_flag_is_one_line_exit_2_nothing_written(tmp_path, capsys, flags, needle):
    """train.py's own flags fail as evaluate.py's and plot.py's do: one `error:` line (not
    argparse's usage block), exit status 2, nothing written."""
    workdir = tmp_path / "run"
    code = main(["--config", CARTPOLE, "--workdir", str(workdir), *flags])
    captured = capsys.readouterr()
    err = captured.err.strip()
    assert code == EXIT_CONFIG_ERROR
    assert len(err.splitlines()) == 1, err
    assert err.startswith("error: ") and needle in err and "(see --help)" in err, err
    assert "usage:" not in err and captured.out == ""
    assert not workdir.exists()


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        ([], "--config, --workdir"),
        (["--config", CARTPOLE], "--workdir"),
        (["--config"], "--config"),
    ],
)
def test_missing_flag_is_one_line_exit_2(tmp_path, capsys, argv, needle, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code = main(argv)
    err = capsys.readouterr().err.strip()
    assert code == EXIT_CONFIG_ERROR
    assert len(err.splitlines()) == 1 and err.startswith("error: ") and needle in err, err
    assert not os.listdir(tmp_path)


def test_help_still_prints_the_full_help(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["--help"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: train.py") and "--heartbeat_timeout_s" in out
    assert "--workdir" in out and "multi-process" in out


def test_overrides_are_typed():
    config, args = parse_args(
        [
            "--config",
            f"{CARTPOLE}:quick",
            "--workdir",
            "w",
            "--config.algo.learning_rate=3e-4",
            "--config.batch_size=64",
            "--config.network.hidden_sizes=(32,32)",
            "--config.stop_at_eval_return=none",
            "--config.env_kwargs.max_episode_steps=200",
        ]
    )
    assert config.algo.learning_rate == 3e-4 and config.batch_size == 64
    assert config.network.hidden_sizes == (32, 32)
    assert config.stop_at_eval_return is None
    assert config.env_kwargs == {"max_episode_steps": 200}
    assert config.total_env_steps == 20_000  # from the :quick variant
    assert args.workdir == "w"


def test_script_exit_code_is_2(tmp_path):
    out = subprocess.run(
        [
            sys.executable,
            os.path.join(ROOT, "scripts", "train.py"),
            "--config",
            CARTPOLE,
            "--workdir",
            str(tmp_path / "run"),
            "--config.batch_size=-1",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 2
    assert out.stderr.strip().count("\n") == 0 and "batch_size" in out.stderr
    assert "Traceback" not in out.stderr and not (tmp_path / "run").exists()


def test_settings_that_do_not_fit_the_env_are_refused(tmp_path, capsys):
    atari = os.path.join(ROOT, "configs", "impala_atari.py")
    args = ["--config", f"{atari}:quick", "--workdir", str(tmp_path / "r")]
    assert main([*args, "--config.network.normalize_obs=true"]) == EXIT_CONFIG_ERROR
    assert "normalize_obs" in capsys.readouterr().err and not (tmp_path / "r").exists()


def test_tanh_squash_needs_finite_bounds():
    import numpy as np

    from jaxrl_dist.agents.common import make_policy_model
    from jaxrl_dist.envs import EnvSpec
    from jaxrl_dist.networks import NetworkConfig

    spec = EnvSpec((3,), np.dtype(np.float32), 0, 1, (-np.inf,), (np.inf,))
    with pytest.raises(ValueError, match="tanh_squash"):
        make_policy_model(NetworkConfig(torso="mlp", tanh_squash=True), spec)
    make_policy_model(NetworkConfig(torso="mlp"), spec)  # clipping copes with infinite bounds


def test_the_xla_loops_hint_on_the_atari_default_leads_to_a_valid_config(tmp_path):
    """impala_atari.py runs the XLA loop in two env groups: a setting that loop refuses names
    the Python loop *with one group*, and following the hint builds."""
    from jaxrl_dist.config.cli import parse_args
    from jaxrl_dist.config.errors import ConfigError

    args = ["--config", os.path.join(ROOT, "configs", "impala_atari.py"), "--workdir", "w"]
    with pytest.raises(ConfigError) as refused:
        parse_args([*args, "--config.sebulba.inference.client=server"])
    hint = str(refused.value)
    assert "actor_loop='python' with config.sebulba.env_groups_per_actor=1" in hint
    config, _ = parse_args(
        [*args, "--config.sebulba.inference.client=server", "--config.sebulba.actor_loop=python"]
        + ["--config.sebulba.env_groups_per_actor=1", "--config.sebulba.async_envs=True"]
    )
    assert (config.sebulba.actor_loop, config.sebulba.env_groups_per_actor) == ("python", 1)
