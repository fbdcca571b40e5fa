"""R2D2: the sequence replay, the burn-in, sequence priorities and value rescaling, and a run."""

import functools
import math
import threading

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxrl_dist import ops
from jaxrl_dist.agents.base import ActorIdentity, RunShape
from jaxrl_dist.agents.r2d2 import (
    R2D2Config,
    make_r2d2,
    recurrent_q_model,
    sequence_priorities,
    sequence_td_errors,
)
from jaxrl_dist.config import ConfigError
from jaxrl_dist.config.cli import load_config
from jaxrl_dist.config.engines import get_engine
from jaxrl_dist.data import flows, snapshot
from jaxrl_dist.data.base import QueueItem
from jaxrl_dist.data.sequences import SequenceReplay
from jaxrl_dist.envs import env_spec
from jaxrl_dist.networks import NetworkConfig
from jaxrl_dist.networks.cores import reset_core_state
from jaxrl_dist.run.preflight import prepare
from jaxrl_dist.types import Rollout

SPEC = env_spec("CartPole-v1", {"obs_indices": (0, 2)})
T, B, K = 10, 6, 4


def _segments(width, seed=0, unroll=T):
    """`width` segments: obs `[T + 1, width, 2]`, each column's core state `[1, width, 3]`
    marked with its column, a few episode ends."""
    rng = np.random.default_rng(seed)
    ended = rng.random((unroll + 1, width)) < 0.1
    return Rollout(
        obs=rng.normal(size=(unroll + 1, width, 2)).astype(np.float32),
        reward=rng.normal(size=(unroll + 1, width)).astype(np.float32),
        terminated=ended,
        truncated=np.zeros_like(ended),
        action=rng.integers(0, 2, (unroll, width)).astype(np.int32),
        agent_extras={},
        policy_version=np.zeros((unroll, width), np.int32),
        core_state=np.broadcast_to(
            np.arange(width, dtype=np.float32)[None, :, None], (1, width, 3)
        ).copy(),
    )


def _replay(capacity=8, batch=512, seed=0):
    return SequenceReplay(
        capacity=capacity,
        min_size=1,
        samples_per_insert=1.0,
        tolerance=math.inf,
        batch_size=batch,
        seed=seed,
        stop=threading.Event(),
        priority_exponent=1.0,
    )


def test_sequence_replay_draws_whole_segments_with_their_state_by_priority():
    replay, rollout = _replay(), _segments(4)
    replay.write(QueueItem(0, rollout))
    batch = replay.read(0)
    drawn = batch.sample_ids[:, 0]
    assert batch.data.obs.shape == (T + 1, 512, 2)
    np.testing.assert_array_equal(batch.data.obs, rollout.obs[:, drawn])
    np.testing.assert_array_equal(batch.data.core_state, rollout.core_state[:, drawn])
    np.testing.assert_allclose(batch.data.agent_extras["replay_probability"], 0.25)
    assert (batch.data.agent_extras["replay_count"] == 4).all()
    # segment 2 gets 97 times the others' priority: drawn about 97 / 100 of the time
    replay.update_priorities(np.array([[s, 1] for s in range(4)]), np.array([1, 1, 97, 1.0]))
    drawn = replay.read(1).sample_ids[:, 0]
    assert abs(np.mean(drawn == 2) - 0.97) < 0.03
    # a priority for a slot written again since it was drawn is skipped
    replay.write(QueueItem(0, _segments(4, seed=1)))  # slots 4..7
    replay.write(QueueItem(0, _segments(4, seed=2)))  # slots 0..3 again, generation 3
    replay.update_priorities(np.array([[2, 1]]), np.array([1e6]))
    assert np.mean(replay.read(2).sample_ids[:, 0] == 2) < 0.5


