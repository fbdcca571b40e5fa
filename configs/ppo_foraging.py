"""PPO on a simultaneous-move multi-agent task: Jumanji's level-based foraging through EnvPool
(`Jumanji/LevelBasedForaging-v0`: 2 agents on a grid, food they must pick up together when its
level exceeds one agent's, a reward shared by the team, 100 steps per episode).

One policy plays both agents: each (env, agent) is a stream (`envs/agents.py`) whose observation
is the agent's own view with its one-hot id appended, with its legal-action mask. Env steps
count agent steps (two per env step). A uniformly random legal policy scores about 0.05 (the
share of food eaten in an episode).
"""

import ml_collections


def get_config(variant=None):
    c = ml_collections.ConfigDict()
    c.algorithm = "ppo"
    c.env_id = "Jumanji/LevelBasedForaging-v0"
    c.env_kwargs = {}
    c.sebulba = {}
    c.sebulba.agents_per_env = 2
    c.seed = 0
    c.sebulba.num_actor_threads = 1
    c.sebulba.envs_per_actor = 32  # 64 agent streams
    c.sebulba.async_envs = True
    c.unroll_length = 32
    c.batch_size = 32
    c.sebulba.queue_size = 1
    c.total_env_steps = 2_000_000
    c.stop_at_eval_return = None
    c.eval_every_updates = 50
    c.eval_episodes = 64
    c.eval_mode = "sampled"
    c.checkpoint_every_updates = 200
    c.log_every_updates = 10
    c.network = {
        "torso": "mlp",
        "hidden_sizes": (128, 128),
        "activation": "tanh",
        "shared_torso": False,
    }
    c.algo = {
        "learning_rate": 5e-4,
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
        c.total_env_steps = 8_192
        c.eval_every_updates = 0
        c.eval_episodes = 8
        c.checkpoint_every_updates = 0
        c.log_every_updates = 4
    elif variant is not None:
        raise ValueError(f"unknown variant {variant!r}; use ':quick' or no variant")
    return c
