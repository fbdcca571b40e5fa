"""Q-learning TD errors and the categorical (C51) projection: drop-ins for rlax's.

Same names, arguments and semantics as `rlax` 0.1.9 (`q_learning`, `double_q_learning`,
`categorical_l2_project`, `categorical_double_q_learning`): one transition each, time `t-1` the
state the action was taken in, time `t` the next state; `jax.vmap` over a batch. `discount_t` is
0 where the episode terminated (no bootstrap) and `gamma` elsewhere (an n-step transition: the
product of its discounts); a truncated episode keeps `gamma`, so the target bootstraps from the
value of the state where it was cut.
"""

import chex
import jax
import jax.numpy as jnp

Array = chex.Array
Numeric = chex.Numeric


def _maybe_stop(target: Array, stop_target_gradients: bool) -> Array:
    return jax.lax.stop_gradient(target) if stop_target_gradients else target


def q_learning(
    q_tm1: Array,
    a_tm1: Numeric,
    r_t: Numeric,
    discount_t: Numeric,
    q_t: Array,
    stop_target_gradients: bool = True,
) -> Numeric:
    """Q-learning TD error `r_t + discount_t * max_a q_t[a] - q_tm1[a_tm1]` (Watkins 1989).

    Args:
        q_tm1: Q-values at time t-1, `[A]`.
        a_tm1: the action taken at time t-1 (int scalar).
        r_t: reward at time t.
        discount_t: discount at time t (0 at a termination).
        q_t: Q-values at time t, `[A]` (the target network's, in DQN).
        stop_target_gradients: stop gradients through the target.

    Returns:
        The TD error (a scalar).
    """
    chex.assert_rank([q_tm1, a_tm1, r_t, discount_t, q_t], [1, 0, 0, 0, 1])
    chex.assert_type([q_tm1, a_tm1, r_t, discount_t, q_t], [float, int, float, float, float])
    target_tm1 = _maybe_stop(r_t + discount_t * jnp.max(q_t), stop_target_gradients)
    return target_tm1 - q_tm1[a_tm1]


def double_q_learning(
    q_tm1: Array,
    a_tm1: Numeric,
    r_t: Numeric,
    discount_t: Numeric,
    q_t_value: Array,
    q_t_selector: Array,
    stop_target_gradients: bool = True,
) -> Numeric:
    """Double Q-learning TD error (van Hasselt 2010; 2016): the action at time t is chosen by
    `q_t_selector` (the online network) and valued by `q_t_value` (the target network).

    Args:
        q_tm1: Q-values at time t-1, `[A]`.
        a_tm1: the action taken at time t-1 (int scalar).
        r_t: reward at time t.
        discount_t: discount at time t (0 at a termination).
        q_t_value: Q-values at time t that value the chosen action, `[A]`.
        q_t_selector: Q-values at time t that choose it (argmax; first on ties), `[A]`.
        stop_target_gradients: stop gradients through the target.

    Returns:
        The TD error (a scalar).
    """
    chex.assert_rank([q_tm1, a_tm1, r_t, discount_t, q_t_value, q_t_selector], [1, 0, 0, 0, 1, 1])
    chex.assert_type(
        [q_tm1, a_tm1, r_t, discount_t, q_t_value, q_t_selector],
        [float, int, float, float, float, float],
    )
    bootstrap = q_t_value[jnp.argmax(q_t_selector)]
    target_tm1 = _maybe_stop(r_t + discount_t * bootstrap, stop_target_gradients)
    return target_tm1 - q_tm1[a_tm1]


def categorical_l2_project(z_p: Array, probs: Array, z_q: Array) -> Array:
    """Projects the categorical distribution `(z_p, probs)` onto the support `z_q`, minimising the
    Cramér (L2 between CDFs) distance (Bellemare et al. 2017, Algorithm 1): each atom of `z_p`,
    clipped to `[z_q[0], z_q[-1]]`, splits its mass between its two neighbours in `z_q` in
    proportion to its distance from each. `z_q` must be increasing; its atoms need not be evenly
    spaced, and `len(z_q)` need not equal `len(z_p)`.

    Args:
        z_p: support of the source distribution, `[Kp]`.
        probs: its probabilities, `[Kp]`.
        z_q: the support to project onto, `[Kq]`, increasing.

    Returns:
        Probabilities on `z_q`, `[Kq]`.
    """
    chex.assert_rank([z_p, probs, z_q], 1)
    chex.assert_type([z_p, probs, z_q], float)
    z_p = jnp.clip(z_p, z_q[0], z_q[-1])[None, :]  # [1, Kp]
    gap_up = (jnp.roll(z_q, -1) - z_q)[:, None]  # z_q[i+1] - z_q[i]  [Kq, 1]
    gap_down = (z_q - jnp.roll(z_q, 1))[:, None]  # z_q[i] - z_q[i-1]
    # Zero where atoms coincide (and at the wrapped ends, where the gap is negative).
    inv_up = jnp.where(gap_up > 0, 1.0 / jnp.where(gap_up > 0, gap_up, 1.0), 0.0)
    inv_down = jnp.where(gap_down > 0, 1.0 / jnp.where(gap_down > 0, gap_down, 1.0), 0.0)
    delta = z_p - z_q[:, None]  # [Kq, Kp]: clip(z_p)[j] - z_q[i]
    above = (delta >= 0.0).astype(probs.dtype)
    # |z_p[j] - z_q[i]| in units of the gap on z_p[j]'s side of z_q[i].
    scaled = above * delta * inv_up - (1.0 - above) * delta * inv_down
    return jnp.sum(jnp.clip(1.0 - scaled, 0.0, 1.0) * probs[None, :], axis=-1)


