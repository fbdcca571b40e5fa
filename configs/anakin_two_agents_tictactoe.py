"""Two agents learning tic-tac-toe in one Anakin program (rbgame's decentralized trainer on pgx's
game): a Rainbow agent ("rb", the settings of `rainbow_tictactoe.py`, its replay on the device)
and a PPO agent ("ppo", those of `anakin_ppo_tictactoe.py`), each with its own network, learner,
data flow, streams and opponent pool.

They meet each other in both seats, and each also plays the heuristic, uniform random and its
own pool. One update of the run is one update of each agent, in lockstep: each plays its
rollout against the other's params as they were at the update's start, then learns from it
(`jaxrl_dist/anakin/agents.py`, `docs/guides/several-agents.md`).
"""

import os

import ml_collections

from jaxrl_dist.config.cli import load_config_file

HERE = os.path.dirname(os.path.abspath(__file__))


def get_config(variant=None):
    suffix = f":{variant}" if variant else ""
    ppo = load_config_file(os.path.join(HERE, "anakin_ppo_tictactoe.py") + suffix)
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
            # 64 streams x 16 moves a rollout, 4 samples per insert: 32 updates of 128 each
            "replay": {**rb["replay"], "batch_size": 128},
            "batch_size": 64,
        },
        {
            "name": "ppo",
            "algorithm": "ppo",
            "algo": ppo["algo"],
            "network": ppo["network"],
            "batch_size": 64,
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
    c.batch_size = 64  # the run's; each agent's own above
    c.total_env_steps = 1_000_000  # both agents' moves: half each
    c.eval_every_updates = 25
    c.log_every_updates = 25
    if variant == "quick":  # 6 updates; the agents and their own pools only (fewer programs)
        c.total_env_steps = (32 + 32) * 16 * 6
        c.eval_every_updates = 0
        c.log_every_updates = 2
        c.agents[0]["replay"] = {**c.agents[0]["replay"], "min_size": 256}
        c.agents[0]["batch_size"] = c.agents[1]["batch_size"] = 32
        c.seats["games"] = (("rb", "ppo"), ("ppo", "rb"), ("rb", "pool:rb"), ("pool:ppo", "ppo"))
    return c
