"""IMPALA on Atari through EnvPool (default Breakout-v5), IMPALA ResNet ("deep") network.

Environment protocol: `jaxrl_dist.envs.atari_protocol()`, after Machado et al. 2018 ("Revisiting
the ALE"): sticky actions 0.25 instead of no-op starts, minimal action set, whole games without
life-loss signals, a 27,000-step cap, rewards clipped to [-1, 1] for learning; frame skip 4,
84x84 grayscale, 4 stacked frames (Mnih et al. 2015).
Hyperparameters: IMPALA's Atari settings (Espeholt et al. 2018, Table G.1 / Appendix D):
unroll 20, batch 32, RMSProp lr 6e-4 (decay 0.99, eps 0.01) annealed linearly to 0, gradient
norm clip 40, discount 0.99, entropy cost 0.01, baseline cost 0.5, rho-bar = c-bar = 1.

`get_config("quick")` is a short smoke run that exercises every part on a CPU; `":lstm"` adds a
recurrent core (`":quick,lstm"` both).
"""

import ml_collections

from jaxrl_dist.envs import atari_protocol

VARIANTS = ("quick", "lstm")  # combine with a comma: ":quick,lstm"


def get_config(variant=None):
    variants = set(filter(None, (variant or "").split(",")))
    if not variants <= set(VARIANTS):
        raise ValueError(f"unknown variant {variant!r}; use any of {VARIANTS}, e.g. ':quick,lstm'")
    c = ml_collections.ConfigDict()
    c.algorithm = "impala"
    c.env_id = "Breakout-v5"
    c.env_kwargs = atari_protocol()  # Machado et al. 2018; see jaxrl_dist/envs
    c.seed = 0
    # Runtime defaults for one GPU with 16 cores, measured on H100 and H200 machines (README,
    # "Performance"; benchmarks/results/nvidia-h100-80gb-hbm3/, nvidia-h200/). Two actor threads
    # of 128 envs, each stepping its envs as two sync EnvPools of 64 in turn inside one jitted
    # unroll (the XLA actor loop, `env_groups_per_actor=2`): one group's envs step while the
    # policy acts on the other's. Breakout end to end: 13,005 SPS against 10,940 for the Python
    # loop on 2 async pools (H100, 10 s windows), 12,609 against 11,195 in a 150 s learning run
    # in steady state with no difference in returns over its first 1.4M env steps (H200, one
    # seed each). Eight EnvPool threads per pool.
    # The batch of 64 segments (the paper's is 32) is what was measured.
    c.sebulba = {}
    c.sebulba.num_actor_threads = 2
    c.sebulba.envs_per_actor = 128  # two env groups of 64; one unroll = two rollouts of 64 segments
    c.sebulba.env_threads_per_actor = 8
    c.sebulba.actor_loop = "xla"
    c.sebulba.async_envs = False
    c.sebulba.env_groups_per_actor = 2
    c.unroll_length = 20
    c.batch_size = 64
    c.sebulba.queue_size = 2
    c.total_env_steps = 50_000_000  # 200M frames, as in IMPALA's Atari-57 runs
    c.stop_at_eval_return = None
    c.eval_every_updates = 2_000
    c.eval_episodes = 10
    c.eval_mode = "greedy"
    c.checkpoint_every_updates = 2_000
    c.keep_best_checkpoints = 1  # a long run: a save per new best costs next to nothing
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
    if "lstm" in variants:  # IMPALA's Atari LSTM (Espeholt et al. 2018): 256 units after the ResNet
        c.network = {**c.network, "core": "lstm", "core_size": 256}
    if "quick" in variants:
        c.learning_curve = False  # a smoke run: no plot (matplotlib costs ~0.5 s a run)
        # The small-CPU-box settings (2 cores, measured: benchmarks/results/cpu/): the ResNet
        # learner takes ~100 transitions/s and bounds everything, so one actor thread with 8
        # envs (two env groups of 4) keeps it fed (its queue is full half the time); a short
        # smoke run.
        c.sebulba.num_actor_threads = 1
        c.sebulba.envs_per_actor = 8
        c.sebulba.env_threads_per_actor = 0  # one EnvPool thread per env of a pool: 4
        c.batch_size = 4
        c.unroll_length = 8
        c.total_env_steps = 8 * 4 * 4  # 4 updates
        c.eval_every_updates = 0
        c.eval_episodes = 2
        c.eval_mode = "sampled"
        c.env_kwargs["max_episode_steps"] = 100
        c.checkpoint_every_updates = 0
        c.log_every_updates = 2
    return c
