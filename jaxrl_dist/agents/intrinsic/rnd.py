"""Random network distillation (Burda et al. 2018), pure: the intrinsic reward of a batch and
its predictor's update, in one jittable step.

A fixed, randomly initialised *target* network embeds each observation; a *predictor* is
trained to match it. Observations seen often are predicted well, new ones badly, so the
prediction error is a novelty reward. As in the paper:

- observations are whitened by running statistics and clipped to `[-obs_clip, obs_clip]`
  before both networks (MLP torsos; image frames go to the run's image torso as they are: it
  scales them to [0, 1], where the paper whitens each pixel);
- the reward of transition `t` is the error at the observation it arrives at, `obs[t + 1]`,
  measured with the predictor before this batch trains it;
- it is divided by a running standard deviation of the intrinsic *returns*: a per-column
  discounted sum of the rewards, carried from batch to batch (the paper's
  `RewardForwardFilter`, one per env);
- the predictor trains on a random `update_proportion` of the batch's observations, one Adam
  step per learner update (the paper's code: one per PPO minibatch).

A column of the learner batch stands for one env: exactly on Anakin (each seed's envs, in
order); on Sebulba the env that filled that column of the batch (the statistic is a scale: a
column that changes env mixes two streams of the same distribution).
"""

from __future__ import annotations

import dataclasses
from typing import Any, NamedTuple

import flax.linen as nn
import jax
import jax.numpy as jnp
import optax

from jaxrl_dist.agents.common import masked_mean
from jaxrl_dist.agents.intrinsic.config import IntrinsicConfig
from jaxrl_dist.envs import EnvSpec
from jaxrl_dist.networks import TORSOS, NetworkConfig, resolve_torso
from jaxrl_dist.networks.torsos import CONV_TORSOS, flatten_obs, make_torso
from jaxrl_dist.ops.running_stats import (
    RunningStats,
    init_running_stats,
    normalize,
    update_running_stats,
)
from jaxrl_dist.types import PyTree, Rollout, split_observation


class RNDState(NamedTuple):
    """What RND keeps in the learner state (checkpointed with it).

    Attributes:
      predictor: the trained network's params.
      target: the fixed random network's params.
      opt_state: the predictor's Adam state.
      obs_stats: running moments of the observations `[*obs_shape]` (vector observations).
      return_stats: running moments `[]` of the intrinsic returns.
      return_filter: `[B]` each column's discounted intrinsic return so far.
      rng: `[2]` uint32 key for the predictor's sample of each batch.
    """

    predictor: PyTree
    target: PyTree
    opt_state: PyTree
    obs_stats: RunningStats
    return_stats: RunningStats
    return_filter: jax.Array
    rng: jax.Array


class RNDNetwork(nn.Module):
    """`obs [..., *obs_shape]` -> embedding `[..., embedding_size]`: a torso (the MLP with
    ReLUs, or the run's image torso), `extra_layers` more ReLU layers, a linear output."""

    obs_shape: tuple[int, ...]
    torso_name: str
    hidden_sizes: tuple[int, ...]
    embedding_size: int
    extra_layers: int = 0

    @nn.compact
    def __call__(self, obs: jax.Array) -> jax.Array:
        lead, flat = flatten_obs(obs, self.obs_shape)
        x = make_torso(self.torso_name, self.hidden_sizes, "relu", jnp.float32)(flat)
        for _ in range(self.extra_layers):
            x = nn.relu(nn.Dense(self.hidden_sizes[-1])(x))
        return nn.Dense(self.embedding_size)(x).reshape((*lead, self.embedding_size))


