"""IMPALA on Atari through EnvPool (default Breakout-v5), IMPALA ResNet ("deep") network.

Environment protocol, after Machado et al. 2018 ("Revisiting the ALE"), as EnvPool options:
  - sticky actions: repeat_action_probability=0.25 (Machado et al. 2018, Sec. 5.2), in place of
    no-op starts (noop_max=1 turns those off);
  - minimal action set (full_action_space=False), as in IMPALA (Espeholt et al. 2018);
  - no loss-of-life signal (episodic_life=False): an episode is a whole game (Machado Sec. 5.3);
  - frame skip 4 with max-pooling, 84x84 grayscale, 4 stacked frames (Mnih et al. 2015);
  - episodes capped at 108,000 frames = 27,000 agent steps (max_episode_steps);
  - rewards clipped to [-1, 1] for learning (IMPALA, Sec. 5.3); logged returns are game scores.
Hyperparameters: IMPALA's Atari settings (Espeholt et al. 2018, Table G.1 / Appendix D):
unroll 20, batch 32, RMSProp lr 6e-4 (decay 0.99, eps 0.01) annealed linearly to 0, gradient
norm clip 40, discount 0.99, entropy cost 0.01, baseline cost 0.5, rho-bar = c-bar = 1.

`get_config("quick")` is a short smoke run that exercises every part on a CPU.
"""

import ml_collections


def get_config(variant=None):
    c = ml_collections.ConfigDict()
    c.algorithm = "impala"
    c.env_id = "Breakout-v5"
    c.env_kwargs = {
        "repeat_action_probability": 0.25,
        "noop_max": 1,
        "full_action_space": False,
        "episodic_life": False,
        "reward_clip": True,
        "max_episode_steps": 27_000,
    }
    c.seed = 0
    c.num_actor_threads = 2
    c.envs_per_actor = 32  # async: 16 envs per recv(), one rollout = 16 segments
    c.async_envs = True
    c.unroll_length = 20
    c.batch_size = 32
    c.queue_size = 2
    c.total_env_steps = 50_000_000  # 200M frames, as in IMPALA's Atari-57 runs
    c.stop_at_eval_return = None
    c.eval_every_updates = 2_000
    c.eval_episodes = 10
    c.eval_mode = "greedy"
    c.checkpoint_every_updates = 2_000
    c.log_every_updates = 20
    c.network = {"torso": "impala_resnet", "dtype": "float32"}
    c.algo = {
        "optimizer": "rmsprop",
        "learning_rate": 6e-4,
        "rmsprop_decay": 0.99,
        "rmsprop_eps": 0.01,
        "anneal_lr": True,
        "max_grad_norm": 40.0,
        "discount": 0.99,
        "entropy_cost": 0.01,
        "baseline_cost": 0.5,
    }
    if variant == "quick":
        # On 2 CPU cores the ResNet learns from only ~30-50 transitions/s: a smoke run.
        c.num_actor_threads = 1
        c.envs_per_actor = 8
        c.unroll_length = 8
        c.batch_size = 4
        c.total_env_steps = 8 * 4 * 12
        c.eval_every_updates = 0
        c.eval_episodes = 2
        c.eval_mode = "sampled"
        c.env_kwargs["max_episode_steps"] = 300
        c.checkpoint_every_updates = 0
        c.log_every_updates = 4
    elif variant is not None:
        raise ValueError(f"unknown variant {variant!r}; use ':quick' or no variant")
    return c
