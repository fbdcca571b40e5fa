"""Self-play through the real trainer (`configs/ppo_tictactoe.py:quick` with snapshot seats):
the opponent pool fills every `pool_every_updates` and is saved and taken back on resume; a seat
with `learning_mask` off plays the run's starting policy bit for bit and never reaches the
learner; a seat with `exploration_mask` off never samples."""

import collections
import json
import os
import shutil

import jax
import numpy as np
import pytest

from jaxrl_dist import agents
from jaxrl_dist.acting import seat_pools
from jaxrl_dist.acting.seat_pools import SeatPools
from jaxrl_dist.agents.base import RunShape
from jaxrl_dist.checkpoints.policy import load_policy
from jaxrl_dist.checkpoints.store import Checkpointer, tree_digest
from jaxrl_dist.config.cli import load_config
from jaxrl_dist.data import snapshot
from jaxrl_dist.envs import env_spec
from jaxrl_dist.evaluation.opponents import pool_policy
from jaxrl_dist.run.trainer import Trainer
from jaxrl_dist.tools import evaluate_cli
from jaxrl_dist.types import path_name

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONFIG = os.path.join(ROOT, "configs", "ppo_tictactoe.py")
# Seat 1 never learns (the first pattern's learner there plays frozen at the start) and the
# snapshot players (pool, frozen) act greedily there.
SEATS = {
    "seats.games": "(('learner','learner'),('learner','pool'),('learner','random'))",
    "seats.learning_mask": "(True,False)",
    "seats.exploration_mask": "(True,False)",
    "seats.pool_every_updates": 4,
    "seats.pool_capacity": 5,
    "checkpoint_every_updates": 16,
}


class Recorder:
    """Wraps `seat_pools.snapshot_policy`: every snapshot move with its player kind, params
    digest, observation and action."""

    def __init__(self, monkeypatch):
        self.moves = collections.defaultdict(list)  # greedy -> [(digest, state, action)]
        original = seat_pools.snapshot_policy

        def recording(core, device, rows, greedy, key):
            policy = original(core, device, rows, greedy, key)
            act = policy.act_masked

            def recorded(params, view, legal_mask, games):
                actions = act(params, view, legal_mask, games)
                digest = tree_digest(params)
                for v, m, a in zip(view, legal_mask, actions, strict=True):
                    self.moves[greedy].append((digest, v.tobytes() + m.tobytes(), int(a)))
                return actions

            policy.act_masked = recorded
            return policy

        monkeypatch.setattr(seat_pools, "snapshot_policy", recording)


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    workdir = str(tmp_path_factory.mktemp("self_play") / "run")
    with pytest.MonkeyPatch.context() as monkeypatch:
        recorder = Recorder(monkeypatch)
        config = load_config(CONFIG + ":quick", **SEATS)
        summary = Trainer(config, workdir, quiet=True).run().summary
    return workdir, summary, recorder.moves


def _saved_pools(workdir):
    with Checkpointer(os.path.join(workdir, "checkpoints"), create=False) as ckpt:
        step = ckpt.latest_step()
        return step, snapshot.from_bytes(ckpt.restore_data(step, "pool"))


def test_the_learner_sees_only_its_learning_seats():
    config = load_config(CONFIG + ":quick", **SEATS)
    # 36 games, 12 of each pattern: the frozen seat 1 of the first is not a stream.
    assert config.seats.roles(3) == [
        ("learner", "frozen"),
        ("learner", "pool"),
        ("learner", "random"),
    ]
    assert config.streams_per_actor == 36


def test_a_seat_that_does_not_learn_plays_the_starting_policy_bit_for_bit(run):
    _, summary, moves = run
    assert set(moves) == {True}  # every snapshot seat is greedy (exploration_mask)
    start = summary["initial_params_sha256"]
    assert sum(m[0] == start for m in moves[True]) > 100  # the frozen seat played throughout
    assert summary["params_sha256"] != start  # while the learner learned
    # The pool's later snapshots are other params.
    assert {m[0] for m in moves[True]} - {start}


def test_a_greedy_seat_never_samples(run):
    _, _, moves = run
    chosen = collections.defaultdict(set)  # (params, state) -> actions taken there
    for digest, state, action in moves[True]:
        chosen[digest, state].add(action)
    seen = collections.Counter(m[:2] for m in moves[True])
    assert max(seen.values()) >= 50  # the opening came up often enough to tell
    assert all(len(actions) == 1 for actions in chosen.values())


