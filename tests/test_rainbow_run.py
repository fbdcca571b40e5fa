"""Rainbow through the real trainer: a quick CartPole run (shared by the tests that read it),
its policy from the checkpoint, run-time hyperparameters, and bad input refused up front."""

import json
import os
import time

import numpy as np
import pytest
from cli_refusal import assert_refused

from jaxrl_dist.checkpoints.policy import load_policy
from jaxrl_dist.config.cli import load_config
from jaxrl_dist.run.hparams import HyperparamError
from jaxrl_dist.run.trainer import Trainer
from jaxrl_dist.tools import evaluate_cli

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONFIG = os.path.join(ROOT, "configs", "rainbow_cartpole.py")


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """4,000 env steps of rainbow_cartpole:quick, a checkpoint at the end."""
    workdir = str(tmp_path_factory.mktemp("rainbow") / "run")
    config = load_config(CONFIG + ":quick", checkpoint_every_updates=100)
    started = time.monotonic()
    trainer = Trainer(config, workdir, quiet=True)
    with pytest.raises(HyperparamError, match=r"config.replay.n_step >= 4"):
        trainer.set_hyperparams(n_step=4)  # longer than the windows the replay cuts
    with pytest.raises(HyperparamError, match="epsilon"):
        trainer.set_hyperparams(epsilon=1.5)
    trainer.set_hyperparams(n_step=2)
    result = trainer.run()
    elapsed_s = time.monotonic() - started  # the Trainer's whole life, start-up included
    with open(os.path.join(workdir, "metrics.jsonl")) as f:
        logs = [json.loads(line) for line in f]
    return workdir, result, logs, elapsed_s


def test_the_run_updates_from_prioritized_windows_and_returns_priorities(run):
    _, result, logs, _ = run
    assert result.summary["stop_reason"] == "total_env_steps reached"
    losses = [x for x in logs if "losses/importance_weight_mean" in x]
    assert losses and all(np.isfinite(x["losses/loss"]) for x in losses)
    # Equal priorities give every weight 1; below 1 only once TD errors came back as priorities.
    assert min(x["losses/importance_weight_mean"] for x in losses) < 0.95
    assert {x["losses/return_steps_mean"] <= 2.0 for x in losses} == {True}  # n set to 2
    assert all(x["losses/epsilon"] == 0.0 for x in losses)  # noisy nets: no epsilon


def test_the_run_logs_its_start_up_and_compiling(run):
    """`startup_s` (to the first step's end) and this process's compiling since the run began,
    in the summary and, growing, in every log line (jaxrl_dist/compilation.py)."""
    _, result, logs, elapsed_s = run
    summary = result.summary
    compiled = summary["compile"]
    assert 0 < summary["startup_s"] < elapsed_s  # from the Trainer's start to its first step
    assert compiled["cache_dir"] == os.environ["JAX_COMPILATION_CACHE_DIR"]  # JAX's own wins
    assert compiled["compiles"] >= 1 and compiled["backend_s"] > 0 and compiled["trace_s"] > 0
    logged = [x["compile/compiles"] for x in logs if "compile/compiles" in x]
    assert logged and logged == sorted(logged) and logged[-1] <= compiled["compiles"]


def test_its_checkpoint_acts_through_load_policy_and_evaluate(run, tmp_path):
    workdir, _, _, _ = run
    policy = load_policy(workdir)
    obs = np.random.default_rng(0).normal(size=(4, 4)).astype(np.float32)
    actions = policy.act(obs)
    assert actions.shape == (4,) and set(actions.tolist()) <= {0, 1}
    np.testing.assert_array_equal(actions, policy.act(obs))  # greedy: the noise-free net
    assert float(policy.params["epsilon"]) == 0.0
    out = str(tmp_path / "eval.json")
    assert evaluate_cli.main([workdir, "--episodes", "2", "--json", out]) == 0
    with open(out) as f:
        assert json.load(f)["episodes"] == 2


BAD = [
    (["--config.algo.v_min=10", "--config.algo.v_max=10"], "config.algo.v_min=10.0 must be below"),
    (["--config.replay.n_step=16"], "n_step=16 is not shorter than config.unroll_length=16"),
    (["--config.replay.capacity=100", "--config.replay.min_size=50"], "capacity=100 is smaller"),
    (["--config.replay.min_size=60000"], "config.replay.min_size=60000 must be in"),
    (["--config.replay.priority_exponent=1.5"], "config.replay.priority_exponent=1.5"),
    (["--config.algo.importance_exponent=-0.1"], "config.algo.importance_exponent=-0.1"),
    (["--config.algo.n_step=5"], "config.algo.n_step=5 is longer than the replay's windows"),
    (["--config.algo.num_atoms=2"], "config.algo.num_atoms=2"),
    (["--config.algo.epsilon=1.2"], "config.algo.epsilon=1.2"),
    (["--config.algo.target_period=0"], "config.algo.target_period=0"),
    (["--config.network.normalize_obs=true"], "normalize_obs=True is not supported by rainbow"),
    (["--config.env_id=Pendulum-v1"], "rainbow needs discrete actions"),
]


@pytest.mark.parametrize(("overrides", "needle"), BAD)
def test_bad_input_is_one_line_exit_2_nothing_written(tmp_path, capsys, overrides, needle):
    assert_refused(CONFIG + ":quick", overrides, needle, tmp_path, capsys)


@pytest.mark.optimised  # its time is in its updates (xla_level.py)
def test_atari_quick_runs_and_saves_no_frames_replay(tmp_path):
    workdir = str(tmp_path / "atari")
    config = load_config(os.path.join(ROOT, "configs", "rainbow_atari.py") + ":quick")
    result = Trainer(config, workdir, quiet=True).run()
    assert result.summary["stop_reason"] == "total_env_steps reached" and result.updates > 50
    step = result.summary["latest_checkpoint_step"]
    # Image frames: config.replay.save is automatic and off (a full buffer is GBs).
    assert not os.path.exists(os.path.join(workdir, "checkpoints", str(step), "data"))
    assert os.path.exists(os.path.join(workdir, "checkpoints", str(step), "packed"))


@pytest.mark.optimised  # its time is in its updates (xla_level.py)
def test_lunarlander_quick_runs(tmp_path):
    """The docs' LunarLander config (Box2D observations, 4 actions), at its smoke size."""
    config = load_config(os.path.join(ROOT, "configs", "rainbow_lunarlander.py") + ":quick")
    result = Trainer(config, str(tmp_path / "ll"), quiet=True).run()
    assert result.summary["stop_reason"] == "total_env_steps reached" and result.updates > 0
    assert result.final_eval_return is not None
