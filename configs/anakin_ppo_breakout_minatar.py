"""PPO on gymnax's MinAtar Breakout (Young & Tian 2019) in the Anakin runtime: a harder JAX task.

PureJaxRL's MinAtar PPO settings (Lu et al. 2022): 64 envs x 128 steps per update, 4 epochs x
8 minibatches, Adam 5e-4 annealed, clip 0.2, GAE lambda 0.95, discount 0.99, entropy 0.01,
value cost 0.5, gradient norm 0.5; an MLP (256, 256, ReLU) on the flattened 10x10x4 frame (the
frame is too small for the Atari conv stacks); 10M env steps.

Measured (seed 0, 10M steps, 582 s on 2 CPU cores): the greedy return reaches 7.0 by 330k steps
and stays there to the end: this config does not yet learn Breakout past that plateau.
"""

import ml_collections


def get_config(variant=None):
    c = ml_collections.ConfigDict()
    c.runtime = "anakin"
    c.algorithm = "ppo"
    c.env_id = "Breakout-MinAtar"
    c.env_kwargs = {}
    c.seed = 0
    c.anakin = {}
    c.anakin.num_seeds = 1
    c.batch_size = 64  # envs per seed
    c.unroll_length = 128
    c.total_env_steps = 10_000_000
    c.stop_at_eval_return = None
    c.eval_every_updates = 100  # every 819k env steps
    c.eval_episodes = 32
    c.eval_mode = "greedy"
    c.checkpoint_every_updates = 200
    c.log_every_updates = 20
    c.network = {
        "torso": "mlp",
        "hidden_sizes": (256, 256),
        "activation": "relu",
        "shared_torso": False,
    }
    c.algo = {
        "learning_rate": 5e-4,
        "anneal_lr": True,
        "num_epochs": 4,
        "num_minibatches": 8,
        "clip_eps": 0.2,
        "gae_lambda": 0.95,
        "discount": 0.99,
        "entropy_cost": 0.01,
        "value_cost": 0.5,
        "max_grad_norm": 0.5,
    }
    if variant == "quick":
        c.learning_curve = False
        c.batch_size = 16
        c.unroll_length = 32
        c.total_env_steps = 16 * 32 * 10
        c.eval_every_updates = 0
        c.eval_episodes = 2
        c.checkpoint_every_updates = 0
        c.log_every_updates = 5
    elif variant is not None:
        raise ValueError(f"unknown variant {variant!r}; use ':quick' or no variant")
    return c
