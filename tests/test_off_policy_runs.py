"""SAC, TD3 and DDPG through the trainer: quick runs on EnvPool Pendulum (Sebulba) and gymnax
Pendulum (Anakin), their checkpoints acting within the env's bounds, exact resumes with the
replay on both engines, a run-time temperature, bad inputs refused in one line, and the
SPS comparison with CleanRL (`benchmarks/cleanrl_sac.py`) on a stand-in script."""

import json
import os
import sys

import jax
import numpy as np
import pytest
from cli_refusal import assert_refused
from train_runs import ROOT, interrupted_run, train_main

from jaxrl_dist.agents.base import ActorIdentity, RunShape
from jaxrl_dist.agents.sac import SACConfig, make_sac
from jaxrl_dist.checkpoints.policy import load_policy
from jaxrl_dist.config.cli import load_config
from jaxrl_dist.envs import EnvSpec, brax_envs
from jaxrl_dist.networks import NetworkConfig
from jaxrl_dist.run.hooks import Hooks
from jaxrl_dist.run.trainer import Trainer

SAC = "configs/sac_pendulum.py:quick"
TD3 = "configs/td3_pendulum.py:quick"
DDPG = "configs/ddpg_pendulum.py:quick"
ANAKIN_SAC = "configs/anakin_sac_pendulum.py:quick"
BRAX_SAC = "configs/anakin_sac_brax.py:quick"
ANAKIN_TD3 = "configs/anakin_td3_pendulum.py"
PENDULUM = EnvSpec((3,), np.dtype(np.float32), 0, 1, (-2.0,), (2.0,))
# Two lockstep actors of 4 envs: a round is 2 x 4 x 8 = 64 transitions.
LOCKSTEP = {
    "deterministic": True,
    "sebulba.async_envs": False,
    "sebulba.num_actor_threads": 2,
    "sebulba.envs_per_actor": 4,
}


def _learned(workdir: str) -> list[dict]:
    lines = [json.loads(x) for x in open(os.path.join(workdir, "metrics.jsonl"))]
    return [x for x in lines if "losses/critic_loss" in x]


@pytest.fixture(scope="module")
def sac_lockstep(tmp_path_factory):
    workdir = str(tmp_path_factory.mktemp("sac") / "run")
    return workdir, Trainer(load_config(SAC, **LOCKSTEP), workdir, quiet=True).run().summary


def test_sac_learns_from_the_replay_and_its_policy_acts_within_the_bounds(sac_lockstep):
    """The replay fills to min_size 256 with uniform actions, then 2 updates a rollout (64
    transitions x 4 samples each / batch 64); the log has SAC's losses and temperature."""
    workdir, summary = sac_lockstep
    assert summary["updates"] > 20 and summary["stop_reason"] == "total_env_steps reached"
    learned = _learned(workdir)
    assert learned and all(np.isfinite(x["losses/critic_loss"]) for x in learned)
    assert 0 < learned[-1]["losses/alpha"] < 1  # learned down from 1.0 toward entropy -1
    policy = load_policy(workdir)
    from jaxrl_dist.envs import make_env

    env = make_env("Pendulum-v1", {}, 4, 4, seed=0)
    obs, _ = env.reset()
    action = np.asarray(policy.act(obs))
    assert action.shape == (4, 1) and np.all(np.abs(action) <= 2.0)


def test_a_deterministic_sac_run_resumed_ends_as_the_whole_run(sac_lockstep, tmp_path):
    """Stopped mid-run and resumed: the replay, the three optimizers, the temperature and the
    targets come back, and the run ends with the whole run's state."""
    cut = str(tmp_path / "cut")
    assert 0 < interrupted_run(load_config(SAC, **LOCKSTEP), cut, 512).updates
    resumed = Trainer(load_config(SAC, **LOCKSTEP), cut, resume=True, quiet=True).run().summary
    assert resumed["updates"] == sac_lockstep[1]["updates"]
    assert resumed["state_sha256"] == sac_lockstep[1]["state_sha256"]


@pytest.mark.parametrize(
    ("config", "flags"),
    [
        (TD3, ()),
        (DDPG, ()),
        (TD3, ("--config.sebulba.inference.client=server",)),
        ("configs/sac_mujoco.py:quick", ()),
        ("configs/td3_mujoco.py:quick", ()),
    ],
    ids=["td3", "ddpg", "td3-inference-server", "sac-mujoco", "td3-mujoco"],
)
def test_td3_and_ddpg_learn_and_act_within_the_bounds(config, flags, tmp_path):
    """Each on its own actors' params, TD3 acting through the central inference server (the
    exploration noise travels with the params it serves), and the MuJoCo configs' quick
    variants (2 minibatch steps per learner call)."""
    workdir = str(tmp_path / "run")
    summary = train_main(config, workdir, *flags)
    assert summary["updates"] > 20 and np.isfinite(summary["final_eval_return"])
    learned = _learned(workdir)
    assert learned and all(np.isfinite(x["losses/actor_loss"]) for x in learned)
    policy = load_policy(workdir)
    obs_size, bound = (17, 1.0) if "mujoco" in config else (3, 2.0)  # HalfCheetah: 6 joints
    action = np.asarray(policy.act(np.zeros((3, obs_size), np.float32)))
    assert action.shape[0] == 3 and np.all(np.abs(action) <= bound)