def test_sequence_replay_snapshot_restores_priorities_and_draws():
    replay = _replay(seed=3)
    replay.write(QueueItem(0, _segments(5)))
    replay.update_priorities(np.array([[1, 1], [3, 1]]), np.array([5.0, 9.0]))
    arrays = snapshot.from_bytes(snapshot.to_bytes(replay.snapshot()))
    again = _replay(seed=4)
    again.restore(arrays)
    np.testing.assert_array_equal(replay.read(0).sample_ids, again.read(0).sample_ids)


NETWORK = NetworkConfig(torso="mlp", hidden_sizes=(8,), core="lstm", core_size=6)


def _agent(burn_in=K, **kwargs):
    config = R2D2Config(burn_in=burn_in, n_step=3, discount=0.9, **kwargs)
    return config, make_r2d2(config, NETWORK, SPEC, RunShape(10_000, 100))


def _sequence(seed=0):
    rollout = _segments(B, seed)
    core = jax.random.normal(jax.random.PRNGKey(seed), (2, 1, B, 6))  # (c, h), non-zero
    return jax.tree.map(jnp.asarray, rollout._replace(core_state=(core[0], core[1])))


def _model(agent):
    """The agent's recurrent Q model, built as `make_r2d2` builds it."""
    return recurrent_q_model(R2D2Config(), NETWORK, SPEC)


def test_burn_in_masks_the_loss_and_only_sets_the_state():
    config, agent = _agent()
    state = agent.learner.init(jax.random.PRNGKey(0))
    model, seq = _model(agent), _sequence()
    net, target = state.params["net"], state.target_params

    # Jitted (config static): one compile per case instead of every op's own, eagerly.
    td_errors = jax.jit(functools.partial(sequence_td_errors, model), static_argnums=3)

    def loss_of(net, config, seq):
        td, mask, _ = td_errors(net, target, seq, config)
        return jnp.sum(jnp.square(td) * mask)

    loss = jax.jit(loss_of, static_argnums=1)
    td, mask, _ = td_errors(net, target, seq, config)
    assert td.shape == mask.shape == (T - K, B)
    # 1. what happens in the prefix (its actions and rewards) does not reach the loss
    prefix_changed = seq._replace(
        action=seq.action.at[:K].set(1 - seq.action[:K]), reward=seq.reward.at[: K + 1].add(5.0)
    )
    np.testing.assert_allclose(loss(net, config, prefix_changed), loss(net, config, seq), 1e-6)
    # 2. the prefix only sets the state: the same loss and gradient as a sequence that starts
    # at step K from that state, given as a constant, with no burn-in
    first = jnp.concatenate([jnp.zeros((1, B), bool), (seq.terminated | seq.truncated)[:-1]])
    core0 = jax.tree.map(lambda x: x[0], seq.core_state)
    _, burnt = jax.jit(model.unroll)(net, seq.obs[:K], first[:K], core0)
    burnt = reset_core_state(burnt, first[K])  # a stored state has its row-0 reset applied
    later = jax.tree.map(lambda x: x[K:], seq._replace(core_state=None, agent_extras={}))
    later = later._replace(core_state=jax.tree.map(lambda x: x[None], burnt), agent_extras={})
    no_burn_in = R2D2Config(burn_in=0, n_step=3, discount=0.9)
    np.testing.assert_allclose(loss(net, no_burn_in, later), loss(net, config, seq), rtol=1e-5)
    grad = jax.jit(jax.grad(loss_of), static_argnums=1)
    grads, grads_later = grad(net, config, seq), grad(net, no_burn_in, later)
    jax.tree.map(
        lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6), grads, grads_later
    )
    # 3. and the burn-in matters: learning from the stored state at step K instead differs
    cut = jax.tree.map(lambda x: x[K:], seq._replace(core_state=None, agent_extras={}))
    cut = cut._replace(core_state=seq.core_state, agent_extras={})
    assert abs(float(loss(net, no_burn_in, cut) - loss(net, config, seq))) > 1e-3


