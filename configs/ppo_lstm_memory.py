"""PPO with an LSTM on CartPole-v1 with its velocities hidden: a task that needs memory.

`env_kwargs.obs_indices=(0, 2)` keeps the cart position and the pole angle; the velocities
must be inferred from successive observations. `--config.network.core=none` runs the same agent
without memory (the README's comparison). Built on `ppo_cartpole.py`: the same PPO, an LSTM of
64 units after a (64,) torso (separate actor and critic, each with its own core), whole segments
of 32 steps per minibatch, each unrolled from the state the actor stored at its start.
"""

import os

import ml_collections

from jaxrl_dist.config.cli import load_config_file

HERE = os.path.dirname(os.path.abspath(__file__))


def get_config(variant=None):
    suffix = f":{variant}" if variant else ""
    c = ml_collections.ConfigDict(load_config_file(os.path.join(HERE, "ppo_cartpole.py" + suffix)))
    c.env_kwargs = {"obs_indices": (0, 2)}
    if variant is None:
        c.total_env_steps = 500_000
    c.network = {**c.network, "hidden_sizes": (64,), "core": "lstm", "core_size": 64}
    return c
