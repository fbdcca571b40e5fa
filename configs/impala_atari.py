"""IMPALA on Atari through EnvPool (default Breakout-v5), IMPALA ResNet ("deep") network.

Environment protocol: `jaxrl_dist.envs.atari_protocol()`, after Machado et al. 2018 ("Revisiting
the ALE"): sticky actions 0.25 instead of no-op starts, minimal action set, whole games without
life-loss signals, a 27,000-step cap, rewards clipped to [-1, 1] for learning; frame skip 4,
84x84 grayscale, 4 stacked frames (Mnih et al. 2015).
Hyperparameters: IMPALA's Atari settings (Espeholt et al. 2018, Table G.1 / Appendix D):
unroll 20, batch 32, RMSProp lr 6e-4 (decay 0.99, eps 0.01) annealed linearly to 0, gradient
norm clip 40, discount 0.99, entropy cost 0.01, baseline cost 0.5, rho-bar = c-bar = 1.

`get_config("quick")` is a short smoke run that exercises every part on a CPU.
"""

import ml_collections

from jaxrl_dist.envs import atari_protocol


def get_config(variant=None):
    c = ml_collections.ConfigDict()
    c.algorithm = "impala"
    c.env_id = "Breakout-v5"
    c.env_kwargs = atari_protocol()  # Machado et al. 2018; see jaxrl_dist/envs
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
