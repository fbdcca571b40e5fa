"""Continuous actions: PPO learns Pendulum; IMPALA and PPO run on MuJoCo; obs statistics persist."""

import os

import numpy as np
import pytest

from jaxrl_dist.checkpoints.store import restore_params
from jaxrl_dist.config.cli import parse_args
from jaxrl_dist.run.trainer import Trainer

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PENDULUM = os.path.join(ROOT, "configs", "ppo_pendulum.py")
MUJOCO = os.path.join(ROOT, "configs", "ppo_mujoco.py")
IMPALA_CARTPOLE = os.path.join(ROOT, "configs", "impala_cartpole.py")
RANDOM_PENDULUM_RETURN = -1251.7  # uniform random actions, 100 episodes (README)


def _run(tmp_path, *args):
    config, _ = parse_args([*args, "--workdir", "unused"])
    return Trainer(config, str(tmp_path / "run"), quiet=True).run().summary, config


def test_ppo_learns_pendulum(tmp_path):
    """The config's hyperparameters (1,024 transitions an update, 200k steps), stopping once a
    greedy evaluation reaches -300, in deterministic mode (16 envs, lockstep) so the result does
    not hang on thread timing: seed 1 reaches -199 at 81,920 steps, quiet or beside a busy core.
    The asynchronous pipeline's learning is measured over seeds by `benchmarks/learning.py` (5
    of 5 clear, quiet and under `--load 1`; README, "Learning results")."""
    summary, _ = _run(
        tmp_path,
        "--config",
        PENDULUM,
        "--config.stop_at_eval_return=-300",
        "--config.seed=1",
        "--config.deterministic=true",
        "--config.sebulba.async_envs=false",
        "--config.sebulba.envs_per_actor=16",
    )
    assert summary["env_steps_to_target"] is not None, summary["evals"]
    assert summary["best_eval_return"] >= -300 > RANDOM_PENDULUM_RETURN + 900, summary["evals"]


def test_observation_statistics_are_learned_and_checkpointed(tmp_path):
    summary, config = _run(tmp_path, "--config", f"{PENDULUM}:quick")
    stats = restore_params(str(tmp_path / "run"))["obs_norm"]
    seen = summary["updates"] * config.batch_size * config.unroll_length
    np.testing.assert_allclose(stats["count"], seen + 1e-4, rtol=1e-6)
    assert np.all(np.asarray(stats["var"]) > 0) and not np.allclose(stats["var"], 1.0)


@pytest.mark.parametrize("algorithm", ["ppo", "impala"])
def test_mujoco_halfcheetah_runs(tmp_path, algorithm):
    if algorithm == "ppo":
        summary, _ = _run(tmp_path, "--config", f"{MUJOCO}:quick")
    else:  # IMPALA with a Gaussian policy, on the same MuJoCo task
        summary, _ = _run(
            tmp_path,
            "--config",
            f"{IMPALA_CARTPOLE}:quick",
            "--config.env_id=HalfCheetah-v5",
            "--config.total_env_steps=2_000",
            "--config.network.tanh_squash=true",
            "--config.network.normalize_obs=true",
            "--config.env_kwargs.max_episode_steps=100",
            "--config.sebulba.actor_loop=python",
            "--config.sebulba.async_envs=true",  # float64 MuJoCo
        )
    assert summary["updates"] > 0 and np.isfinite(summary["final_eval_return"])


@pytest.mark.parametrize("state_dependent", [False, True])
def test_gaussian_log_std_is_shared_or_state_dependent(state_dependent):
    import jax

    from jaxrl_dist.agents.common import make_policy_model
    from jaxrl_dist.envs import env_spec
    from jaxrl_dist.networks import NetworkConfig

    net = NetworkConfig(torso="mlp", state_dependent_std=state_dependent, log_std_init=-0.5)
    model = make_policy_model(net, env_spec("Pendulum-v1", {}))
    params = model.init(jax.random.PRNGKey(0))
    obs = np.random.default_rng(0).normal(size=(5, 3)).astype(np.float32)
    log_std = np.asarray(model.apply(params, obs)[0]["log_std"])
    assert log_std.shape == (5, 1)
    np.testing.assert_allclose(log_std.mean(), -0.5, atol=0.1)
    assert (np.ptp(log_std) > 1e-6) == state_dependent
