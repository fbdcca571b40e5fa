"""Stateless action distributions over network outputs ("dist params").

Each distribution is a frozen dataclass whose methods take the dist params explicitly, so they
are pure, jittable and work for any leading dims (`[B]`, `[T, B]`, ...):

- `Categorical`: params are logits `[..., A]`; actions are int32 `[...]`.
- `Gaussian`: params are `{"mean": [..., D], "log_std": [..., D]}`; the distribution is over a
  pre-squash variable `u` `[..., D]`. With `tanh_squash=True` the environment action is
  `tanh(u)` mapped to the bounds, and `log_prob` is the density of `tanh(u)` (change of
  variables). The rollout stores `u`, never `tanh(u)`, so no `atanh` is ever needed.

Both expose `env_action(action, low, high)` so callers can treat them alike.
"""

import dataclasses
import math
from collections.abc import Mapping

import chex
import jax
import jax.numpy as jnp

Array = chex.Array
PRNGKey = chex.PRNGKey

_HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)


@dataclasses.dataclass(frozen=True)
class Categorical:
    """Categorical distribution over `A` discrete actions; params: logits `[..., A]`."""

    def sample(self, params: Array, key: PRNGKey) -> Array:
        """Samples actions `[...]` int32 from logits `[..., A]`."""
        return jax.random.categorical(key, params, axis=-1).astype(jnp.int32)

    def log_prob(self, params: Array, action: Array) -> Array:
        """`log pi(action)` `[...]` float32 for logits `[..., A]` and integer actions `[...]`."""
        chex.assert_equal_shape_prefix([params, action], jnp.ndim(action))
        log_pi = jax.nn.log_softmax(jnp.asarray(params, jnp.float32), axis=-1)
        action = action[..., None].astype(jnp.int32)
        return jnp.take_along_axis(log_pi, action, axis=-1)[..., 0]

    def entropy(self, params: Array) -> Array:
        """Entropy `-sum_a pi(a) log pi(a)` `[...]` float32 for logits `[..., A]`."""
        log_pi = jax.nn.log_softmax(jnp.asarray(params, jnp.float32), axis=-1)
        return -jnp.sum(jnp.exp(log_pi) * log_pi, axis=-1)

    def mode(self, params: Array) -> Array:
        """Most likely actions `[...]` int32 (argmax of the logits `[..., A]`)."""
        return jnp.argmax(params, axis=-1).astype(jnp.int32)

    def env_action(
        self, action: Array, low: Array | None = None, high: Array | None = None
    ) -> Array:
        """Returns `action` unchanged (discrete actions need no mapping); bounds are ignored."""
        del low, high
        return action


@dataclasses.dataclass(frozen=True)
class Gaussian:
    """Diagonal Gaussian over a pre-squash variable `u` `[..., D]`.

    Params: `{"mean": [..., D], "log_std": [..., D]}`. With `tanh_squash=True` the environment
    action is `tanh(u)` mapped to the bounds (`env_action`), and `log_prob` includes the tanh
    Jacobian: `log N(u) - sum_d log(1 - tanh(u_d)^2)`, computed stably as
    `log(1 - tanh(u)^2) = 2 (log 2 - u - softplus(-2u))`.

    Attributes:
        tanh_squash: whether the environment action is `tanh(u)` rather than `u` clipped.
    """

    tanh_squash: bool = False

    @staticmethod
    def _mean_log_std(params: Mapping[str, Array]) -> tuple[Array, Array]:
        mean = jnp.asarray(params["mean"], jnp.float32)
        log_std = jnp.asarray(params["log_std"], jnp.float32)
        chex.assert_equal_shape([mean, log_std])
        return mean, log_std

    def sample(self, params: Mapping[str, Array], key: PRNGKey) -> Array:
        """Samples `u = mean + std * eps` `[..., D]` float32 (pre-squash)."""
        mean, log_std = self._mean_log_std(params)
        return mean + jnp.exp(log_std) * jax.random.normal(key, mean.shape, jnp.float32)

    def log_prob(self, params: Mapping[str, Array], u: Array) -> Array:
        """Log density `[...]` summed over `D`: of `u`, or of `tanh(u)` with `tanh_squash`.

        Args:
            params: `{"mean": [..., D], "log_std": [..., D]}`.
            u: pre-squash samples `[..., D]` (as returned by `sample`).

        Returns:
            `log N(u; mean, std)` summed over `D`, minus `sum_d log(1 - tanh(u_d)^2)` with
            `tanh_squash`; float32 `[...]`, finite for any finite `u`.
        """
        mean, log_std = self._mean_log_std(params)
        u = jnp.asarray(u, jnp.float32)
        chex.assert_equal_shape([mean, u])
        z = (u - mean) * jnp.exp(-log_std)
        log_p = -0.5 * jnp.square(z) - log_std - _HALF_LOG_2PI
        if self.tanh_squash:
            log_p -= 2.0 * (math.log(2.0) - u - jax.nn.softplus(-2.0 * u))
        return jnp.sum(log_p, axis=-1)

    def entropy(self, params: Mapping[str, Array]) -> Array:
        """Entropy `[...]` of the Gaussian over `u`: `sum_d log_std_d + 0.5 log(2 pi e)`.

        Exact without squash. With `tanh_squash` this is still the pre-squash entropy, the usual
        proxy: the entropy of `tanh(u)` has no closed form.
        """
        _, log_std = self._mean_log_std(params)
        return jnp.sum(log_std + _HALF_LOG_2PI + 0.5, axis=-1)

    def mode(self, params: Mapping[str, Array]) -> Array:
        """The most likely `u`, the mean `[..., D]` (its `env_action` is the deterministic one)."""
        mean, _ = self._mean_log_std(params)
        return mean

    def env_action(self, u: Array, low: Array, high: Array) -> Array:
        """Maps pre-squash `u` `[..., D]` to environment actions within bounds `low, high` `[D]`.

        With `tanh_squash`: `low + (tanh(u) + 1) (high - low) / 2` (bounds must be finite).
        Otherwise `clip(u, low, high)`; infinite bounds leave that side unclipped.
        """
        u = jnp.asarray(u, jnp.float32)
        low = jnp.asarray(low, jnp.float32)
        high = jnp.asarray(high, jnp.float32)
        if self.tanh_squash:
            return low + (jnp.tanh(u) + 1.0) * (high - low) / 2.0
        return jnp.clip(u, low, high)
