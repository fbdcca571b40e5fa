"""JaxMARL's multi-agent envs on Anakin (issue 57): a stream per (env, agent) whose observation
is JaxMARL's for that agent with its one-hot id after it, whose reward is the agent's (or the
team's), with EnvPool's final-observation-then-reset step; the available-actions mask; IPPO
through scripts/train.py (`configs/anakin_ippo_mpe_spread.py:quick`), resumed bit-identical;
one-line refusals."""

import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from cli_refusal import assert_refused
from train_runs import interrupted_run, train_main

from jaxrl_dist.config.cli import load_config
from jaxrl_dist.envs.jax_marl import JaxMarlStreams
from jaxrl_dist.run.trainer import Trainer
from jaxrl_dist.types import ACTION_MASK, AGENT_VIEW

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SPREAD = "jaxmarl:MPE_simple_spread_v3"  # 3 agents, episodes of 25 steps
QUICK = "configs/anakin_ippo_mpe_spread.py:quick"


def _jaxmarl_step(env: JaxMarlStreams, state, e: int, actions):
    """JaxMARL's own `step_env` of env `e` of `state`, with the key the adapter splits for it."""
    _, step_key, _ = jax.random.split(state.key[e], 3)
    inner = jax.tree.map(lambda x: x[e], state.inner)
    chosen = {a: actions[i] for i, a in enumerate(env.agents)}
    return env._env.step_env(step_key, inner, chosen)


def test_each_stream_is_an_agent_with_its_id_reward_and_the_envs_end():
    env = JaxMarlStreams(SPREAD, {})
    n = env.num_agents
    assert (n, env.spec.obs_shape, env.spec.num_actions, env.spec.num_agents) == (3, (21,), 5, 3)
    state, ts = jax.jit(env.reset)(jax.random.split(jax.random.PRNGKey(0), 2 * n))
    step = jax.jit(env.step)
    view = np.asarray(ts.obs[AGENT_VIEW])
    np.testing.assert_array_equal(view[:, -n:], np.tile(np.eye(n), (2, 1)))  # the agent's id
    assert np.asarray(ts.obs[ACTION_MASK]).all() and not np.asarray(ts.reward).any()
    rng = np.random.default_rng(0)
    ended_at = None  # MPE's time limit: JaxMARL ends an episode after its 25th step's count
    for t in range(1, 30):
        actions = jnp.asarray(rng.integers(0, 5, 2 * n), jnp.int32)
        before = state
        state, ts = step(state, actions)
        if ended_at is not None and t == ended_at + 1:  # the reset step: a new episode
            assert not np.asarray(ts.reward).any() and not np.asarray(ts.terminated).any()
            continue
        for e in range(2):  # JaxMARL's transition, row by row: the agent's observation, reward
            obs, _, rewards, dones, _ = _jaxmarl_step(env, before, e, actions[e * n : e * n + n])
            for i, a in enumerate(env.agents):
                row = e * n + i
                np.testing.assert_allclose(ts.obs[AGENT_VIEW][row, :-n], obs[a], rtol=1e-6)
                assert float(ts.reward[row]) == pytest.approx(float(rewards[a]))
            assert bool(ts.terminated[e * n]) == bool(dones["__all__"])
        if np.asarray(ts.terminated).all():
            ended_at = t
        np.testing.assert_array_equal(state.needs_reset, np.asarray(ts.terminated))
    assert ended_at in (25, 26)  # every env, every agent's row, at its time limit
    assert not np.asarray(ts.truncated).any()


def test_team_reward_gives_every_agent_the_sum():
    env, team = JaxMarlStreams(SPREAD, {}), JaxMarlStreams(SPREAD, {"team_reward": True})
    keys = jax.random.split(jax.random.PRNGKey(1), 3)
    actions = jnp.array([0, 1, 4], jnp.int32)
    _, own = env.step(env.reset(keys)[0], actions)
    _, shared = team.step(team.reset(keys)[0], actions)
    np.testing.assert_allclose(shared.reward, np.full(3, float(np.sum(own.reward))), rtol=1e-6)


def test_the_available_actions_mask_is_the_envs():
    """SMAX (5 allies against a heuristic enemy) says which actions each agent may take."""
    env = JaxMarlStreams("jaxmarl:HeuristicEnemySMAX", {})
    state, ts = jax.jit(env.reset)(jax.random.split(jax.random.PRNGKey(2), env.num_agents))
    inner = jax.tree.map(lambda x: x[0], state.inner)
    avail = env._env.get_avail_actions(inner)
    want = np.stack([np.asarray(avail[a], bool) for a in env.agents])
    np.testing.assert_array_equal(ts.obs[ACTION_MASK], want)
    assert not want.all()  # some action is unavailable: the mask says something


