"""SAC on MuJoCo through EnvPool (default HalfCheetah-v4), 1M env steps, one gradient step per
env step; `--config.env_id=Hopper-v4` (Walker2d-v4, Ant-v4) for the others.

Hyperparameters: CleanRL's `sac_continuous_action.py` (the paper's, Haarnoja et al. 2018):
batch 256, a 1M-transition replay, discount 0.99, Polyak rate 0.005, twin critics, ReLU MLPs
(256, 256), Adam 3e-4 for the policy and 1e-3 for the critics and the temperature, a learned
temperature aiming at -|A|, 5,000 uniform warm-up steps (the replay's `min_size`). The learner
samples 1,024 transitions a call and makes 4 gradient steps of 256 on them (`algo.minibatches`)
at 256 samples per inserted transition: one step per env step, 4 per learner call, so a CPU
learner is not held back by a call per step. (CleanRL's delayed policy updates make two
policy steps every other env step; here the policy steps once every step: the same count.)
"""

import ml_collections


def get_config(variant=None):
    c = ml_collections.ConfigDict()
    c.algorithm = "sac"
    c.env_id = "HalfCheetah-v4"
    c.env_kwargs = {}
    c.seed = 0
    c.sebulba = {}
    c.sebulba.num_actor_threads = 1
    c.sebulba.envs_per_actor = 4
    c.sebulba.async_envs = True
    c.unroll_length = 8  # 32 env steps a rollout
    c.batch_size = 1_024  # transitions per learner call: 4 minibatches of 256
    c.total_env_steps = 1_000_000
    c.stop_at_eval_return = None
    c.eval_every_updates = 5_000  # learner calls: every 20,000 env steps
    c.eval_episodes = 10
    c.eval_mode = "greedy"
    c.checkpoint_every_updates = 12_500  # 50,000 env steps: a stopped sweep loses little
    c.keep_best_checkpoints = 1
    c.log_every_updates = 500
    c.replay = {
        "capacity": 1_000_000,
        "min_size": 5_000,
        "samples_per_insert": 256.0,  # 256 per step: one gradient step per env step
        "n_step": 1,
    }
    c.network = {"torso": "mlp", "hidden_sizes": (256, 256), "activation": "relu"}
    c.algo = {
        "actor_learning_rate": 3e-4,
        "critic_learning_rate": 1e-3,
        "alpha_learning_rate": 1e-3,
        "discount": 0.99,
        "target_tau": 0.005,
        "minibatches": 4,
    }
    if variant == "quick":
        c.learning_curve = False  # a smoke run: no plot (matplotlib costs ~0.5 s a run)
        c.env_kwargs = {"max_episode_steps": 100}
        c.total_env_steps = 1_024
        c.eval_every_updates = 0
        c.eval_episodes = 2
        c.checkpoint_every_updates = 0
        c.keep_best_checkpoints = 0
        c.log_every_updates = 10
        c.batch_size = 128
        c.network = {**c.network, "hidden_sizes": (32, 32)}
        c.replay = {**c.replay, "capacity": 10_000, "min_size": 256, "samples_per_insert": 8.0}
        c.algo = {**c.algo, "minibatches": 2}
    elif variant is not None:
        raise ValueError(f"unknown variant {variant!r}; use ':quick' or no variant")
    return c
