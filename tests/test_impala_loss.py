"""IMPALA loss on hand-built trajectories: termination, truncation and reset-step masking."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxrl_dist.agents.impala import ImpalaConfig, impala_loss
from jaxrl_dist.types import Rollout

GAMMA = 0.9
CONFIG = ImpalaConfig(discount=GAMMA, entropy_cost=0.0, baseline_cost=1.0)
V = np.array([1.0, 2.0, 3.0, 4.0, 5.0], np.float32)  # values of obs[0..4]
R = np.array([0.0, 0.5, 0.25, 7.0, 2.0], np.float32)  # reward on arriving at obs[i]


def _rollout(terminated_at=None, truncated_at=None, reward=R):
    """T=4, B=1; the episode ends at obs[2]; transition 2 (obs[2] -> obs[3]) is the reset step."""
    term = np.zeros((5, 1), bool)
    trunc = np.zeros((5, 1), bool)
    if terminated_at is not None:
        term[terminated_at] = True
    if truncated_at is not None:
        trunc[truncated_at] = True
    return Rollout(
        obs=jnp.zeros((5, 1, 1)),
        reward=jnp.asarray(reward)[:, None],
        terminated=jnp.asarray(term),
        truncated=jnp.asarray(trunc),
        action=jnp.zeros((4, 1), jnp.int32),
        agent_extras={"log_prob": jnp.full((4, 1), np.log(0.5))},  # on-policy: rho = 1
        policy_version=jnp.zeros((4, 1), jnp.int32),
    )


def _loss(rollout, values=V):
    logits = jnp.zeros((5, 1, 2))  # pi(a) = 0.5 for both actions
    return impala_loss(logits, jnp.asarray(values)[:, None], rollout, CONFIG)[1]


def _expected(v_targets, q):
    """Baseline and pg losses from targets on the valid transitions 0, 1, 3."""
    valid = [0, 1, 3]
    errors = np.array([v_targets[t] - V[t] for t in valid])
    adv = np.array([q[t] - V[t] for t in valid])
    return 0.5 * np.mean(errors**2), -np.log(0.5) * np.mean(adv)


def test_truncation_bootstraps_from_final_observation_value():
    vs1 = R[2] + GAMMA * V[2]  # cut at the final obs: bootstrap from V(obs[2])
    vs3 = R[4] + GAMMA * V[4]
    vs0 = R[1] + GAMMA * vs1
    baseline, pg = _expected({0: vs0, 1: vs1, 3: vs3}, {0: vs0, 1: vs1, 3: vs3})
    m = _loss(_rollout(truncated_at=2))
    np.testing.assert_allclose(m["baseline_loss"], baseline, rtol=1e-5)
    np.testing.assert_allclose(m["pg_loss"], pg, rtol=1e-5)
    np.testing.assert_allclose(m["valid_fraction"], 0.75)


def test_termination_bootstraps_from_zero():
    vs1 = R[2]
    vs3 = R[4] + GAMMA * V[4]
    vs0 = R[1] + GAMMA * vs1
    baseline, pg = _expected({0: vs0, 1: vs1, 3: vs3}, {0: vs0, 1: vs1, 3: vs3})
    m = _loss(_rollout(terminated_at=2))
    np.testing.assert_allclose(m["baseline_loss"], baseline, rtol=1e-5)
    np.testing.assert_allclose(m["pg_loss"], pg, rtol=1e-5)


def test_terminated_and_truncated_together_is_a_termination():
    both = _loss(_rollout(terminated_at=2, truncated_at=2))
    term = _loss(_rollout(terminated_at=2))
    np.testing.assert_allclose(both["baseline_loss"], term["baseline_loss"], rtol=1e-6)


@pytest.mark.parametrize("end", ["terminated_at", "truncated_at"])
def test_reset_transition_is_masked(end):
    """The reset step's reward (EnvPool gives 0, but any value) cannot change the loss."""
    base = _loss(_rollout(**{end: 2}))
    reward = R.copy()
    reward[3] = -100.0
    changed = _loss(_rollout(**{end: 2}, reward=reward))
    for key in ("baseline_loss", "pg_loss"):
        np.testing.assert_allclose(changed[key], base[key], rtol=1e-6)