def test_a_fixed_temperature_changes_at_run_time(tmp_path):
    """With `autotune=False`, `alpha` is a run-time hyperparameter: a change (as `control.json`
    asks) is the temperature of the updates after it."""
    holder = []

    def lower(episodes, env_steps):
        if env_steps == 640:
            holder[0].set_hyperparams(alpha=0.05)

    fixed = {"algo.autotune": False, "algo.alpha": 0.2, "algo.alpha_learning_rate": 3e-4}
    config = load_config(SAC, **fixed)  # the config's temperature rate is unread then
    trainer = Trainer(config, str(tmp_path / "hp"), quiet=True, hooks=Hooks(on_iteration=lower))
    holder.append(trainer)
    trainer.run()
    alphas = [x["losses/alpha"] for x in _learned(str(tmp_path / "hp"))]
    assert alphas[0] == pytest.approx(0.2) and alphas[-1] == pytest.approx(0.05)


@pytest.fixture(scope="module")
def anakin_sac(tmp_path_factory):
    workdir = str(tmp_path_factory.mktemp("anakin_sac") / "run")
    return workdir, train_main(ANAKIN_SAC, workdir, "--config.checkpoint_every_updates=8")


def test_sac_on_anakin_updates_from_the_device_replay(anakin_sac):
    """32 rollouts of 32 steps; the replay holds min_size 256 with the 8th, so it and the 24
    after it are followed by 2 updates each (32 x 4 / 64)."""
    workdir, summary = anakin_sac
    assert summary["runtime"] == "anakin" and summary["updates"] == 32
    assert summary["learner_updates"] == 25 * 2
    learned = _learned(workdir)
    assert learned and all(np.isfinite(x["losses/critic_loss"]) for x in learned)


def test_sac_on_anakin_resumed_is_bit_identical(anakin_sac, tmp_path):
    cut = str(tmp_path / "cut")
    same = {"checkpoint_every_updates": 8}
    assert interrupted_run(load_config(ANAKIN_SAC, **same), cut, 12 * 32).updates == 12
    resumed = Trainer(load_config(ANAKIN_SAC, **same), cut, resume=True, quiet=True).run()
    assert resumed.summary["learner_updates"] == anakin_sac[1]["learner_updates"]
    assert resumed.summary["state_sha256"] == anakin_sac[1]["state_sha256"]


def test_td3_on_anakin_updates_from_the_device_replay(tmp_path):
    """TD3 in Anakin's program on gymnax Pendulum, SAC's layout: the same 25 x 2 updates from
    the device replay, finite losses (DDPG is TD3's config: its update is tested on a fixed
    batch, `test_continuous_losses.py`, and its runs on Sebulba)."""
    workdir = str(tmp_path / "run")
    summary = train_main(f"{ANAKIN_TD3}:quick", workdir)
    assert summary["runtime"] == "anakin" and summary["learner_updates"] == 25 * 2
    learned = _learned(workdir)
    assert learned and all(np.isfinite(x["losses/actor_loss"]) for x in learned)


def test_a_brax_env_steps_with_gymnax_api_and_its_time_limit():
    """`brax_envs.make`: Brax's `fast` env as gymnax's API: `[obs_size]` observations, a Box
    of actions in [-1, 1], the time limit a truncation at `max_episode_steps`, not a `done`."""
    env = brax_envs.make(env_name="fast", max_episode_steps=3)
    params = env.default_params
    assert env.action_space(params).shape == (1,) and env.action_space(params).high == 1.0
    obs, state = env.reset(jax.random.PRNGKey(0), params)
    assert obs.shape == env.observation_space(params).shape == (2,)
    truncated = []
    for _ in range(3):
        obs, state, reward, done, info = env.step(None, state, np.ones(1, np.float32), params)
        truncated.append(bool(info["truncated"]))
        assert not done and np.isfinite(reward)
    assert truncated == [False, False, True]


