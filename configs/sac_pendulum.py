"""SAC on Pendulum-v1 (EnvPool classic control), SEED-style: a uniform replay, one gradient
step per env step.

Hyperparameters: CleanRL's `sac_continuous_action.py` (Huang et al. 2022), which keeps the
paper's (Haarnoja et al. 2018): batch 256, discount 0.99, Polyak rate 0.005, twin critics,
ReLU MLPs (256, 256) for the policy and each critic, Adam 3e-4 for the policy and 1e-3 for the
critics and the temperature, learned temperature aiming at entropy -|A| = -1; the warm-up of
uniform actions lasts 1,000 steps here (the replay's `min_size`; CleanRL: 5,000 for MuJoCo's
1M steps). A random policy scores about -1,250 per 200-step episode; -200 is close to solved.
"""

import ml_collections


def get_config(variant=None):
    c = ml_collections.ConfigDict()
    c.algorithm = "sac"
    c.env_id = "Pendulum-v1"
    c.env_kwargs = {}
    c.seed = 0
    c.sebulba = {}
    c.sebulba.num_actor_threads = 1
    c.sebulba.envs_per_actor = 4
    c.sebulba.async_envs = False
    c.unroll_length = 8  # 32 env steps a rollout
    c.batch_size = 256  # transitions per update
    c.total_env_steps = 20_000
    c.stop_at_eval_return = None
    c.eval_every_updates = 2_000
    c.eval_episodes = 10
    c.eval_mode = "greedy"
    c.checkpoint_every_updates = 5_000
    c.log_every_updates = 500
    c.replay = {
        "capacity": 100_000,
        "min_size": 1_000,
        "samples_per_insert": 256.0,  # batch 256: one update per env step
        "n_step": 1,
    }
    c.network = {"torso": "mlp", "hidden_sizes": (256, 256), "activation": "relu"}
    c.algo = {
        "actor_learning_rate": 3e-4,
        "critic_learning_rate": 1e-3,
        "alpha_learning_rate": 1e-3,
        "discount": 0.99,
        "target_tau": 0.005,
    }
    if variant == "quick":
        c.learning_curve = False  # a smoke run: no plot (matplotlib costs ~0.5 s a run)
        c.total_env_steps = 1_024
        c.eval_every_updates = 0
        c.eval_episodes = 2
        c.checkpoint_every_updates = 0
        c.log_every_updates = 10
        c.batch_size = 64
        c.network = {**c.network, "hidden_sizes": (32, 32)}
        c.replay = {**c.replay, "min_size": 256, "samples_per_insert": 4.0}
    elif variant is not None:
        raise ValueError(f"unknown variant {variant!r}; use ':quick' or no variant")
    return c
