"""Rainbow on CartPole-v1 (EnvPool), SEED-style: prioritized n-step replay, every Rainbow part on.

Hyperparameters: the Rainbow paper's structure (Hessel et al. 2018) sized for CartPole: C51 on
[0, 100] (returns at discount 0.99 stay below 100), noisy nets (sigma0 0.5, no epsilon), dueling,
double Q, 3-step returns, proportional priorities (alpha 0.5, beta 0.4 -> 1), Adam.
"""

import ml_collections


def get_config(variant=None):
    c = ml_collections.ConfigDict()
    c.algorithm = "rainbow"
    c.env_id = "CartPole-v1"
    c.env_kwargs = {}
    c.seed = 0
    c.sebulba = {}
    c.sebulba.num_actor_threads = 1
    c.sebulba.envs_per_actor = 16
    c.sebulba.async_envs = True
    c.unroll_length = 16
    c.batch_size = 128  # transitions per update
    c.total_env_steps = 200_000
    c.stop_at_eval_return = 475.0
    c.eval_every_updates = 500
    c.eval_episodes = 10
    c.eval_mode = "greedy"
    c.checkpoint_every_updates = 2_000
    c.log_every_updates = 100
    c.replay = {
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
        c.learning_curve = False  # a smoke run: no plot (matplotlib costs ~0.5 s a run)
        c.total_env_steps = 4_000
        c.stop_at_eval_return = None
        c.eval_every_updates = 0
        c.eval_episodes = 4
        c.checkpoint_every_updates = 0
        c.log_every_updates = 20
        c.replay = {**c.replay, "min_size": 256}
    elif variant is not None:
        raise ValueError(f"unknown variant {variant!r}; use ':quick' or no variant")
    return c
