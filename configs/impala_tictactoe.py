"""IMPALA (V-trace) on tic-tac-toe with the seats of `ppo_tictactoe.py`: the same mixture of
self-play, the heuristic and uniform random, the learner in either seat, legal-action masks in
acting, learning and evaluation."""

import importlib.util
import os

_spec = importlib.util.spec_from_file_location(
    "_ppo_tictactoe", os.path.join(os.path.dirname(os.path.abspath(__file__)), "ppo_tictactoe.py")
)
_ppo = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_ppo)


def get_config(variant=None):
    c = _ppo.get_config(variant)
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
