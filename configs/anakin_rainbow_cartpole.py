"""Rainbow on gymnax CartPole-v1 in the Anakin runtime, its prioritized replay on the device.

`rainbow_cartpole.py`'s agent and replay (C51 on [0, 100], noisy nets, dueling, double Q, 3-step
returns, priorities alpha 0.5 and beta 0.4 -> 1, Adam 1e-3, a target copy every 100 updates),
acted by 16 envs x 16 steps per rollout. `replay.batch_size` is the learner's batch here (on
Anakin `batch_size` counts envs): 128 transitions, each sampled 8 times on average, so every
rollout of 256 steps is followed by 16 updates, the Sebulba config's one update per 16 steps.
Update-counted intervals count rollouts on Anakin (one rollout and its 16 updates).
"""

import ml_collections


def get_config(variant=None):
    c = ml_collections.ConfigDict()
    c.runtime = "anakin"
    c.algorithm = "rainbow"
    c.env_id = "CartPole-v1"  # gymnax's
    c.env_kwargs = {}
    c.seed = 0
    c.num_seeds = 1
    c.batch_size = 16  # envs per seed
    c.unroll_length = 16
    c.total_env_steps = 200_000
    c.stop_at_eval_return = 475.0
    c.eval_every_updates = 32  # every 8,192 env steps
    c.eval_episodes = 10
    c.eval_mode = "greedy"
    c.checkpoint_every_updates = 0
    c.log_every_updates = 8
    c.replay = {
        "batch_size": 128,  # transitions per update
        "capacity": 50_000,
        "min_size": 1_000,
        "samples_per_insert": 8.0,
        "n_step": 3,
        "priority_exponent": 0.5,
    }
    c.network = {"torso": "mlp", "hidden_sizes": (128, 128), "activation": "relu"}
    c.algo = {
        "learning_rate": 1e-3,
        "adam_eps": 1e-8,
        "max_grad_norm": 10.0,
        "discount": 0.99,
        "num_atoms": 51,
        "v_min": 0.0,
        "v_max": 100.0,
        "noisy": True,
        "sigma0": 0.5,
        "target_period": 100,
        "importance_exponent": 0.4,
    }
    if variant == "quick":
        c.learning_curve = False
        c.total_env_steps = 4_096
        c.stop_at_eval_return = None
        c.eval_every_updates = 0
        c.eval_episodes = 4
        c.log_every_updates = 4
        c.replay = {**c.replay, "min_size": 512}
    elif variant is not None:
        raise ValueError(f"unknown variant {variant!r}; use ':quick' or no variant")
    return c
