"""R2D2 on CartPole-v1 with its velocities hidden: recurrent Q-learning on a task that needs memory.

`env_kwargs.obs_indices=(0, 2)` keeps the cart position and the pole angle (as in
`ppo_lstm_memory.py`). R2D2's structure (Kapturowski et al. 2019) sized for CartPole: sequences
of 40 steps (an actor's segments) with the LSTM state stored at their start, a burn-in of 10,
3-step double-Q targets inside the sequence with value rescaling, dueling, priorities
`0.9 max + 0.1 mean` of |TD| (exponent 0.9, importance exponent 0.6), the Ape-X epsilon ladder
(0.4, alpha 7) over 16 envs, a (64,) torso and an LSTM of 64 units, Adam 1e-3, a target copy
every 100 updates. The replay counts sequences: 32 per update, each sampled 8 times on average
(160 env steps per update).
"""

import ml_collections


def get_config(variant=None):
    c = ml_collections.ConfigDict()
    c.algorithm = "r2d2"
    c.env_id = "CartPole-v1"
    c.env_kwargs = {"obs_indices": (0, 2)}
    c.seed = 0
    c.sebulba = {}
    c.sebulba.num_actor_threads = 1
    c.sebulba.envs_per_actor = 16
    c.sebulba.async_envs = True
    c.unroll_length = 40  # the sequence length
    c.batch_size = 32  # sequences per update
    c.total_env_steps = 300_000
    c.stop_at_eval_return = 475.0
    c.eval_every_updates = 50  # every 8k env steps
    c.eval_episodes = 10
    c.eval_mode = "greedy"
    c.checkpoint_every_updates = 500
    c.log_every_updates = 25
    c.replay = {
        "capacity": 2_000,  # sequences (80k env steps)
        "min_size": 32,
        "samples_per_insert": 8.0,
        "priority_exponent": 0.9,
    }
    c.network = {
        "torso": "mlp",
        "hidden_sizes": (64,),
        "activation": "relu",
        "core": "lstm",
        "core_size": 64,
    }
    c.algo = {
        "learning_rate": 1e-3,
        "adam_eps": 1e-8,
        "max_grad_norm": 10.0,
        "discount": 0.99,
        "n_step": 3,
        "burn_in": 10,
        "target_period": 100,
    }
    if variant == "quick":
        c.learning_curve = False  # a smoke run: no plot (matplotlib costs ~0.5 s a run)
        c.total_env_steps = 6_400
        c.stop_at_eval_return = None
        c.eval_every_updates = 0
        c.eval_episodes = 4
        c.checkpoint_every_updates = 0
        c.log_every_updates = 5
    elif variant is not None:
        raise ValueError(f"unknown variant {variant!r}; use ':quick' or no variant")
    return c
