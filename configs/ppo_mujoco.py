"""PPO on MuJoCo through EnvPool (default HalfCheetah-v5), Gaussian policy.

Hyperparameters after Huang et al. 2022 / CleanRL's `ppo_continuous_action.py` (Schulman et al.
2017's MuJoCo settings): Adam lr 3e-4 annealed, 2,048 transitions per update, 10 epochs of
64-transition minibatches, clip 0.2, GAE lambda 0.95, discount 0.99, no entropy bonus, value cost
0.5, gradient norm 0.5, separate actor and critic tanh MLPs (64, 64), state-independent log-std
initialised at 0, observation normalisation; CleanRL normalises rewards, a fixed scale of 0.1
stands in here. Actions are clipped to the bounds (no tanh squashing), as in CleanRL.
"""

import ml_collections


def get_config(variant=None):
    c = ml_collections.ConfigDict()
    c.algorithm = "ppo"
    c.env_id = "HalfCheetah-v5"
    c.env_kwargs = {}
    c.seed = 0
    c.sebulba = {}
    c.sebulba.num_actor_threads = 1
    # 32 envs x 64 steps: a rollout is one update's 2,048 transitions, as CleanRL's one env's
    # 2,048 steps. 64 envs (two updates per rollout, the second on data a policy old) trained
    # Hopper-v4 to 1,237 against 1,833 here (5 seeds each, issue 58's results).
    c.sebulba.envs_per_actor = 32
    c.sebulba.async_envs = True
    c.unroll_length = 64
    c.batch_size = 32  # 2,048 transitions per update
    c.sebulba.queue_size = 1
    c.total_env_steps = 1_000_000
    c.stop_at_eval_return = None
    c.eval_every_updates = 25
    c.eval_episodes = 10
    c.eval_mode = "greedy"
    c.checkpoint_every_updates = 100
    c.keep_best_checkpoints = 1  # a long run: a save per new best costs next to nothing
    c.log_every_updates = 5
    c.network = {
        "torso": "mlp",
        "hidden_sizes": (64, 64),
        "activation": "tanh",
        "shared_torso": False,
        "normalize_obs": True,
        "log_std_init": 0.0,
        "tanh_squash": False,
    }
    c.algo = {
        "learning_rate": 3e-4,
        "anneal_lr": True,
        "num_epochs": 10,
        "num_minibatches": 32,  # one 64-step segment per minibatch
        "clip_eps": 0.2,
        "gae_lambda": 0.95,
        "discount": 0.99,
        "entropy_cost": 0.0,
        "value_cost": 0.5,
        "max_grad_norm": 0.5,
        "reward_scale": 0.1,
    }
    if variant == "quick":
        c.learning_curve = False  # a smoke run: no plot (matplotlib costs ~0.5 s a run)
        c.sebulba.envs_per_actor = 16
        c.unroll_length = 16
        c.batch_size = 8
        c.algo.num_minibatches = 2
        c.algo.num_epochs = 2
        c.total_env_steps = 16 * 8 * 6
        c.env_kwargs = {"max_episode_steps": 100}
        c.eval_every_updates = 0
        c.eval_episodes = 2
        c.checkpoint_every_updates = 0
        c.log_every_updates = 2
    elif variant is not None:
        raise ValueError(f"unknown variant {variant!r}; use ':quick' or no variant")
    return c