def test_episode_starts_inside_the_prefix_reset_the_burn_in():
    config, agent = _agent()
    state = agent.learner.init(jax.random.PRNGKey(1))
    model, seq = _model(agent), _sequence(2)
    ended = jnp.zeros((T + 1, B), bool).at[K - 1, 0].set(True)  # obs[K] starts an episode
    seq = seq._replace(terminated=ended, truncated=jnp.zeros_like(ended))
    other = seq._replace(obs=seq.obs.at[: K - 1, 0].add(3.0))  # a different past before it
    args = (model, state.params["net"], state.target_params)
    td_other = sequence_td_errors(*args, other, config)[0]
    td = sequence_td_errors(*args, seq, config)[0]
    np.testing.assert_allclose(td_other[:, 0], td[:, 0], atol=1e-6)
    # without that episode start, the different past shows in env 0's errors
    no_start = jnp.zeros_like(ended)
    kept = sequence_td_errors(*args, other._replace(terminated=no_start), config)[0]
    assert (
        np.abs(
            np.asarray(
                kept[:, 0]
                - sequence_td_errors(*args, seq._replace(terminated=no_start), config)[0][:, 0]
            )
        ).max()
        > 1e-4
    )


def test_sequence_priorities_mix_the_max_and_the_mean():
    td = jnp.array([[1.0, -2.0], [-3.0, 0.5], [9.0, 0.0]])
    mask = jnp.array([[1.0, 1.0], [1.0, 1.0], [0.0, 1.0]])  # step 2 of sequence 0 masked
    got = sequence_priorities(td, mask, 0.9)
    np.testing.assert_allclose(got, [0.9 * 3 + 0.1 * 2, 0.9 * 2 + 0.1 * 2.5 / 3], rtol=1e-6)


def test_value_rescaling_is_inverted_by_its_inverse():
    x = jnp.linspace(-1000.0, 1000.0, 101)
    np.testing.assert_allclose(
        ops.signed_parabolic(ops.signed_hyperbolic(x)), x, rtol=1e-3, atol=1e-2
    )
    assert float(ops.signed_hyperbolic(jnp.float32(99.0))) == pytest.approx(9.099, abs=1e-3)


def test_the_actor_steps_agree_with_the_learner_unroll():
    _, agent = _agent()
    state = agent.learner.init(jax.random.PRNGKey(2))
    params = {**state.params, "epsilon": jnp.float32(0.0)}
    model, seq = _model(agent), _sequence(3)
    actor = agent.actor
    actor_state = actor.init_state(ActorIdentity(0, 1), B, jax.random.PRNGKey(0))
    first = jnp.concatenate([jnp.ones((1, B), bool), (seq.terminated | seq.truncated)[:-1]])
    greedy = []
    for t in range(T):
        actor_state = actor.start_episodes(actor_state, first[t])
        action, _, actor_state = actor.act(params, seq.obs[t], actor_state)
        greedy.append(action)
    q, _ = model.unroll(params["net"], seq.obs[:T], first[:T], model.initial_core_state(B))
    np.testing.assert_array_equal(jnp.stack(greedy), jnp.argmax(q, -1))


@pytest.mark.parametrize(
    "overrides,match",
    [
        ({"network.core": "none"}, "network.core='lstm'"),
        ({"algo.burn_in": 40}, "burn_in"),
        ({"algo.num_atoms": 51}, "num_atoms"),
    ],
)
def test_r2d2_refuses_what_it_cannot_do_in_one_line(overrides, match, tmp_path):
    with pytest.raises(ConfigError, match=match) as e:
        config = load_config("configs/r2d2_memory.py:quick", **overrides)
        prepare(config, str(tmp_path), False, get_engine(config.runtime))
    assert "\n" not in str(e.value)
    assert not any(tmp_path.iterdir())  # nothing written


