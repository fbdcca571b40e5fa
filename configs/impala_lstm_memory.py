"""IMPALA with an LSTM on CartPole-v1 with its velocities hidden: a task that needs memory.

`env_kwargs.obs_indices=(0, 2)` keeps the cart position and the pole angle; the velocities
must be inferred from successive observations. `--config.network.core=none` runs the same agent
without memory (the README's comparison). Built on `impala_cartpole.py` (V-trace, Adam 1e-3,
reward scale 0.1, separate actor and critic): an LSTM of 64 units after a (64,) torso, each
segment of 20 steps unrolled from the state the actor stored at its start. The Python actor
loop: `obs_indices` cuts observations on the host (the XLA loop refuses it).
"""

import os

import ml_collections

from jaxrl_dist.config.cli import load_config_file

HERE = os.path.dirname(os.path.abspath(__file__))


def get_config(variant=None):
    suffix = f":{variant}" if variant else ""
    c = ml_collections.ConfigDict(
        load_config_file(os.path.join(HERE, "impala_cartpole.py" + suffix))
    )
    c.env_kwargs = {"obs_indices": (0, 2)}
    c.sebulba.actor_loop = "python"
    c.sebulba.async_envs = True
    if variant is None:
        c.total_env_steps = 500_000
    c.network = {**c.network, "hidden_sizes": (64,), "core": "lstm", "core_size": 64}
    return c
