"""The JAX env wrapper has EnvPool's semantics: checked step for step against EnvPool's CartPole
on the same action sequence (terminations, truncations at the time limit, auto-reset steps)."""

import envpool
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxrl_dist.envs.jax_envs import jax_env_problem, make_jax_env

MAX_STEPS = 30  # short episodes, so the time limit truncates some and the pole ends others


def _synced(state, obs, time):
    """The wrapper's state with CartPole's physics set to EnvPool's observation (the two envs
    draw their reset states from different generators; the dynamics must agree from there)."""
    x, x_dot, theta, theta_dot = (jnp.float32(v) for v in obs)
    inner = state.inner.replace(x=x, x_dot=x_dot, theta=theta, theta_dot=theta_dot, time=time)
    return state._replace(inner=inner)


def test_cartpole_matches_envpool_step_for_step():
    pool = envpool.make(
        "CartPole-v1", env_type="gymnasium", num_envs=1, seed=3, max_episode_steps=MAX_STEPS
    )
    env = make_jax_env("CartPole-v1", {"max_episode_steps": MAX_STEPS})
    step = jax.jit(env.step_one)
    actions = np.random.default_rng(0).integers(0, 2, 400)
    obs, info = pool.reset()
    state, _ = env.reset_one(jax.random.PRNGKey(0))
    state = _synced(state, obs[0], 0)
    seen = {"terminated": 0, "truncated": 0, "reset": 0}
    for a in actions:
        state, ts = step(state, jnp.int32(a))
        obs, reward, terminated, truncated, info = pool.step(np.array([a]))
        if info["elapsed_step"][0] == 0:  # EnvPool's reset step: a new random start
            seen["reset"] += 1
            assert not bool(state.needs_reset)
            np.testing.assert_array_equal(
                [ts.reward, ts.terminated, ts.truncated], [0.0, False, False]
            )
        else:
            np.testing.assert_allclose(np.asarray(ts.obs), obs[0], rtol=1e-5, atol=1e-5)
            assert float(ts.reward) == reward[0]
            assert bool(ts.terminated) == terminated[0]
            assert bool(ts.truncated) == truncated[0]
            assert bool(state.needs_reset) == (terminated[0] or truncated[0])
        seen["terminated"] += int(terminated[0])
        seen["truncated"] += int(truncated[0])
        state = _synced(state, obs[0], int(info["elapsed_step"][0]))
    assert all(count >= 3 for count in seen.values()), seen


def test_reset_step_ignores_the_action_and_keys_live_in_the_state():
    env = make_jax_env("CartPole-v1", {"max_episode_steps": 2})
    state, first = env.reset_one(jax.random.PRNGKey(1))
    state, ts = env.step_one(state, jnp.int32(1))
    state, ts = env.step_one(state, jnp.int32(1))
    assert bool(ts.truncated) and not bool(ts.terminated) and bool(state.needs_reset)
    outs = [env.step_one(state, jnp.int32(a)) for a in (0, 1)]
    np.testing.assert_array_equal(np.asarray(outs[0][1].obs), np.asarray(outs[1][1].obs))
    assert float(outs[0][1].reward) == 0.0
    # The same state steps the same way: the env's randomness is its own key, not a global one.
    again = env.step_one(state, jnp.int32(0))
    np.testing.assert_array_equal(np.asarray(again[1].obs), np.asarray(outs[0][1].obs))


@pytest.mark.parametrize(
    ("env_id", "kwargs", "expect"),
    [
        ("Pong-v5", {}, "is not a JAX env"),
        ("CartPol-v1", {}, "did you mean CartPole-v1"),
        ("CartPole-v1", {"gravity": 3.0}, "rejected by gymnax"),
    ],
)
def test_bad_env_is_one_line(env_id, kwargs, expect):
    problem = jax_env_problem(env_id, kwargs)
    assert expect in problem and "\n" not in problem


def test_minatar_breakout_spec():
    spec = make_jax_env("Breakout-MinAtar", {}).spec
    assert spec.num_actions == 3 and spec.obs_shape == (10, 10, 4)
