"""IMPALA (V-trace) on tic-tac-toe with the seats of `ppo_tictactoe.py`: the same mixture of
self-play, the heuristic and uniform random, the learner in either seat, legal-action masks in
acting, learning and evaluation."""

import os

import ml_collections

from jaxrl_dist.config.cli import load_config_file

PPO = os.path.join(os.path.dirname(os.path.abspath(__file__)), "ppo_tictactoe.py")


def get_config(variant=None):
    c = ml_collections.ConfigDict(load_config_file(PPO + (f":{variant}" if variant else "")))
    c.algorithm = "impala"
    c.algo = {
        "optimizer": "adam",
        "learning_rate": 1e-3,
        "anneal_lr": True,
        "max_grad_norm": 0.5,
        "discount": 0.99,
        "entropy_cost": 0.003,
        "baseline_cost": 0.5,
    }
    return c
