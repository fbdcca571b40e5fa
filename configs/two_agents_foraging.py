"""Two distinct learning agents on a simultaneous-move task: Jumanji's level-based foraging
(`ppo_foraging.py`: 2 agents on a grid, food they must pick up together when its level exceeds
one agent's, a reward shared by the team). Agent "a" plays each env's first agent and agent
"b" its second (`config.agent_slots`), each a PPO learner with its own network size, params,
optimizer and actors; in an agent's own actors the other plays its slot with its current
params (`docs/guides/several-agents.md`). A uniformly random legal policy scores about 0.05.
"""

import os

import ml_collections

from jaxrl_dist.config.cli import load_config_file

HERE = os.path.dirname(os.path.abspath(__file__))


def get_config(variant=None):
    ppo = load_config_file(
        os.path.join(HERE, "ppo_foraging.py") + (f":{variant}" if variant else "")
    )
    c = ml_collections.ConfigDict(
        {k: v for k, v in ppo.items() if k not in ("algorithm", "algo", "network", "batch_size")}
    )
    c.agents = (
        {"name": "a", "algorithm": "ppo", "algo": ppo["algo"], "network": ppo["network"]},
        {
            "name": "b",
            "algorithm": "ppo",
            "algo": ppo["algo"],
            "network": {**ppo["network"], "hidden_sizes": (64, 64)},
        },
    )
    c.sebulba.agent_slots = ("a", "b")
    c.batch_size = 16  # each agent's actors hold 32 streams: one of each env's two agents
    c.eval_mode = "greedy"
    if variant != "quick":
        c.total_env_steps = 2_000_000  # both agents' steps: about 1M each
    return c
