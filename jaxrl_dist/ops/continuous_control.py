"""The off-policy actor-critic losses for continuous actions: SAC and TD3 (DDPG its special
case), per transition over a batch, pure.

Shapes: a batch of `B` transitions; the critics are an ensemble of `E` (twin critics: 2; DDPG:
1) and their values come stacked `[E, B]`. rlax naming: time `t-1` is the state the action was
taken in, `t` the next state; `discount_t` is 0 where the episode terminated and gamma
elsewhere (an n-step transition: the product of its discounts), so a truncated episode still
bootstraps. Actions live in `[-1, 1]^D` (the agents map them to the env's bounds), which is
where TD3's noises and SAC's target entropy are measured.

- SAC (Haarnoja et al. 2018, "Soft Actor-Critic Algorithms and Applications", the version
  with a learned temperature): `sac_critic_loss`, `sac_actor_loss`, `sac_temperature_loss`.
- TD3 (Fujimoto et al. 2018): `td3_critic_loss` (clipped double-Q; with one critic it is
  DDPG's, Lillicrap et al. 2016), `deterministic_actor_loss`, `smoothed_target_action`.

Every loss is `[B]` per transition, so a prioritized replay's importance weights can weigh
them before the mean; the targets are stop-gradiented.
"""

from __future__ import annotations

import chex
import jax
import jax.numpy as jnp

Array = chex.Array
Numeric = chex.Numeric


def _ensemble(q: Array, batch: int) -> None:
    chex.assert_rank(q, 2)
    chex.assert_axis_dimension(q, 1, batch)


def clipped_double_q_target(
    r_t: Array, discount_t: Array, q_t: Array, entropy_bonus_t: Array | None = None
) -> Array:
    """`r_t + discount_t * (min_e q_t[e] + entropy_bonus_t)` `[B]`, stop-gradiented: the
    critics' common target (TD3's clipped double-Q; SAC adds the soft value's `-alpha log pi`).

    Args:
      r_t: `[B]` rewards.
      discount_t: `[B]` discounts (0 at a termination).
      q_t: `[E, B]` the target critics' values of the next state and the next action.
      entropy_bonus_t: `[B]` added to the minimum (SAC: `-alpha * log_pi_t`), or None.
    """
    chex.assert_rank([r_t, discount_t], 1)
    _ensemble(q_t, r_t.shape[0])
    v_t = jnp.min(q_t, axis=0)
    if entropy_bonus_t is not None:
        chex.assert_equal_shape([v_t, entropy_bonus_t])
        v_t = v_t + entropy_bonus_t
    return jax.lax.stop_gradient(r_t + discount_t * v_t)


def _critic_loss(q_tm1: Array, target_tm1: Array) -> Array:
    """`sum_e 0.5 (q_tm1[e] - target)^2` `[B]`: each critic regressed on the one target."""
    _ensemble(q_tm1, target_tm1.shape[0])
    return jnp.sum(0.5 * jnp.square(q_tm1 - target_tm1[None]), axis=0)


def sac_critic_loss(
    q_tm1: Array,
    r_t: Array,
    discount_t: Array,
    q_t: Array,
    log_pi_t: Array,
    alpha: Numeric,
) -> Array:
    """SAC's soft Q loss `[B]` (Haarnoja et al. 2018, eq. 5 with clipped double-Q):
    `sum_e 0.5 (q_tm1[e] - y)^2`, `y = r_t + discount_t (min_e q_t[e] - alpha log_pi_t)`.

    Args:
      q_tm1: `[E, B]` the critics' values of the transitions' state and action.
      r_t, discount_t: `[B]`.
      q_t: `[E, B]` the target critics' values of the next state and an action the current
        policy samples there.
      log_pi_t: `[B]` that action's log-probability (the squashed Gaussian's).
      alpha: the temperature (a scalar; not differentiated).
    """
    bonus = -jax.lax.stop_gradient(alpha) * log_pi_t
    return _critic_loss(q_tm1, clipped_double_q_target(r_t, discount_t, q_t, bonus))


def sac_actor_loss(q: Array, log_pi: Array, alpha: Numeric) -> Array:
    """SAC's policy loss `[B]` (eq. 7, reparameterised): `alpha log_pi - min_e q[e]`, for an
    action sampled by the policy with the reparameterisation trick (so `q` and `log_pi` carry
    the policy's gradient; the critics' params are not trained by it).

    Args:
      q: `[E, B]` the critics' values of the state and the sampled action.
      log_pi: `[B]` the sampled action's log-probability.
      alpha: the temperature (a scalar; not differentiated).
    """
    _ensemble(q, log_pi.shape[0])
    return jax.lax.stop_gradient(alpha) * log_pi - jnp.min(q, axis=0)


def sac_temperature_loss(log_alpha: Array, log_pi: Array, target_entropy: Numeric) -> Array:
    """SAC's temperature loss `[B]` (eq. 18): `-alpha (log_pi + target_entropy)` with `alpha
    = exp(log_alpha)`: alpha rises while the policy's entropy `-log_pi` is below the target
    and falls above it. Differentiated in `log_alpha` only.

    Args:
      log_alpha: `[]` the learned log-temperature.
      log_pi: `[B]` log-probabilities of actions the current policy sampled.
      target_entropy: the entropy aimed at (`-D` by default: `-|A|`).
    """
    chex.assert_rank(log_alpha, 0)
    chex.assert_rank(log_pi, 1)
    return -jnp.exp(log_alpha) * jax.lax.stop_gradient(log_pi + target_entropy)


def td3_critic_loss(q_tm1: Array, r_t: Array, discount_t: Array, q_t: Array) -> Array:
    """TD3's clipped double-Q loss `[B]` (Fujimoto et al. 2018, eq. 10): `sum_e 0.5 (q_tm1[e]
    - y)^2`, `y = r_t + discount_t min_e q_t[e]`. With one critic (`E = 1`) it is DDPG's.

    Args:
      q_tm1: `[E, B]` the critics' values of the transitions' state and action.
      r_t, discount_t: `[B]`.
      q_t: `[E, B]` the target critics' values of the next state and the target policy's
        (smoothed) action there.
    """
    return _critic_loss(q_tm1, clipped_double_q_target(r_t, discount_t, q_t))


def deterministic_actor_loss(q: Array) -> Array:
    """The deterministic policy gradient's loss `[B]`: `-q` (Silver et al. 2014), `q` `[B]`
    the first critic's value of the state and the policy's action (TD3 and DDPG)."""
    chex.assert_rank(q, 1)
    return -q


def smoothed_target_action(
    a_t: Array, key: jax.Array, noise_std: Numeric, noise_clip: Numeric
) -> Array:
    """TD3's target policy smoothing (eq. 14): `clip(a_t + clip(eps, -c, c), -1, 1)` `[B, D]`,
    `eps ~ N(0, noise_std^2)` per entry. `noise_std = 0` gives `a_t` (DDPG's target).

    Args:
      a_t: `[B, D]` the target policy's actions in `[-1, 1]`.
      key: PRNG key of the noise.
      noise_std, noise_clip: the noise's scale and its clip `c`, in `[-1, 1]`'s units.
    """
    chex.assert_rank(a_t, 2)
    noise = noise_std * jax.random.normal(key, a_t.shape, jnp.float32)
    return jnp.clip(a_t + jnp.clip(noise, -noise_clip, noise_clip), -1.0, 1.0)
