"""Two agents learning tic-tac-toe in one run (rbgame's decentralized trainer): a Rainbow
agent ("rb", the settings of `rainbow_tictactoe.py`) and a PPO agent ("ppo", those of
`ppo_tictactoe.py`), each with its own network, learner, data flow and opponent pool.

They meet each other in both seats, and each also plays the heuristic, uniform random and its
own pool. Each agent's actors play the games that name it; the other agent plays its seats there
with its current params and learns from its own actors' games (`docs/guides/several-agents.md`).
"""

import os

import ml_collections

from jaxrl_dist.config.cli import load_config_file

HERE = os.path.dirname(os.path.abspath(__file__))


def get_config(variant=None):
    suffix = f":{variant}" if variant else ""
    ppo = load_config_file(os.path.join(HERE, "ppo_tictactoe.py") + suffix)
    rb = load_config_file(os.path.join(HERE, "rainbow_tictactoe.py") + suffix)
    c = ml_collections.ConfigDict(
        {k: v for k, v in ppo.items() if k not in ("algorithm", "algo", "network", "batch_size")}
    )
    c.agents = (
        {
            "name": "rb",
            "algorithm": "rainbow",
            "algo": rb["algo"],
            "network": rb["network"],
            "replay": rb["replay"],
            "batch_size": rb["batch_size"],
        },
        {
            "name": "ppo",
            "algorithm": "ppo",
            "algo": ppo["algo"],
            "network": ppo["network"],
            "batch_size": ppo["batch_size"],
        },
    )
    c.seats = {
        **ppo["seats"],
        "games": (
            ("rb", "ppo"),
            ("ppo", "rb"),
            ("rb", "heuristic"),
            ("random", "rb"),
            ("ppo", "heuristic"),
            ("random", "ppo"),
            ("rb", "pool:rb"),
            ("ppo", "pool:ppo"),
        ),
    }
    c.sebulba.envs_per_actor = 32  # games per agent's actor (the games naming it, cycled)
    c.total_env_steps = 1_000_000  # both agents' moves: about 500k each
    c.eval_every_updates = 1_000  # updates of both agents (rb makes 8 in 9)
    c.log_every_updates = 100
    c.checkpoint_every_updates = 4_000
    if variant == "quick":
        c.total_env_steps = 12_000
        c.eval_every_updates = 0
        c.checkpoint_every_updates = 0
        c.log_every_updates = 10
    return c
