"""PPO on gymnax CartPole-v1 in the Anakin runtime: acting and learning in one jitted function.

PureJaxRL's `ppo.py` CartPole settings (Lu et al. 2022, after CleanRL): 4 envs x 128 steps per
update, 4 epochs x 4 minibatches, Adam 2.5e-4 annealed, clip 0.2, GAE lambda 0.95, discount 0.99,
entropy 0.01, value cost 0.5, gradient norm 0.5, separate tanh MLPs (64, 64), 500k env steps.
`benchmarks/purejaxrl_ppo.py` is that program written the PureJaxRL way, the throughput baseline.
"""

import ml_collections


def get_config(variant=None):
    c = ml_collections.ConfigDict()
    c.runtime = "anakin"
    c.algorithm = "ppo"
    c.env_id = "CartPole-v1"  # gymnax's
    c.env_kwargs = {}
    c.seed = 0
    c.anakin = {}
    c.anakin.num_seeds = 1
    c.batch_size = 4  # envs per seed
    c.unroll_length = 128
    c.total_env_steps = 500_000
    c.stop_at_eval_return = 475.0
    c.eval_every_updates = 20  # every 10k env steps
    c.eval_episodes = 20
    c.eval_mode = "greedy"
    c.checkpoint_every_updates = 0
    c.log_every_updates = 20
    c.network = {
        "torso": "mlp",
        "hidden_sizes": (64, 64),
        "activation": "tanh",
        "shared_torso": False,
    }
    c.algo = {
        "learning_rate": 2.5e-4,
        "anneal_lr": True,
        "num_epochs": 4,
        "num_minibatches": 4,
        "clip_eps": 0.2,
        "gae_lambda": 0.95,
        "discount": 0.99,
        "entropy_cost": 0.01,
        "value_cost": 0.5,
        "max_grad_norm": 0.5,
    }
    if variant == "quick":
        c.learning_curve = False
        c.total_env_steps = 20_480
        c.stop_at_eval_return = None
        c.eval_every_updates = 0
        c.eval_episodes = 4
        c.log_every_updates = 10
    elif variant is not None:
        raise ValueError(f"unknown variant {variant!r}; use ':quick' or no variant")
    return c
