"""Rainbow on tic-tac-toe with the seats of `ppo_tictactoe.py`: the same mixture of self-play,
the heuristic and uniform random, the learner in either seat. Q-values of illegal moves are
never chosen, in epsilon-greedy acting, in the double-Q bootstrap, or in evaluation."""

import os

import ml_collections

from jaxrl_dist.config.cli import load_config_file

PPO = os.path.join(os.path.dirname(os.path.abspath(__file__)), "ppo_tictactoe.py")


def get_config(variant=None):
    c = ml_collections.ConfigDict(load_config_file(PPO + (f":{variant}" if variant else "")))
    c.algorithm = "rainbow"
    c.batch_size = 128  # transitions per update
    c.replay = {"capacity": 50_000, "min_size": 1_000, "samples_per_insert": 4.0, "n_step": 3,
                "priority_exponent": 0.5}  # fmt: skip
    c.algo = {
        "learning_rate": 5e-4,
        "discount": 0.99,
        "num_atoms": 51,
        "v_min": -1.0,
        "v_max": 1.0,
        "noisy": False,
        "target_period": 200,
    }
    if variant == "quick":
        c.replay = {**c.replay, "min_size": 256}
    return c
