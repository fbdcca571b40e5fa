"""Rainbow on Atari through EnvPool (default Pong-v5), the Rainbow paper's hyperparameters.

Hessel et al. 2018 ("Rainbow: Combining Improvements in Deep Reinforcement Learning"), Table 1:
learning starts after 80k frames (20k agent steps); Adam lr 6.25e-5, eps 1.5e-4; noisy nets
sigma0 0.5 and no epsilon-greedy; target network copied every 32k frames (8k agent steps =
2,000 updates); proportional priorities, exponent 0.5, importance exponent 0.4 annealed to 1;
3-step returns; C51 with 51 atoms on [-10, 10]; dueling; double Q; 1M-transition replay, batch
32, one update per 4 agent steps (samples_per_insert 32 / 4 = 8); discount 0.99; Nature CNN.
Environment protocol: `jaxrl_dist.envs.atari_protocol()` (Machado et al. 2018: sticky actions,
whole games, clipped rewards for learning; frame skip 4, 84x84 grayscale, 4 stacked frames).

Two differences from the paper: the 512-unit hidden layer is the torso's ordinary Dense (the
paper's is noisy too; here the noise is in the heads), and the replay stores each stacked
observation whole (4 x 84 x 84 uint8 = 28 KB per transition), so the 1M capacity takes ~28 GB of
host memory; lower `replay.capacity` on a smaller machine. `save_replay` is off: a resume
refills to `replay.min_size` first.

`get_config("quick")` is a short smoke run that exercises every part on a CPU.
"""

import ml_collections

from jaxrl_dist.envs import atari_protocol


def get_config(variant=None):
    c = ml_collections.ConfigDict()
    c.algorithm = "rainbow"
    c.env_id = "Pong-v5"
    c.env_kwargs = atari_protocol()  # Machado et al. 2018; see jaxrl_dist/envs
    c.seed = 0
    c.sebulba = {}
    c.sebulba.num_actor_threads = 2
    c.sebulba.envs_per_actor = 32
    c.sebulba.env_threads_per_actor = 8
    c.sebulba.async_envs = True
    c.unroll_length = 16
    c.batch_size = 32  # transitions per update
    c.total_env_steps = 2_500_000  # 10M frames
    c.stop_at_eval_return = None
    c.eval_every_updates = 10_000
    c.eval_episodes = 8
    c.eval_mode = "greedy"
    c.checkpoint_every_updates = 20_000
    c.keep_best_checkpoints = 1
    c.log_every_updates = 500
    c.sebulba.inference = {"client": "server"}  # SEED: one central batched inference server
    c.replay = {
        "capacity": 1_000_000,
        "min_size": 20_000,
        "samples_per_insert": 8.0,
        "n_step": 3,
        "priority_exponent": 0.5,
    }
    c.network = {"torso": "nature_cnn", "activation": "relu"}
    c.algo = {
        "learning_rate": 6.25e-5,
        "adam_eps": 1.5e-4,
        "max_grad_norm": 0.0,
        "discount": 0.99,
        "num_atoms": 51,
        "v_min": -10.0,
        "v_max": 10.0,
        "noisy": True,
        "sigma0": 0.5,
        "target_period": 2_000,
        "importance_exponent": 0.4,
    }
    if variant == "quick":
        c.learning_curve = False  # a smoke run: no plot (matplotlib costs ~0.5 s a run)
        c.sebulba.num_actor_threads = 1
        c.sebulba.envs_per_actor = 8
        c.sebulba.env_threads_per_actor = 0
        c.unroll_length = 8
        c.batch_size = 8
        c.total_env_steps = 256  # 128 fill the replay, then ~90 updates of 8
        c.eval_every_updates = 0
        c.eval_episodes = 2
        c.env_kwargs["max_episode_steps"] = 100
        c.checkpoint_every_updates = 0
        c.log_every_updates = 4
        c.replay = {**c.replay, "capacity": 2_000, "min_size": 128}
    elif variant is not None:
        raise ValueError(f"unknown variant {variant!r}; use ':quick' or no variant")
    return c