def _mul_exp(x: Array, log_p: Array) -> Array:
    """`x * exp(log_p)`, zero where `exp(log_p)` is (distrax's `math.mul_exp`)."""
    p = jnp.exp(log_p)
    return jnp.where(p == 0, 0.0, x) * p


def _plain_cross_entropy(labels: Array, logits: Array) -> Array:
    return -jnp.sum(labels * jax.nn.log_softmax(logits), axis=-1)


@jax.custom_jvp
def _cross_entropy(labels: Array, logits: Array) -> Array:
    """`-sum(labels * log_softmax(logits))`, its value rounded as rlax 0.1.9 rounds it.

    rlax's `categorical_cross_entropy` is distrax's `Categorical(probs=labels).cross_entropy(
    Categorical(logits=logits))`: KL plus entropy, with the labels renormalised, their log
    passed through `log_softmax` in the KL (not in the entropy) and the logits through
    `log_softmax` twice. The value here repeats those operations in that order, so it equals
    rlax's to the bit (float32 cross-entropies otherwise differ by an ulp, beyond
    `assert_allclose`'s default rtol of 1e-7). Its derivative, though, is that of the plain
    formula: rlax's is NaN in the labels wherever a label is 0 (the derivative of `log(0)`).
    """
    probs = labels / jnp.sum(labels, axis=-1, keepdims=True)
    log_p = jnp.log(probs)
    log_p_kl = jax.nn.log_softmax(log_p)
    log_q = jax.nn.log_softmax(jax.nn.log_softmax(logits))
    kl = jnp.sum(_mul_exp(log_p_kl - log_q, log_p_kl), axis=-1)
    entropy = -jnp.sum(_mul_exp(log_p, log_p), axis=-1)
    return kl + entropy


@_cross_entropy.defjvp
def _cross_entropy_jvp(primals, tangents):
    _, tangent_out = jax.jvp(_plain_cross_entropy, primals, tangents)
    return _cross_entropy(*primals), tangent_out


def categorical_double_q_learning(
    q_atoms_tm1: Array,
    q_logits_tm1: Array,
    a_tm1: Numeric,
    r_t: Numeric,
    discount_t: Numeric,
    q_atoms_t: Array,
    q_logits_t: Array,
    q_t_selector: Array,
    stop_target_gradients: bool = True,
) -> Numeric:
    """Distributional (C51) double Q-learning loss (Bellemare et al. 2017; Rainbow, Hessel et al.
    2018): the target distribution at time t is that of the action `q_t_selector` picks, its
    atoms shifted to `r_t + discount_t * z`, projected back onto `q_atoms_tm1`; the loss is the
    cross-entropy of the logits of `a_tm1` at time t-1 against it, its value rounded as rlax's
    (see `_cross_entropy`), its gradient finite where a target atom has no mass.

    Args:
        q_atoms_tm1: atoms of the Q distribution at time t-1, `[K]`.
        q_logits_tm1: its logits per action, `[A, K]`.
        a_tm1: the action taken at time t-1 (int scalar).
        r_t: reward at time t.
        discount_t: discount at time t (0 at a termination).
        q_atoms_t: atoms at time t, `[K']`.
        q_logits_t: logits per action at time t, `[A, K']` (the target network's).
        q_t_selector: Q-values at time t that choose the action, `[A]` (the online network's
            expected values).
        stop_target_gradients: stop gradients through the projected target.

    Returns:
        The cross-entropy loss (a scalar).
    """
    chex.assert_rank(
        [q_atoms_tm1, q_logits_tm1, a_tm1, r_t, discount_t, q_atoms_t, q_logits_t, q_t_selector],
        [1, 2, 0, 0, 0, 1, 2, 1],
    )
    chex.assert_type(
        [q_atoms_tm1, q_logits_tm1, a_tm1, r_t, discount_t, q_atoms_t, q_logits_t, q_t_selector],
        [float, float, int, float, float, float, float, float],
    )
    target_z = r_t + discount_t * q_atoms_t
    p_target_z = jax.nn.softmax(q_logits_t[jnp.argmax(q_t_selector)])
    target = categorical_l2_project(target_z, p_target_z, q_atoms_tm1)
    target = _maybe_stop(target, stop_target_gradients)
    return _cross_entropy(target, q_logits_tm1[a_tm1])
