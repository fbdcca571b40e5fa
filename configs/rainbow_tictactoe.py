"""Rainbow on tic-tac-toe with the seats of `ppo_tictactoe.py`: the same mixture of self-play,
the heuristic and uniform random, the learner in either seat, random openings of 0-2 moves.
Q-values of illegal moves are never chosen, in epsilon-greedy acting, in the double-Q
bootstrap, or in evaluation.

Exploration is Ape-X's per-env epsilon ladder (0.4 ** (1 + 7 i / (N - 1)) for env i of N):
some games explore hard, most play close to greedy, so self-play meets both. Off-policy
max-backups learn the punishing replies PPO's own samples rarely try: over seeds 0-3 Rainbow's
greedy policy chose a losing move in 59-78 of tic-tac-toe's 4,520 non-terminal positions, PPO's
in 251-969. The learning rate anneals to 0: without it the greedy policy flipped between
near-tied replies from checkpoint to checkpoint, so where a run stopped decided its losses.
Seeds 0-9 quiet, 1M steps (`benchmarks/results/cpu/learning/rainbow_tictactoe.json`, 187-231 s
a seed with the evaluation against perfect play): every seed's weaker seat reaches 0.85 against
random and ends at 0.91-0.96; exact losses against perfect play 0% to 1.9%, 8 seeds at 0%.
The earlier config (epsilon 0, no noisy nets) did not explore at all.
"""

import os

import ml_collections

from jaxrl_dist.config.cli import load_config_file

PPO = os.path.join(os.path.dirname(os.path.abspath(__file__)), "ppo_tictactoe.py")
# PPO's queue fields: a replay has no queue between actors and learner (refused when set).
ON_POLICY_ONLY = ("queue_size", "max_policy_lag")


def without_queue(ppo: dict) -> dict:
    """A PPO config's dict without its on-policy queue fields (`ON_POLICY_ONLY`)."""
    sebulba = {k: v for k, v in ppo["sebulba"].items() if k not in ON_POLICY_ONLY}
    return {**ppo, "sebulba": sebulba}


def get_config(variant=None):
    ppo = load_config_file(PPO + (f":{variant}" if variant else ""))
    c = ml_collections.ConfigDict(without_queue(ppo))
    del c.network["shared_torso"]  # PPO's separate critic torso: a Q network has one torso
    c.algorithm = "rainbow"
    c.total_env_steps = 1_000_000
    c.eval_every_updates = 500  # an update per 32 moves (128 samples, 4 per insert)
    c.log_every_updates = 100
    c.checkpoint_every_updates = 2_000
    c.batch_size = 128  # transitions per update
    c.replay = {
        "capacity": 50_000,
        "min_size": 1_000,
        "samples_per_insert": 4.0,
        "n_step": 3,
        "priority_exponent": 0.5,
    }
    c.algo = {
        "learning_rate": 5e-4,
        "anneal_lr": True,
        "discount": 0.99,
        "num_atoms": 51,
        "v_min": -1.0,
        "v_max": 1.0,
        "noisy": False,
        "target_period": 200,
        "epsilon": 0.4,
        "epsilon_alpha": 7.0,
    }
    if variant == "quick":
        c.replay = {**c.replay, "min_size": 256}
        c.total_env_steps = 8_000
        c.eval_every_updates = 0
        c.checkpoint_every_updates = 0
        c.log_every_updates = 5
    return c
