"""R2D2 on gymnax CartPole-v1 with its velocities hidden, in the Anakin runtime: its replay of
whole sequences on the device (`data/device_sequences.py`), in one jitted program.

`r2d2_memory.py`'s agent, network and replay (sequences of 40 steps with the LSTM state at
their start, a burn-in of 10, 3-step double-Q targets with value rescaling, dueling, sequence
priorities with exponent 0.9, the Ape-X epsilon ladder over the envs, Adam 1e-3, a target copy
every 100 updates). On Anakin `batch_size` counts envs: 16 envs x 40 steps a rollout, so its
16 sequences, each sampled 8 times on average with 32 a batch, are followed by 4 updates; the
Sebulba config's one update per 160 env steps. Update-counted intervals count rollouts on
Anakin: an evaluation every 13 is every 8,320 env steps.
"""

import os

import ml_collections

from jaxrl_dist.config.cli import load_config_file

HERE = os.path.dirname(os.path.abspath(__file__))


def get_config(variant=None):
    suffix = f":{variant}" if variant else ""
    c = ml_collections.ConfigDict(load_config_file(os.path.join(HERE, "r2d2_memory.py" + suffix)))
    del c["sebulba"]  # its actors: Anakin has none
    c.runtime = "anakin"  # env_id CartPole-v1: gymnax's, env_kwargs.obs_indices as EnvPool's
    c.anakin = {"num_seeds": 1}
    c.replay = {**c.replay, "batch_size": c.batch_size}  # sequences per update
    c.batch_size = 16  # envs per seed
    c.eval_every_updates = 13
    c.checkpoint_every_updates = 0
    c.log_every_updates = 13
    if variant == "quick":
        c.total_env_steps = 16 * 40 * 6  # 6 rollouts; updates from the third (min_size 32)
        c.eval_every_updates = 0
        c.log_every_updates = 2
    return c
