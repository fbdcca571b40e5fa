"""Deterministic mode with a replay agent on Sebulba (issue 57, item 3): rounds of every actor's
unroll go into the replay in actor order, the learner samples between them, and a run depends
only on its seed (`data/lockstep_replay.py`)."""

import threading

import numpy as np
import pytest
from train_runs import interrupted_run

from jaxrl_dist.config.cli import load_config
from jaxrl_dist.data import snapshot
from jaxrl_dist.data.base import Batch, QueueItem
from jaxrl_dist.data.lockstep_replay import LockstepReplay
from jaxrl_dist.data.replay import UniformReplay
from jaxrl_dist.run.trainer import Trainer
from jaxrl_dist.sebulba.resume import replay_for_actors
from jaxrl_dist.types import Rollout

T, ENVS = 4, 2


def _item(actor: int, unroll: int) -> QueueItem:
    """Actor `actor`'s unroll `unroll`: every value names both."""
    value = float(actor * 100 + unroll)
    rollout = Rollout(
        obs=np.full((T + 1, ENVS, 1), value, np.float32),
        reward=np.full((T + 1, ENVS), value, np.float32),
        terminated=np.zeros((T + 1, ENVS), bool),
        truncated=np.zeros((T + 1, ENVS), bool),
        action=np.full((T, ENVS), actor, np.int32),
        agent_extras={},
        policy_version=np.zeros((T, ENVS), np.int32),
        core_state={},
    )
    env_actions = np.full((T, ENVS), value, np.int32)
    return QueueItem(actor, rollout, env_actions, {})


def _lockstep(seed: int = 0, min_size: int = 4) -> LockstepReplay:
    stop = threading.Event()
    replay = UniformReplay(
        capacity=64,
        min_size=min_size,
        samples_per_insert=2.0,
        tolerance=8.0,
        batch_size=2,
        seed=seed,
        stop=stop,
    )
    return LockstepReplay(replay, actors=range(2), items_per_unroll=1, epoch_updates=3, stop=stop)


def _drain(replay: LockstepReplay, updates: int) -> tuple[list[float], int]:
    """The learner's reads until the replay lets it sample no more: (the rewards drawn,
    updates)."""
    drawn = []
    while isinstance(batch := replay.read(updates, wait=False), Batch):
        drawn += batch.data.reward[0].tolist()
        updates += 1
    return drawn, updates


@pytest.mark.parametrize("order", [(0, 1), (1, 0)])
def test_rounds_go_in_in_actor_order_whatever_order_the_actors_write(order):
    """Two actors write their unrolls in either order, one of them a round ahead: the replay
    inserts whole rounds in actor order, the learner samples the same draws between them, and
    each round's params version is the updates the learner reached before it."""
    replay, drawn, updates = _lockstep(), [], 0
    got, updates = _drain(replay, updates)  # nothing held: round 0 is acted with version 0
    assert got == [] and replay.version_for(0) == 0
    first, second = order
    for unroll in range(3):
        replay.write(_item(first, unroll))
        assert replay.rounds == unroll  # one actor's unroll alone is not a round
        replay.write(_item(second, unroll))
        assert replay.rounds == unroll + 1
        got, updates = _drain(replay, updates)
        drawn.append(got)
        assert replay.version_for(unroll + 1) == updates
    # The same draws whatever the order: they depend on the rounds alone.
    expected = _lockstep()
    _drain(expected, 0)
    again, updates = [], 0
    for unroll in range(3):
        for actor in (0, 1):
            expected.write(_item(actor, unroll))
        got, updates = _drain(expected, updates)
        again.append(got)
    assert drawn == again
    # A round: 4 segments, each sampled twice, 2 a batch: 4 samples of 2 draws between rounds.
    assert [len(d) for d in drawn] == [8, 8, 8]


def test_a_snapshot_keeps_the_rounds_and_the_epochs_env_actions():
    replay = _lockstep()
    _drain(replay, 0)
    for unroll in range(4):  # epochs of 3 rounds: round 3 starts the second
        for actor in (0, 1):
            replay.write(_item(actor, unroll))
    restored = _lockstep(seed=1)
    restored.restore(snapshot.from_bytes(snapshot.to_bytes(replay.snapshot())))
    start, mine = restored.epoch_replay()
    actors = replay_for_actors(mine, ENVS)  # this process's columns, its first actor 0
    assert start == 4 and sorted(actors) == [0, 1]
    actions, memory = actors[1]
    assert actions.shape == (1, T, ENVS) and (actions == 103).all() and memory == {}
    at_epoch_start = _lockstep()
    for actor in (0, 1):
        at_epoch_start.write(_item(actor, 0))
    for unroll in (1, 2):
        for actor in (0, 1):
            at_epoch_start.write(_item(actor, unroll))
    assert at_epoch_start.epoch_replay() == (3, None)  # nothing to replay: new envs


# Rainbow's quick run in lockstep: two actors of 8 envs (a round: 2 x 8 x 16 = 256 transitions,
# min_size 256), 16 updates of 128 transitions between rounds.
RAINBOW = "configs/rainbow_cartpole.py:quick"
LOCKSTEP = {
    "deterministic": True,
    "sebulba.async_envs": False,
    "sebulba.num_actor_threads": 2,
    "sebulba.envs_per_actor": 8,
}


@pytest.fixture(scope="module")
def rainbow(tmp_path_factory):
    workdir = str(tmp_path_factory.mktemp("rainbow") / "run")
    return Trainer(load_config(RAINBOW, **LOCKSTEP), workdir, quiet=True).run().summary


def test_a_deterministic_rainbow_run_depends_only_on_its_seed(rainbow, tmp_path):
    again = Trainer(load_config(RAINBOW, **LOCKSTEP), str(tmp_path / "again"), quiet=True)
    summary = again.run().summary
    assert rainbow["updates"] > 100 and summary["updates"] == rainbow["updates"]
    assert summary["state_sha256"] == rainbow["state_sha256"]


def test_a_deterministic_rainbow_run_resumed_ends_as_the_whole_run(rainbow, tmp_path):
    """Stopped mid-run and resumed: the replay's rounds, priorities and RNG come back with the
    env actions of the epoch, and the run ends with the whole run's state."""
    cut = str(tmp_path / "cut")
    assert 0 < interrupted_run(load_config(RAINBOW, **LOCKSTEP), cut, 2_000).updates
    resumed = Trainer(load_config(RAINBOW, **LOCKSTEP), cut, resume=True, quiet=True)
    summary = resumed.run().summary
    assert summary["updates"] == rainbow["updates"]
    assert summary["state_sha256"] == rainbow["state_sha256"]


def test_a_deterministic_r2d2_run_resumed_ends_as_the_whole_run(tmp_path):
    """R2D2's sequences and their LSTM states: the recurrent states the last round ended with
    are saved with the replay and put back into the resumed actors."""
    config = lambda: load_config("configs/r2d2_memory.py:quick", **LOCKSTEP)  # noqa: E731
    whole = Trainer(config(), str(tmp_path / "whole"), quiet=True).run().summary
    cut = str(tmp_path / "cut")
    assert 0 < interrupted_run(config(), cut, 3_200).updates < whole["updates"]
    resumed = Trainer(config(), cut, resume=True, quiet=True).run().summary
    assert resumed["updates"] == whole["updates"]
    assert resumed["state_sha256"] == whole["state_sha256"]