def test_sac_on_anakin_learns_on_a_brax_env(tmp_path):
    """`anakin_sac_brax.py:quick`: SAC's jitted program steps Brax's `fast` env through
    `jax:jaxrl_dist.envs.brax_envs:make`, updates from the device replay and evaluates."""
    workdir = str(tmp_path / "run")
    summary = train_main(BRAX_SAC, workdir, "--config.eval_every_updates=32")
    assert summary["runtime"] == "anakin" and summary["env_steps"] == 1_024
    assert summary["learner_updates"] == 25 * 2  # as on gymnax Pendulum: the same layout
    learned = _learned(workdir)
    assert learned and all(np.isfinite(x["losses/actor_loss"]) for x in learned)
    assert summary["evals"] and np.isfinite(summary["evals"][-1]["return"])


def test_a_users_head_builds_sacs_policy_mean_and_each_critic():
    """`network.head`: the user's module is the Gaussian's mean (role "policy", `(D,)`) and
    each critic's value (role "q", `()`), the critics' stacked `[E, ...]`; the agent acts."""
    network = NetworkConfig(hidden_sizes=(16,), activation="relu", head="user_networks:mlp_head")
    agent = make_sac(SACConfig(), network, PENDULUM, RunShape(100, 1.0))
    state = agent.learner.init(jax.random.PRNGKey(0))

    def paths(tree):
        flat = jax.tree_util.tree_flatten_with_path(tree)[0]
        return {"/".join(str(getattr(k, "key", k)) for k in p): x.shape for p, x in flat}

    critic = paths(state.critic_params)
    heads = {p: s for p, s in critic.items() if "/q_head/" in p}
    assert heads and all("MLPHead_0" in p and s[0] == 2 for p, s in heads.items())
    assert any("policy_head/mean/MLPHead_0" in p for p in paths(state.params))
    actor = agent.actor.init_state(ActorIdentity(0, 1), 2, jax.random.PRNGKey(1))
    action, _, _ = agent.actor.act(state.params, np.zeros((2, 3), np.float32), actor)
    assert action.shape == (2, 1)


@pytest.mark.parametrize(
    ("config", "overrides", "needle"),
    [
        (SAC, ["--config.env_id=CartPole-v1"], "sac needs continuous actions"),
        (SAC, ["--config.algo.target_tau=-0.1"], "config.algo.target_tau=-0.1 must be in (0, 1]"),
        (TD3, ["--config.algo.policy_delay=0"], "config.algo.policy_delay=0 must be >= 1"),
        (TD3, ["--config.algo.target_entropy=-1.0"], "target_entropy"),
        (SAC, ["--config.network.core=lstm"], "sac replays single transitions"),
        (SAC, ["--config.replay.n_step=3"], "sac's soft return over several steps"),
        (BRAX_SAC, ["--config.env_kwargs={'env_name': 'cheetah'}"], "not one of Brax's envs"),
    ],
    ids=[
        "discrete-env",
        "negative-polyak",
        "policy-delay-0",
        "td3-target-entropy",
        "core",
        "n-step",
        "brax-env-name",
    ],
)
def test_bad_inputs_are_refused_in_one_line(config, overrides, needle, tmp_path, capsys):
    assert_refused(config, overrides, needle, tmp_path, capsys)


FAKE_CLEANRL = """
import sys, time
steps = int([a for a in sys.argv if a.startswith("--total-timesteps=")][0].split("=")[1])
for step in range(5_100, steps, 100):  # as CleanRL: an SPS line every 100 learning steps
    time.sleep(0.02)
    print("SPS:", 1)
"""


def test_cleanrl_sac_times_cleanrls_sps_lines_and_refuses_bad_input(tmp_path):
    """CleanRL's side on a stand-in script that prints an `SPS:` line each 100 steps 20 ms
    apart: the rate is steps over the lines' arrival times (about 5,000 a second, not the
    printed 1); a missing checkout or no learning phase exits 2, writing nothing."""
    sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
    import cleanrl_sac

    (tmp_path / "cleanrl").mkdir()
    (tmp_path / "cleanrl" / "sac_continuous_action.py").write_text(FAKE_CLEANRL)
    out = tmp_path / "sac.json"
    argv = ["--only", "cleanrl", "--cleanrl-dir", str(tmp_path), "--out", str(out)]
    assert cleanrl_sac.main([*argv, "--env-steps", "7100", "--allow-dirty"]) == 0
    side = json.loads(out.read_text())["cleanrl"]
    assert side["measured_steps"] == [5_100, 7_000]
    assert 1_000 < side["learning_sps"] < 5_100  # sleeps of 20 ms and more between lines
    out.unlink()
    assert cleanrl_sac.main([*argv, "--env-steps", "5500", "--allow-dirty"]) == 2
    bad = ["--only", "cleanrl", "--cleanrl-dir", str(tmp_path / "no"), "--out", str(out)]
    assert cleanrl_sac.main([*bad, "--allow-dirty"]) == 2
    assert not out.exists()
