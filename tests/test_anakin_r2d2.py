"""R2D2 on the Anakin runtime (issue 57), its replay of whole sequences in the carry
(`data/device_sequences.py`): the replay's rules (segments drawn whole by priority with the
core state they were acted from, new ones at the largest priority, a duplicate's last priority
kept), `anakin_r2d2_memory.py:quick` through scripts/train.py, its updates once `min_size`
segments are held, an exact resume with the replay, and one-line refusals."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from cli_refusal import assert_refused
from train_runs import interrupted_run, train_main

from jaxrl_dist.config.cli import load_config
from jaxrl_dist.data.device_sequences import DeviceSequenceReplay
from jaxrl_dist.run.trainer import Trainer
from jaxrl_dist.types import Rollout

QUICK = "configs/anakin_r2d2_memory.py:quick"
STEPS = 16 * 40  # env steps per rollout: 16 envs x 40 steps
UPDATES = 4  # learner updates per rollout: 16 sequences x samples_per_insert 8 / batch 32
T, SLOTS = 3, 4


def _rollout(first_value: float, width: int = 2) -> Rollout:
    """A `[T + 1, width]` rollout whose every leaf holds `first_value + column`, with an LSTM's
    core state `([1, width, 2], [1, width, 2])`."""
    col = first_value + jnp.arange(width, dtype=jnp.float32)
    full = lambda *shape: jnp.broadcast_to(
        col.reshape(1, width, *[1] * len(shape)), (T + 1, width, *shape)
    )  # noqa: E731
    return Rollout(
        obs=full(2),
        reward=full(),
        terminated=jnp.zeros((T + 1, width), bool),
        truncated=jnp.zeros((T + 1, width), bool),
        action=full()[:T].astype(jnp.int32),
        agent_extras={},
        policy_version=jnp.zeros((T, width), jnp.int32),
        core_state=(full(2)[:1], -full(2)[:1]),
    )


def _replay(batch: int = 2000, alpha: float = 1.0) -> DeviceSequenceReplay:
    return DeviceSequenceReplay(SLOTS, T, batch, alpha, 1e-6)


def test_segments_are_drawn_whole_by_priority_with_their_core_state():
    replay = _replay()
    state = replay.init(_rollout(0.0), jax.random.PRNGKey(0))
    state = replay.insert(replay.insert(state, _rollout(0.0)), _rollout(10.0))  # slots: 0 1 10 11
    np.testing.assert_array_equal(state.priority, 1.0)  # new ones: the largest so far, 1
    state = state._replace(priority=jnp.array([0.0, 1.0, 3.0, 0.0]))
    state, held, slot = replay.sample(state)
    counts = np.bincount(np.asarray(slot), minlength=SLOTS) / replay.batch_size
    np.testing.assert_allclose(counts, [0.0, 0.25, 0.75, 0.0], atol=1e-3)  # stratified
    value = np.array([0.0, 1.0, 10.0, 11.0])[np.asarray(slot)]  # what each slot holds
    np.testing.assert_array_equal(held.obs[:, :, 0], np.broadcast_to(value, (T + 1, len(value))))
    np.testing.assert_array_equal(held.core_state[0][0, :, 0], value)
    np.testing.assert_array_equal(held.core_state[1][0, :, 0], -value)
    probability = np.asarray(held.agent_extras["replay_probability"])
    assert probability.shape == (T, replay.batch_size)
    np.testing.assert_allclose(probability[0], np.where(value == 1.0, 0.25, 0.75))
    np.testing.assert_array_equal(held.agent_extras["replay_count"], 4.0)


def test_priorities_come_back_as_p_plus_eps_to_the_alpha_and_the_last_duplicate_wins():
    replay = _replay(batch=3, alpha=0.5)
    state = replay.insert(replay.init(_rollout(0.0), jax.random.PRNGKey(0)), _rollout(0.0, 4))
    state = replay.set_priorities(state, jnp.array([1, 1, 3]), jnp.array([4.0, 9.0, -1.0]))
    np.testing.assert_allclose(
        state.priority, [1.0, (9.0 + 1e-6) ** 0.5, 1.0, (1e-6) ** 0.5], rtol=1e-6
    )
    assert float(state.max_priority) == pytest.approx(3.0)
    state = replay.insert(state, _rollout(5.0, 1))  # the ring wraps: slot 0, the largest
    assert float(state.priority[0]) == pytest.approx(3.0) and int(state.next_slot) == 1


@pytest.fixture(scope="module")
def r2d2_run(tmp_path_factory):
    workdir = str(tmp_path_factory.mktemp("anakin_r2d2") / "run")
    return workdir, train_main(QUICK, workdir, "--config.checkpoint_every_updates=3")


def test_quick_run_updates_from_the_sequence_replay(r2d2_run):
    """6 rollouts of 16 sequences; the replay holds min_size=32 after the second, so 5 of them
    are followed by 4 updates each."""
    _, summary = r2d2_run
    assert summary["runtime"] == "anakin" and summary["updates"] == 6
    assert summary["learner_updates"] == 5 * UPDATES
    assert summary["checkpoint_steps"] == [3, 6]


def test_resume_with_the_sequence_replay_is_bit_identical(r2d2_run, tmp_path):
    """Stopped after 3 or more of 6 rollouts and resumed: the whole carry (the ring with its
    core states, priorities, sampler key, learner, envs and the actors' LSTM states) ends as
    the uninterrupted run's."""
    config = load_config(QUICK, checkpoint_every_updates=3)
    cut = interrupted_run(config, str(tmp_path / "cut"), 3 * STEPS)
    assert 3 <= cut.updates < 6
    resumed = Trainer(config, str(tmp_path / "cut"), resume=True, quiet=True).run()
    whole = r2d2_run[1]
    assert resumed.summary["learner_updates"] == whole["learner_updates"]
    assert resumed.summary["state_sha256"] == whole["state_sha256"]


@pytest.mark.parametrize(
    "flags, needle",
    [
        (["--config.replay.samples_per_insert=3"], "gives 1.5 updates per rollout"),
        (
            ["--config.replay.capacity=8", "--config.replay.min_size=8"]
            + ["--config.replay.batch_size=8", "--config.replay.samples_per_insert=1"],
            "capacity=8 segments is fewer than one rollout's 16",
        ),
        (["--config.replay.save=false"], "on Anakin the replay is part of the carry"),
    ],
)
def test_refusals_are_one_line(tmp_path, capsys, flags, needle):
    assert_refused(QUICK, flags, needle, tmp_path, capsys)
