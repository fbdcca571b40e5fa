"""Simultaneous-move multi-agent tasks: one stream per (env, agent) with the agent's id in its
observation (`envs/agents.py`), shared or per-agent rewards, and `configs/ppo_foraging.py:quick`
through the trainer, evaluation (`[episodes, agents]` returns) and `load_policy`."""

import json
import os

import numpy as np
import pytest
from train_runs import interrupted_run

from jaxrl_dist.checkpoints.policy import load_policy
from jaxrl_dist.config import ConfigError
from jaxrl_dist.config.cli import load_config
from jaxrl_dist.envs import env_spec, make_env
from jaxrl_dist.envs.agents import AgentStreams, agent_rewards, agent_rows
from jaxrl_dist.envs.games import random_legal
from jaxrl_dist.run.trainer import Trainer
from jaxrl_dist.types import ACTION_MASK, AGENT_VIEW

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONFIG = os.path.join(ROOT, "configs", "ppo_foraging.py")
LBF = "Jumanji/LevelBasedForaging-v0"


def test_rows_carry_the_agent_id_and_its_mask():
    view = np.arange(2 * 3 * 4).reshape(2, 3, 4)
    mask = np.zeros((2, 3, 5), bool)
    mask[1, 2, 4] = True
    rows = agent_rows({"agents_view": view, "action_mask": mask})
    assert rows[AGENT_VIEW].shape == (6, 7) and rows[AGENT_VIEW].dtype == np.float32
    np.testing.assert_array_equal(rows[AGENT_VIEW][5], [20, 21, 22, 23, 0, 0, 1])  # env 1, agent 2
    np.testing.assert_array_equal(rows[AGENT_VIEW][1, 4:], [0, 1, 0])
    assert rows[ACTION_MASK][5, 4] and rows[ACTION_MASK].sum() == 1


def test_shared_per_agent_and_team_rewards():
    np.testing.assert_array_equal(agent_rewards(np.array([1.0, 2.0]), 2, False), [[1, 1], [2, 2]])
    own = np.array([[1.0, 0.0], [0.5, 2.0]])
    np.testing.assert_array_equal(agent_rewards(own, 2, False), own)
    np.testing.assert_array_equal(agent_rewards(own, 2, True), [[1, 1], [2.5, 2.5]])


class _PerAgentPool:
    """A fake async pool: 4 envs of 2 agents, per-agent rewards `[env, agent]` = the env's last
    actions, episodes of 3 steps; records what it was sent."""

    config = {"num_envs": 4}

    def __init__(self):
        self.sent, self._steps, self._last = [], np.zeros(4, int), np.zeros((4, 2))
        self._ready = [0, 1]

    def async_reset(self):
        pass

    def recv(self):
        ids = np.array(self._ready)
        ends = self._steps[ids] % 3 == 0
        obs = {"agents_view": np.zeros((2, 2, 1)), "action_mask": np.ones((2, 2, 3), bool)}
        info = {"env_id": ids, "elapsed_step": self._steps[ids] % 3}
        return obs, self._last[ids], ends & (self._steps[ids] > 0), np.zeros(2, bool), info

    def send(self, action, env_id):
        self.sent.append((action.copy(), env_id.copy()))
        self._last[env_id] = action
        self._steps[env_id] += 1
        self._ready = [2, 3] if env_id[0] == 0 else [0, 1]