@pytest.fixture(scope="module")
def ippo_run(tmp_path_factory):
    workdir = str(tmp_path_factory.mktemp("ippo") / "run")
    return workdir, train_main(QUICK, workdir, "--config.checkpoint_every_updates=2")


def test_ippo_trains_evaluates_and_resumes_bit_identical(ippo_run, tmp_path):
    _, summary = ippo_run
    assert summary["runtime"] == "anakin" and summary["updates"] == 4
    assert summary["env_steps"] == 4 * 48 * 128 and np.isfinite(summary["final_eval_return"])
    config = load_config(QUICK, checkpoint_every_updates=2)
    cut = interrupted_run(config, str(tmp_path / "cut"), 2 * 48 * 128)
    assert cut.updates < 4
    resumed = Trainer(config, str(tmp_path / "cut"), resume=True, quiet=True).run()
    assert resumed.summary["state_sha256"] == summary["state_sha256"]


@pytest.mark.parametrize(
    "flags, needle",
    [
        (["--config.batch_size=50"], "is not a whole number of"),
        (["--config.env_id=jaxmarl:No_such_env"], "jaxmarl.make failed"),
        (["--config.env_id=jaxmarl:MPE_simple_tag_v3"], "one policy shared by every agent"),
    ],
)
def test_refusals_are_one_line(tmp_path, capsys, flags, needle):
    assert_refused(QUICK, flags, needle, tmp_path, capsys)


FAKE_IPPO = """
import hydra  # stubbed by the driver where it is not installed
import jax.numpy as jnp
import wandb


def make_train(config):
    updates = config["TOTAL_TIMESTEPS"] // config["NUM_STEPS"] // config["NUM_ENVS"]

    def train(rng):
        wandb.log({})  # the driver's no-op, as JaxMARL's io_callback would call it
        ramp = jnp.linspace(-90.0, -60.0, updates) + rng[0] * 0
        return {"metrics": {"returned_episode_returns": ramp}}

    return train
"""


def test_the_side_by_side_driver_runs_jaxmarls_script_and_compares_returns(tmp_path):
    """`benchmarks/jaxmarl_ippo.py` on a stand-in of JaxMARL's script (its `make_train`, its yaml
    beside it with PyYAML's string `1e7`): seeds vmapped, steps per second, the return of the
    last tenth of the updates in both units; `--compare-returns` beside a sweep's curves; a
    missing script refused with exit 2."""
    import json
    import sys

    sys.path.insert(0, f"{ROOT}/benchmarks")
    import jaxmarl_ippo

    (tmp_path / "config").mkdir()
    (tmp_path / "ippo_ff_mpe.py").write_text(FAKE_IPPO)
    yaml = '"TOTAL_TIMESTEPS": 1e4\n"NUM_ENVS": 2\n"NUM_STEPS": 50\n"SEED": 30\n"NUM_SEEDS": 10\n'
    (tmp_path / "config" / "ippo_ff_mpe.yaml").write_text(yaml)
    side = jaxmarl_ippo.run_jaxmarl(str(tmp_path / "ippo_ff_mpe.py"), seeds=2, env_steps=None)
    assert side["env_steps_per_seed"] == 100 * 100 and side["env_sps"] > 0
    last = side["training_return_jaxmarl_units"]  # the mean of the ramp's last 10 of 100
    assert len(last) == 2 and last[0] == pytest.approx(-61.36, abs=0.01)
    assert side["training_return_per_agent"][0] == pytest.approx(last[0] / 3, abs=1e-3)
    (tmp_path / "side.json").write_text(json.dumps({"jaxmarl": side}))
    curve = [[i, -30.0 + i] for i in range(10)]
    sweep = {"per_seed": [{"train_curve": curve}, {"train_curve": curve}]}
    (tmp_path / "sweep.json").write_text(json.dumps(sweep))
    out = tmp_path / "compare.json"
    argv = ["--compare-returns", str(tmp_path / "sweep.json"), str(tmp_path / "side.json")]
    assert jaxmarl_ippo.main([*argv, "--out", str(out)]) == 0
    compared = json.loads(out.read_text())
    assert compared["ours"]["per_agent"] == [-21.0, -21.0]
    assert compared["ours"]["mean_jaxmarl_units"] == -63.0
    assert compared["pairs_ours_ahead"] == "0 of 4"  # -21 against -20.45 a seed
    missing = jaxmarl_ippo.main(["--script", str(tmp_path / "nope.py"), "--out", str(out)])
    assert missing == 2
