"""A league across two agents on connect four in the Anakin runtime (issue 57): a main agent and
an exploiter (AlphaStar's main exploiter, Vinyals et al. 2019), both PPO with the network and
hyperparameters of `ppo_connect_four.py`, in one jitted program.

- "main" learns by self-play, against its own opponent pool (PFSP) and against the win/block
  heuristic and uniform random, in either seat, and against the exploiter;
- "exploiter" learns only against the main agent: its current params and its past versions,
  the snapshots of main's pool ("pool:main", taken every `pool_every_updates` of main's
  updates), drawn by the exploiter's own PFSP (its own record against each snapshot).

Both are evaluated against the heuristic, each seat in turn, and against each other
(`exploiter_vs_main/win_rate`). Win 1, draw 0, loss -1.
"""

import os

import ml_collections

from jaxrl_dist.config.cli import load_config_file

HERE = os.path.dirname(os.path.abspath(__file__))


def get_config(variant=None):
    ppo = load_config_file(os.path.join(HERE, "ppo_connect_four.py"))
    c = ml_collections.ConfigDict()
    c.runtime = "anakin"
    c.env_id = "ConnectFour-v1"  # played as pgx's connect_four on Anakin
    c.env_kwargs = {}
    c.seed = 0
    c.anakin = {"num_seeds": 1}
    agent = {"algorithm": "ppo", "algo": dict(ppo["algo"]), "network": dict(ppo["network"])}
    c.agents = ({"name": "main", **agent}, {"name": "exploiter", **agent})
    c.seats = {
        "games": (
            ("main", "main"),
            ("main", "pool:main"),
            ("pool:main", "main"),
            ("main", "heuristic"),
            ("heuristic", "main"),
            ("main", "random"),
            ("random", "main"),
            ("main", "exploiter"),
            ("exploiter", "main"),
            ("exploiter", "pool:main"),
            ("pool:main", "exploiter"),
        ),
        "eval_opponent": "heuristic",
        "opening_plies": 2,
        "pool_every_updates": 20,
        "pool_capacity": 16,
        "pool_sampling": "pfsp",
    }
    c.batch_size = 64  # learner streams per agent and seed, each in its own game
    c.unroll_length = 32
    c.total_env_steps = 4_000_000  # both agents' moves: half each
    c.stop_at_eval_return = None
    c.eval_every_updates = 50
    c.eval_episodes = 200
    c.eval_mode = "greedy"
    c.checkpoint_every_updates = 0
    c.log_every_updates = 25
    if variant == "quick":
        c.learning_curve = False
        c.total_env_steps = 2 * 64 * 32 * 4
        c.eval_every_updates = 0
        c.eval_episodes = 10
        c.log_every_updates = 2
        c.seats["pool_every_updates"] = 2
    elif variant is not None:
        raise ValueError(f"unknown variant {variant!r}; use ':quick' or no variant")
    return c
