"""Several learning agents with continuous actions in one run: a SAC agent and a TD3 agent
steering in a simultaneous-move PettingZoo env of the tests' own (`own_envs.Steer`, a Box of
actions per agent), each with its own replay, learner and actors; the other plays its slot
with its current params (`config.sebulba.agent_slots`)."""

import json
import os

import numpy as np
from own_envs import STEER_ID
from train_runs import ROOT, train_main

from jaxrl_dist.envs.agents import AgentStreams
from jaxrl_dist.envs.seats import LEARNER

TWO_STEERING = """
import ml_collections
from jaxrl_dist.config.cli import load_config_file

def get_config(variant=None):
    sac = load_config_file({sac!r} + ":quick")
    td3 = load_config_file({td3!r} + ":quick")
    shared = ("algorithm", "algo", "network", "batch_size", "replay")
    c = ml_collections.ConfigDict({{k: v for k, v in sac.items() if k not in shared}})
    c.env_id = {env!r}
    c.agents = tuple(
        {{"name": name, "algorithm": cfg["algorithm"], "algo": cfg["algo"],
          "network": cfg["network"], "replay": cfg["replay"], "batch_size": cfg["batch_size"]}}
        for name, cfg in (("sac", sac), ("td3", td3))
    )
    c.sebulba.agent_slots = ("sac", "td3")
    c.sebulba.agents_per_env = 2
    c.sebulba.envs_per_actor = 8
    for agent in c.agents:  # a gradient step of 64 per 2 env steps: fast enough to learn here
        agent["replay"] = {{**agent["replay"], "samples_per_insert": 32.0}}
    c.total_env_steps = 8_000  # both agents' steps
    c.eval_every_updates = 0
    c.eval_episodes = 20
    c.learning_curve = False
    return c
"""


def test_a_sac_and_a_td3_agent_learn_to_steer_in_one_game(tmp_path):
    """Each agent's greedy return beats uniform actions' 3.3 (of 5) by far: each learned its
    own continuous policy from its own replay while the other acted in its slot."""
    config = tmp_path / "two_steering.py"
    config.write_text(
        TWO_STEERING.format(
            sac=os.path.join(ROOT, "configs", "sac_pendulum.py"),
            td3=os.path.join(ROOT, "configs", "td3_pendulum.py"),
            env=STEER_ID,
        )
    )
    workdir = str(tmp_path / "run")
    summary = train_main(str(config), workdir)
    agents = summary["agents"]
    assert set(agents) == {"sac", "td3"}
    last = summary["evals"][-1]
    assert last["sac/return"] > 4.3 and last["td3/return"] > 4.3, json.dumps(last)
    assert all(agents[name]["updates"] > 1_000 for name in ("sac", "td3")), agents


class _SteeringPool:
    """A fake async pool of 2 envs of 2 agents with continuous actions `[D=2]`: masks of width
    0 (a PettingZoo Parallel env's Box); records what it was sent."""

    config = {"num_envs": 2}

    def __init__(self):
        self.sent = []

    def async_reset(self):
        pass

    def recv(self):
        obs = {"agents_view": np.zeros((2, 2, 3)), "action_mask": np.ones((2, 2, 0), bool)}
        info = {"env_id": np.array([0, 1]), "elapsed_step": np.zeros(2, int)}
        return obs, np.zeros((2, 2)), np.zeros(2, bool), np.zeros(2, bool), info

    def send(self, action, env_id):
        self.sent.append((action.copy(), env_id.copy()))


class _ConstantPlayer:
    def act(self, view, mask, games):
        assert mask.shape == (len(games), 0)
        return np.full((len(games), 2), 0.25, np.float32)

    def end_game(self, game, seat_return):
        pass


def test_streams_pass_continuous_moves_of_the_learner_and_the_other_slot_unrounded():
    """Slot 0 the learner's, slot 1 a player's: the pool gets `[envs, agents, D]` float32, the
    learner's actions and the player's 0.25s as they were (not cast to move indices)."""
    pool = _SteeringPool()
    env = AgentStreams(pool, 2, slots=(LEARNER, "other"), players={"other": _ConstantPlayer()})
    env.recv()
    env.send(np.array([[0.5, -0.5], [-0.75, 0.1]], np.float32), np.array([0, 1]))
    action, ids = pool.sent[-1]
    assert action.dtype == np.float32 and action.shape == (2, 2, 2)
    np.testing.assert_array_equal(ids, [0, 1])
    np.testing.assert_allclose(action[:, 0], [[0.5, -0.5], [-0.75, 0.1]])
    np.testing.assert_allclose(action[:, 1], 0.25)


def test_one_gaussian_ppo_policy_shared_by_agents_with_continuous_actions(tmp_path):
    """`agents_per_env=2` on the steering env: one PPO policy for both agents, its Gaussian
    left unmasked by the rows' width-0 action mask; it updates and evaluates both agents."""
    summary = train_main(
        "configs/ppo_pendulum.py:quick",
        str(tmp_path / "run"),
        f"--config.env_id={STEER_ID}",
        "--config.sebulba.agents_per_env=2",
        "--config.eval_every_updates=2",
    )
    assert summary["updates"] >= 2 and np.isfinite(summary["evals"][-1]["return"])