def test_anakin_holds_the_sequence_replay_but_not_yet_a_uniform_one():
    """R2D2's sequences run on the device (`test_anakin_r2d2.py`); a uniform replay of whole
    segments (a flow of research code's, `flows.get("replay")`) is refused in one line."""
    config = load_config("configs/anakin_r2d2_memory.py:quick")
    assert flows.get("sequences").device_problem(config) is None
    problem = flows.get("replay").device_problem(config)
    assert (
        "uniform replay of whole segments, which config.runtime='anakin' does not hold" in problem
    )


def test_rainbow_points_a_recurrent_network_to_r2d2(tmp_path):
    config = load_config("configs/rainbow_cartpole.py:quick", **{"network.core": "lstm"})
    with pytest.raises(ConfigError, match="hold no core state.*config.algorithm='r2d2'"):
        prepare(config, str(tmp_path), False, get_engine(config.runtime))


R2D2_SEATS = """
import ml_collections
from jaxrl_dist.config.cli import load_config_file

def get_config(variant=None):
    c = ml_collections.ConfigDict(load_config_file({rainbow!r} + ":quick"))
    c.algorithm = "r2d2"
    c.algo = {{"n_step": 3, "burn_in": 2}}
    c.replay = {{"capacity": 500, "min_size": 8, "samples_per_insert": 4.0}}
    c.network.core, c.network.core_size = "lstm", 16
    c.batch_size, c.total_env_steps = 8, 2_000
    return c
"""


def test_r2d2_is_the_recurrent_q_agent_rainbow_points_to_in_seats(tmp_path):
    """Rainbow's refusal of a core names `algorithm='r2d2'`; in Rainbow's own seated game
    (tic-tac-toe, self-play and scripted seats) R2D2 runs with its LSTM and updates."""
    from train_runs import ROOT, train_main

    config = tmp_path / "r2d2_seats.py"
    config.write_text(R2D2_SEATS.format(rainbow=f"{ROOT}/configs/rainbow_tictactoe.py"))
    summary = train_main(str(config), str(tmp_path / "run"))
    assert summary["env_steps"] >= 2_000 and summary["updates"] >= 10


def test_a_quick_r2d2_run_updates_from_sequences_and_its_checkpoint_acts(tmp_path):
    """`r2d2_memory.py:quick` through `scripts/train.py`: the sequence replay fills, the
    learner updates and logs its sequence metrics, and the checkpoint acts with its state."""
    import json

    from train_runs import train_main

    from jaxrl_dist.checkpoints.policy import load_policy

    workdir = str(tmp_path / "run")
    summary = train_main("configs/r2d2_memory.py:quick", workdir, "--config.log_every_updates=1")
    assert summary["env_steps"] >= 6_400 and summary["updates"] >= 20
    with open(f"{workdir}/metrics.jsonl") as f:
        records = [json.loads(line) for line in f]
    logged = {k for r in records for k in r}
    assert {"losses/priority_mean", "losses/importance_weight_mean", "losses/q_mean"} <= logged
    policy = load_policy(workdir)
    assert policy.recurrent and policy.description["algorithm"] == "r2d2"
    state = policy.initial_state(3)
    first = np.ones(3, bool)
    for _ in range(5):
        action, state = policy.act_with_state(np.zeros((3, 2), np.float32), state, first)
        first[:] = False
    assert action.shape == (3,) and set(action.tolist()) <= {0, 1}


def test_a_restored_replay_takes_lstm_states_again():
    """An LSTM's core state is a tuple `(c, h)`: a restored replay keeps it a tuple, so the
    actors' next segments fit it and its draws feed the LSTM as they did."""
    lstm = _segments(4)
    lstm = lstm._replace(core_state=(lstm.core_state, -lstm.core_state))
    replay = _replay()
    replay.write(QueueItem(0, lstm))
    again = _replay(seed=1)
    again.restore(snapshot.from_bytes(snapshot.to_bytes(replay.snapshot())))
    again.write(QueueItem(0, lstm))  # the same structure as before the save
    drawn = again.read(0).data.core_state
    assert isinstance(drawn, tuple) and len(drawn) == 2
    np.testing.assert_array_equal(drawn[0], -drawn[1])