@dataclasses.dataclass(frozen=True)
class RND:
    """RND for one env's observations and a learner batch of `num_columns` envs.

    `step(state, rollout) -> (state, r_int [T, B], metrics)` is the whole per-batch work."""

    config: IntrinsicConfig
    obs_shape: tuple[int, ...]
    torso_name: str
    num_columns: int

    @property
    def whitens(self) -> bool:
        return self.torso_name not in CONV_TORSOS  # the shipped image torsos scale frames

    def _network(self, extra_layers: int) -> RNDNetwork:
        c = self.config
        sizes = c.hidden_sizes
        return RNDNetwork(self.obs_shape, self.torso_name, sizes, c.embedding_size, extra_layers)

    @property
    def _optimizer(self) -> optax.GradientTransformation:
        return optax.adam(self.config.learning_rate)

    def init(self, key: jax.Array) -> RNDState:
        obs = jnp.zeros((1, *self.obs_shape), jnp.float32 if self.whitens else jnp.uint8)
        target_key, predictor_key, rng = jax.random.split(key, 3)
        predictor = self._network(1).init(predictor_key, obs)
        return RNDState(
            predictor=predictor,
            target=self._network(0).init(target_key, obs),
            opt_state=self._optimizer.init(predictor),
            obs_stats=init_running_stats(self.obs_shape if self.whitens else ()),
            return_stats=init_running_stats(()),
            return_filter=jnp.zeros((self.num_columns,), jnp.float32),
            rng=rng,
        )

    def _inputs(self, stats: RunningStats, view: jax.Array) -> jax.Array:
        if not self.whitens:
            return view
        return normalize(stats, view.astype(jnp.float32), clip=self.config.obs_clip)

    def step(self, state: RNDState, rollout: Rollout) -> tuple[RNDState, jax.Array, dict]:
        """The intrinsic rewards `[T, B]` of `rollout`'s transitions (normalised), and the
        state after the predictor learned from this batch's observations."""
        view = split_observation(rollout.obs)[0][1:]  # [T, B, ...]: where transitions arrive
        num_columns = view.shape[1]
        if num_columns != self.num_columns:
            raise ValueError(
                f"RND was built for learner batches of {self.num_columns} envs, got "
                f"{num_columns}; build it with the run's config.batch_size"
            )
        obs_stats = state.obs_stats
        if self.whitens:
            obs_stats = update_running_stats(obs_stats, view.astype(jnp.float32))
        x = self._inputs(obs_stats, view)
        target = jax.lax.stop_gradient(self._network(0).apply(state.target, x))
        rng, key = jax.random.split(state.rng)
        sample = jax.random.bernoulli(key, self.config.update_proportion, view.shape[:2])
        sample = sample.astype(jnp.float32)

        def loss(predictor):
            error = jnp.mean(jnp.square(self._network(1).apply(predictor, x) - target), -1)
            return masked_mean(error, sample), error

        (predictor_loss, error), grads = jax.value_and_grad(loss, has_aux=True)(state.predictor)
        updates, opt_state = self._optimizer.update(grads, state.opt_state, state.predictor)
        predictor = optax.apply_updates(state.predictor, updates)

        r_raw = jax.lax.stop_gradient(error)
        discount = self.config.discount

        def forward(running, r_t):
            running = running * discount + r_t
            return running, running

        return_filter, returns = jax.lax.scan(forward, state.return_filter, r_raw)
        return_stats = update_running_stats(state.return_stats, returns)
        r_int = r_raw / jnp.sqrt(return_stats.var + 1e-8)
        new_state = RNDState(
            predictor, state.target, opt_state, obs_stats, return_stats, return_filter, rng
        )
        metrics = {
            "intrinsic_reward": jnp.mean(r_int),
            "intrinsic_reward_raw": jnp.mean(r_raw),
            "intrinsic_return_std": jnp.sqrt(return_stats.var),
            "predictor_loss": predictor_loss,
        }
        return new_state, r_int, metrics


def make_rnd(
    config: IntrinsicConfig, network_config: NetworkConfig, env_spec: EnvSpec, num_columns: int
) -> RND:
    """RND for `env_spec`'s observations, learner batches of `num_columns` envs; image frames
    use `network_config`'s image torso. Raises ValueError (one line) for an observation it
    cannot embed."""
    obs_shape = tuple(int(d) for d in env_spec.obs_shape)
    own = network_config.torso not in TORSOS  # a user's torso: whatever the observations' rank
    if own or len(obs_shape) in (1, 3):
        # RND builds it with its own fields (sizes, ReLU, float32) on whitened observations.
        torso = resolve_torso(network_config, obs_shape, jnp.float32)
    else:
        torso = "mlp"
    return RND(config, obs_shape, torso, num_columns)


class IntrinsicLearnerState(NamedTuple):
    """An agent's learner state with RND's beside it (checkpointed whole)."""

    agent: Any
    rnd: RNDState

    @property
    def update_step(self) -> jax.Array:
        return self.agent.update_step