def test_streams_send_each_env_its_agents_actions_and_deliver_own_rewards():
    pool = _PerAgentPool()
    env = AgentStreams(pool, 2)
    assert env.config["num_envs"] == 8
    _, _, _, _, info = env.recv()
    np.testing.assert_array_equal(info["env_id"], [0, 1, 2, 3])  # env 0 agents, env 1 agents
    np.testing.assert_array_equal(info["agent"], [0, 1, 0, 1])
    env.send(np.array([2, 1, 0, 2]), np.array([3, 2, 1, 0]))  # any order
    action, ids = pool.sent[-1]
    np.testing.assert_array_equal(ids, [0, 1])
    np.testing.assert_array_equal(action, [[2, 0], [1, 2]])
    env.recv()
    env.send(np.zeros(4, int), np.array([4, 5, 6, 7]))
    _, reward, _, _, info = env.recv()  # envs 0 and 1 again: their own agents' rewards
    np.testing.assert_array_equal(reward, [2, 0, 1, 2])
    with pytest.raises(ValueError, match="must answer every agent of each env"):
        env.send(np.zeros(3, int), np.array([0, 1, 2]))
    team = AgentStreams(_PerAgentPool(), 2, team_reward=True)
    team.recv()
    team.send(np.array([2, 1, 0, 2]), np.array([0, 1, 2, 3]))
    team.recv()
    team.send(np.zeros(4, int), np.array([4, 5, 6, 7]))
    np.testing.assert_array_equal(team.recv()[1], [3, 3, 2, 2])


def test_real_foraging_streams_episode_ends_and_legal_moves():
    spec = env_spec(LBF, {})
    assert spec.num_agents == 2 and spec.obs_shape == (14,) and spec.num_actions == 6
    env = AgentStreams(make_env(LBF, {}, 4, 2, seed=0), 2)
    env.async_reset()
    choose = random_legal(np.random.default_rng(0)).choose
    ends = 0
    for _ in range(500):
        obs, reward, terminated, truncated, info = env.recv()
        assert len(info["env_id"]) == 4 and obs[AGENT_VIEW].shape == (4, 14)
        done = terminated | truncated
        np.testing.assert_array_equal(done[0::2], done[1::2])  # an env's agents end together
        np.testing.assert_array_equal(reward[0::2], reward[1::2])  # a shared reward
        ends += done.sum()
        env.send(choose(None, obs[ACTION_MASK]), info["env_id"])
    env.close()
    assert ends >= 2 * 4  # 100-step episodes: every env finished at least one


# Deterministic mode (issue 57, item 3): lockstep actors act for every agent's stream of their
# sync pools; an update takes one unroll of each of the actor's 64 streams (32 envs x 2).
DETERMINISTIC = {"deterministic": True, "sebulba.async_envs": False, "batch_size": 64}


def _config(**overrides):
    return load_config(CONFIG + ":quick", **{**DETERMINISTIC, **overrides})


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    workdir = str(tmp_path_factory.mktemp("foraging") / "run")
    return workdir, Trainer(_config(), workdir, quiet=True).run().summary


def test_foraging_quick_trains_and_evaluates_every_agent(run):
    workdir, summary = run
    assert summary["stop_reason"] == "total_env_steps reached"
    with open(os.path.join(workdir, "metrics.jsonl")) as f:
        records = [json.loads(line) for line in f]
    assert any("losses/loss" in r for r in records)
    final = summary["evals"][-1]
    assert 0.0 <= final["return"] <= 1.0
    policy = load_policy(workdir)
    assert policy.spec.num_agents == 2
    mask = np.zeros((16, 6), bool)
    mask[:, 0] = mask[np.arange(16), np.arange(16) % 6] = True
    action = policy.act({AGENT_VIEW: np.zeros((16, 14), np.float32), ACTION_MASK: mask})
    assert mask[np.arange(16), action].all()


def test_a_wrong_agent_count_is_refused(tmp_path):
    with pytest.raises(
        ConfigError, match="has 2 agent\\(s\\) per env; set config.sebulba.agents_per_env=2"
    ):
        Trainer(
            load_config(CONFIG + ":quick", **{"sebulba.agents_per_env": 1}), str(tmp_path / "run")
        )
    assert not os.path.exists(tmp_path / "run")


def test_a_deterministic_run_stopped_and_resumed_ends_as_the_whole_run(run, tmp_path):
    """Stopped after its second update and resumed: the resume replays every stream's actions
    of the env epoch into new sync pools and ends with the whole run's params."""
    cut = str(tmp_path / "cut")
    assert interrupted_run(_config(), cut, 2 * 2048).updates == 2
    resumed = Trainer(_config(), cut, resume=True, quiet=True).run().summary
    assert resumed["updates"] == run[1]["updates"] == 4
    assert resumed["params_sha256"] == run[1]["params_sha256"]
