"""PPO on Atari through EnvPool (default Breakout-v5), Nature CNN.

Hyperparameters after Huang et al. 2022 / CleanRL's `ppo_atari_envpool.py` (Schulman et al.
2017's Atari settings): Adam lr 2.5e-4 annealed, 4 epochs x 4 minibatches, clip 0.1, GAE lambda
0.95, discount 0.99, entropy 0.01, value cost 0.5, gradient norm 0.5, 1,024 transitions per update
(CleanRL: 8 envs x 128). Environment protocol: `jaxrl_dist.envs.atari_protocol()` (Machado et
al. 2018: sticky actions 0.25, full games without life-loss signals, 27,000-step cap, clipped
rewards for learning).
"""

import ml_collections

from jaxrl_dist.envs import atari_protocol

VARIANTS = ("quick", "lstm")  # combine with a comma: ":quick,lstm"


def get_config(variant=None):
    variants = set(filter(None, (variant or "").split(",")))
    if not variants <= set(VARIANTS):
        raise ValueError(f"unknown variant {variant!r}; use any of {VARIANTS}, e.g. ':quick,lstm'")
    c = ml_collections.ConfigDict()
    c.algorithm = "ppo"
    c.env_id = "Breakout-v5"
    c.env_kwargs = atari_protocol()  # Machado et al. 2018; see jaxrl_dist/envs
    c.seed = 0
    c.sebulba = {}
    c.sebulba.num_actor_threads = 2
    c.sebulba.envs_per_actor = 16
    c.sebulba.async_envs = True
    c.unroll_length = 128
    c.batch_size = 8  # 8 segments x 128 steps
    c.sebulba.queue_size = 1
    c.total_env_steps = 10_000_000
    c.stop_at_eval_return = None
    c.eval_every_updates = 500
    c.eval_episodes = 10
    c.eval_mode = "greedy"
    c.checkpoint_every_updates = 500
    c.keep_best_checkpoints = 1  # a long run: a save per new best costs next to nothing
    c.log_every_updates = 10
    c.network = {"torso": "nature_cnn", "shared_torso": True}
    c.algo = {
        "learning_rate": 2.5e-4,
        "anneal_lr": True,
        "num_epochs": 4,
        "num_minibatches": 4,
        "clip_eps": 0.1,
        "gae_lambda": 0.95,
        "discount": 0.99,
        "entropy_cost": 0.01,
        "value_cost": 0.5,
        "max_grad_norm": 0.5,
    }
    if "lstm" in variants:  # CleanRL's `ppo_atari_lstm.py`: 128 units after the Nature CNN
        c.network = {**c.network, "core": "lstm", "core_size": 128}
    if "quick" in variants:
        c.learning_curve = False  # a smoke run: no plot (matplotlib costs ~0.5 s a run)
        c.sebulba.num_actor_threads = 1
        c.sebulba.envs_per_actor = 8
        c.unroll_length = 8
        c.batch_size = 4
        c.algo.num_minibatches = 2
        c.algo.num_epochs = 2
        c.total_env_steps = 8 * 4 * 1
        c.env_kwargs["max_episode_steps"] = 100
        c.eval_every_updates = 0
        c.eval_episodes = 2
        c.eval_mode = "sampled"
        c.checkpoint_every_updates = 0
        c.log_every_updates = 2
    return c