def test_the_recorder_would_see_sampling():
    """The check above can fail: a sampling snapshot player varies its move in a position."""
    config = load_config(CONFIG + ":quick")
    spec = env_spec(config.env_id, config.env_kwargs)
    agent = agents.get("ppo").make(config.algo, config.network, spec, RunShape(8192, 256))
    params = agent.learner.init(jax.random.PRNGKey(0)).params
    view, mask = np.zeros((8, 3, 3, 2), np.int8), np.ones((8, 9), bool)
    device = jax.devices()[0]
    for greedy, distinct in ((True, 1), (False, range(2, 10))):
        policy = seat_pools.snapshot_policy(agent.actor, device, 8, greedy, jax.random.PRNGKey(1))
        games = np.arange(8)
        moves = [policy.act_masked(params, view, mask, games) for _ in range(4)]
        assert len(set(np.concatenate(moves))) in ([distinct] if greedy else distinct)


def test_the_pool_snapshots_every_k_updates_within_capacity(run):
    workdir, summary, _ = run
    step, arrays = _saved_pools(workdir)
    assert step == summary["updates"] == 32
    # A snapshot at the start and every 4 updates: 9 taken, the newest 5 kept.
    np.testing.assert_array_equal(arrays["pool/updates"], [16, 20, 24, 28, 32])
    np.testing.assert_array_equal(arrays["pool/ids"], [4, 5, 6, 7, 8])
    assert arrays["pool/records"].sum() > 0  # games against the pool were recorded
    np.testing.assert_array_equal(arrays["frozen/updates"], [0])


def test_resume_takes_back_the_pools_exactly(run, tmp_path, monkeypatch):
    workdir, _, _ = run
    copy = str(tmp_path / "run")
    shutil.copytree(workdir, copy)
    step, saved = _saved_pools(copy)
    restored = []
    original = SeatPools.restore_bytes

    def restore_bytes(self, data, template, agent=""):
        original(self, data, template, agent)
        restored.append(snapshot.from_bytes(self.to_bytes()))

    monkeypatch.setattr(SeatPools, "restore_bytes", restore_bytes)
    config = load_config(CONFIG + ":quick", total_env_steps=12_288, **SEATS)
    summary = Trainer(config, copy, resume=True, quiet=True).run().summary
    (back,) = restored
    assert back.keys() == saved.keys()
    for name, array in saved.items():
        np.testing.assert_array_equal(back[name], array, err_msg=name)
    assert summary["resumed_from_update"] == step and summary["updates"] == 48
    _, after = _saved_pools(copy)  # the pool went on from where it was: ids keep growing
    np.testing.assert_array_equal(after["pool/ids"], [8, 9, 10, 11, 12])
    np.testing.assert_array_equal(after["frozen/" + "ids"], saved["frozen/ids"])


def test_evaluate_plays_a_snapshot_of_the_saved_pool(run, tmp_path):
    """`--opponent pool:ID` plays exactly the params the checkpoint saved as snapshot ID."""
    workdir, _, _ = run
    _, arrays = _saved_pools(workdir)
    policy = load_policy(workdir)
    snap = pool_policy(policy, "pool:6")
    names = [path_name(p) for p, _ in jax.tree_util.tree_flatten_with_path(snap.params)[0]]
    for name, leaf in zip(names, jax.tree.leaves(snap.params), strict=True):
        np.testing.assert_array_equal(np.asarray(leaf), arrays[f"pool/snapshot/6/{name}"])
    latest = pool_policy(policy, "pool:latest").params
    assert tree_digest(latest) == tree_digest(pool_policy(policy, "pool:8").params)
    assert tree_digest(latest) != tree_digest(snap.params)
    out = str(tmp_path / "pool.json")
    argv = [workdir, "--episodes", "8", "--opponent", "pool:6", "--json", out]
    assert evaluate_cli.main(argv) == 0
    with open(out) as f:
        assert json.load(f)["opponent"] == "pool:6"
    with pytest.raises(ValueError, match="pool holds snapshots 4, 5, 6, 7, 8; give pool:ID"):
        pool_policy(policy, "pool:2")
