"""PPO on tic-tac-toe in the Anakin runtime: pgx's game (EnvPool's `TicTacToe-v1` is its port),
the seats and the opponent pool inside one jitted program.

The agent (network and PPO hyperparameters) of `ppo_tictactoe.py`, read from it, and its seat
mixture plus the opponent pool: self-play (each learner seat
its own game, the other seat played by the acting params, `envs/jax_games.py`), the win/block
heuristic and uniform random in either seat, and pool snapshots (PFSP) in either seat; random
openings of 0-2 moves. Evaluated greedily against uniform random, the learner taking each seat
in turn (win 1, draw 0, loss -1; a perfect player scores about 0.97 against random).
"""

import os

import ml_collections

from jaxrl_dist.config.cli import load_config_file

HERE = os.path.dirname(os.path.abspath(__file__))


def get_config(variant=None):
    sebulba = load_config_file(os.path.join(HERE, "ppo_tictactoe.py"))
    c = ml_collections.ConfigDict()
    c.runtime = "anakin"
    c.algorithm = "ppo"
    c.env_id = "TicTacToe-v1"  # played as pgx's tic_tac_toe on Anakin
    c.env_kwargs = {}
    c.seed = 0
    c.anakin = {}
    c.anakin.num_seeds = 1
    c.seats = {
        "games": (
            ("learner", "learner"),
            ("learner", "heuristic"),
            ("heuristic", "learner"),
            ("learner", "random"),
            ("random", "learner"),
            ("learner", "pool"),
            ("pool", "learner"),
        ),
        "eval_opponent": "random",
        "opening_plies": 2,
        "pool_every_updates": 20,
        "pool_capacity": 8,
    }
    c.batch_size = 64  # learner streams per seed, each in its own game
    c.unroll_length = 16
    c.total_env_steps = 1_000_000
    c.stop_at_eval_return = None
    c.eval_every_updates = 25
    c.eval_episodes = 200
    c.eval_mode = "greedy"
    c.checkpoint_every_updates = 0
    c.log_every_updates = 25
    c.network = dict(sebulba["network"])
    c.algo = dict(sebulba["algo"])
    if variant == "quick":
        c.learning_curve = False
        c.total_env_steps = 16_384
        c.eval_every_updates = 0
        c.eval_episodes = 20
        c.log_every_updates = 4
        c.seats["pool_every_updates"] = 4
    elif variant is not None:
        raise ValueError(f"unknown variant {variant!r}; use ':quick' or no variant")
    return c
