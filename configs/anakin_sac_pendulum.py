"""SAC on gymnax Pendulum-v1 in the Anakin runtime: the envs, the actor, the replay and the
learner in one jitted program.

`sac_pendulum.py`'s agent, network and replay (CleanRL's hyperparameters: batch 256, Polyak
0.005, Adam 3e-4 / 1e-3, learned temperature), acted by 8 envs x 4 steps per rollout and
learned from at one gradient step per env step: each rollout of 32 steps is followed by 32
updates (`replay.batch_size` is the learner's batch here; on Anakin `batch_size` counts the
envs of a seed). Update-counted intervals count rollouts on Anakin.
"""

import os

import ml_collections

from jaxrl_dist.config.cli import load_config_file

HERE = os.path.dirname(os.path.abspath(__file__))


def get_config(variant=None):
    suffix = f":{variant}" if variant else ""
    c = ml_collections.ConfigDict(load_config_file(os.path.join(HERE, "sac_pendulum.py" + suffix)))
    del c["sebulba"]  # Anakin has no actor threads
    c.runtime = "anakin"  # env_id Pendulum-v1: gymnax's
    c.anakin = {}
    c.anakin.num_seeds = 1
    c.replay = {**c.replay, "batch_size": c.batch_size}  # transitions per update
    c.batch_size = 8  # envs per seed
    c.unroll_length = 4
    c.eval_every_updates = 100  # every 3,200 env steps
    c.checkpoint_every_updates = 0
    c.log_every_updates = 20
    if variant == "quick":
        c.eval_every_updates = 0
        c.log_every_updates = 4
    return c
