"""Rainbow on gymnax CartPole-v1 in the Anakin runtime, its prioritized replay on the device.

`rainbow_cartpole.py`'s agent, network and replay (C51 on [0, 100], noisy nets, dueling,
double Q, 3-step returns, priorities alpha 0.5 and beta 0.4 -> 1, Adam 1e-3, a target copy
every 100 updates), acted by 16 envs x 16 steps per rollout. `replay.batch_size` is the
learner's batch here (on Anakin `batch_size` counts envs): the Sebulba config's 128
transitions, each sampled 8 times on average, so every rollout of 256 steps is followed by 16
updates, the Sebulba config's one update per 16 steps. Update-counted intervals count rollouts
on Anakin (one rollout and its 16 updates): an evaluation every 32 is every 8,192 env steps.
"""

import os

import ml_collections

from jaxrl_dist.config.cli import load_config_file

HERE = os.path.dirname(os.path.abspath(__file__))


def get_config(variant=None):
    suffix = f":{variant}" if variant else ""
    c = ml_collections.ConfigDict(
        load_config_file(os.path.join(HERE, "rainbow_cartpole.py" + suffix))
    )
    del c["sebulba"]  # Rainbow CartPole's actors: Anakin has none
    c.runtime = "anakin"  # env_id CartPole-v1: gymnax's
    c.anakin = {}
    c.anakin.num_seeds = 1
    c.replay = {**c.replay, "batch_size": c.batch_size}  # transitions per update
    c.batch_size = 16  # envs per seed
    c.unroll_length = 16
    c.eval_every_updates = 32
    c.checkpoint_every_updates = 0
    c.log_every_updates = 8
    if variant == "quick":
        c.total_env_steps = 4_096
        c.eval_every_updates = 0
        c.log_every_updates = 4
        c.replay = {**c.replay, "min_size": 512}
    return c