def test_without_episode_end_the_trace_runs_through():
    """No end: the target of step 0 depends on every later reward (guards against a cut trace)."""
    reward = R.copy()
    reward[3] = -100.0
    a = _loss(_rollout())
    b = _loss(_rollout(reward=reward))
    assert not np.isclose(a["baseline_loss"], b["baseline_loss"])


def test_off_policy_rho_is_clipped_in_targets_and_advantages():
    """Behaviour mu(a)=0.75, target pi(a)=0.5: rho = c = 2/3 (below the clip), hand-computed."""
    rho = 2.0 / 3.0
    rollout = _rollout()._replace(agent_extras={"log_prob": jnp.full((4, 1), np.log(0.75))})
    m = _loss(rollout)
    vs = {4: V[4]}  # bootstrap
    for t in (3, 2, 1, 0):
        delta = rho * (R[t + 1] + GAMMA * V[t + 1] - V[t])
        vs[t] = V[t] + delta + GAMMA * rho * (vs[t + 1] - V[t + 1])
    errors = np.array([vs[t] - V[t] for t in range(4)])
    adv = np.array([rho * (R[t + 1] + GAMMA * vs[t + 1] - V[t]) for t in range(4)])
    np.testing.assert_allclose(m["baseline_loss"], 0.5 * np.mean(errors**2), rtol=1e-5)
    np.testing.assert_allclose(m["pg_loss"], -np.log(0.5) * np.mean(adv), rtol=1e-5)
    np.testing.assert_allclose(m["rho_mean"], rho, rtol=1e-5)
    np.testing.assert_allclose(m["advantage_mean"], np.mean(adv), rtol=1e-5)
    assert m["rho_clipped_fraction"] == 0.0  # 2/3 is below rho-bar = 1


def test_the_diagnostics_count_truncated_weights_and_the_mean_advantage_on_valid_steps():
    """mu(a)=0.25 on steps 0 and 1 (rho = 2 > rho-bar = 1, truncated), 0.5 elsewhere; the reset
    transition 2 counts in neither the clipping share nor the mean advantage."""
    log_mu = np.log(np.array([0.25, 0.25, 0.25, 0.5], np.float32))[:, None]
    rollout = _rollout(terminated_at=2)._replace(agent_extras={"log_prob": jnp.asarray(log_mu)})
    m = _loss(rollout)
    np.testing.assert_allclose(m["rho_clipped_fraction"], 2.0 / 3.0, rtol=1e-6)  # steps 0, 1
    # Clipped at 1, steps 0 and 1 are on-policy targets: vs1 = R[2] (terminal), vs0 = R[1] +
    # GAMMA * vs1; step 3 bootstraps from V[4]. Advantages r + GAMMA * vs_{t+1} - V(t).
    adv = [R[1] + GAMMA * R[2] - V[0], R[2] - V[1], R[4] + GAMMA * V[4] - V[3]]
    np.testing.assert_allclose(m["advantage_mean"], np.mean(adv), rtol=1e-5)


def test_gradients_flow_only_where_they_should():
    """pg loss: no gradient into values (advantage stopped); baseline: none into the policy;
    the reset transition's logits get no gradient from any term (entropy included)."""
    config = ImpalaConfig(discount=GAMMA, entropy_cost=0.1)
    rollout = _rollout(truncated_at=2)
    logits = jnp.asarray(np.random.default_rng(0).normal(size=(5, 1, 2)), jnp.float32)
    values = jnp.asarray(V)[:, None]

    def term(name, lg, vl):
        return impala_loss(lg, vl, rollout, config)[1][name]

    d_pg_dv = jax.grad(lambda v: term("pg_loss", logits, v))(values)
    d_base_dl = jax.grad(lambda lg: term("baseline_loss", lg, values))(logits)
    d_loss_dl = jax.grad(lambda lg: impala_loss(lg, values, rollout, config)[0])(logits)
    np.testing.assert_array_equal(d_pg_dv, 0.0)
    np.testing.assert_array_equal(d_base_dl, 0.0)
    np.testing.assert_array_equal(d_loss_dl[2], 0.0)  # the reset transition obs[2] -> obs[3]
    assert np.abs(np.asarray(d_loss_dl)[[0, 1, 3]]).min() > 0  # valid transitions do learn
    d_base_dv = jax.grad(lambda v: term("baseline_loss", logits, v))(values)
    assert d_base_dv[2, 0] == 0.0  # V(final obs) is only a (stopped) bootstrap target
