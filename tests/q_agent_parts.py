"""The small Q network and learner state shared by the tests' own replay agents
(`test_seam_replay_agent.py`, `test_prioritized_agent.py`)."""

from typing import NamedTuple

import flax.linen as nn
import jax
import jax.numpy as jnp
import optax


class QNetwork(nn.Module):
    """Observations `[..., F]` -> Q-values `[..., num_actions]` (a 64-64 ReLU MLP)."""

    num_actions: int

    @nn.compact
    def __call__(self, obs):
        x = nn.relu(nn.Dense(64)(obs.astype(jnp.float32)))
        return nn.Dense(self.num_actions)(nn.relu(nn.Dense(64)(x)))


class QState(NamedTuple):
    params: dict
    target_params: dict
    opt_state: optax.OptState
    update_step: jax.Array
