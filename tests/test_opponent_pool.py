"""The opponent pool: capacity, sampling (against probabilities worked out here), records, its
checkpoint arrays, and a PoolPlayer in real tic-tac-toe games shifting PFSP toward the snapshot
the learner cannot beat."""

import threading

import numpy as np
import pytest

from jaxrl_dist.acting.opponent_pool import OpponentPool, PoolPlayer
from jaxrl_dist.acting.params_store import ActingStopped
from jaxrl_dist.data import snapshot
from jaxrl_dist.envs import games as g
from jaxrl_dist.envs import make_env
from jaxrl_dist.envs.seats import LEARNER, SeatedGame
from jaxrl_dist.types import AGENT_VIEW


def _params(k):
    return {"w": np.full((2, 3), k, np.float32), "b": {"c": np.arange(k, k + 2)}}


def test_the_newest_capacity_snapshots_stay():
    pool = OpponentPool(3)
    assert [pool.add(_params(k), update=10 * k) for k in range(5)] == [0, 1, 2, 3, 4]
    assert pool.ids() == [2, 3, 4] and len(pool) == 3
    assert pool.params(1) is None and pool.params(4)["w"][0, 0] == 4
    pool.record(1, 1.0)  # a game against a dropped snapshot: nothing to record
    assert [r["update"] for r in pool.records().values()] == [20, 30, 40]


def test_sampling_probabilities_worked_out_by_hand():
    uniform, latest, pfsp = (OpponentPool(4, s, seed=1) for s in OpponentPool.SAMPLING)
    for pool in (uniform, latest, pfsp):
        for k in range(3):
            pool.add(_params(k), k)
    assert uniform.probabilities() == pytest.approx({0: 1 / 3, 1: 1 / 3, 2: 1 / 3})
    assert latest.probabilities() == pytest.approx({0: 1 / 6, 1: 1 / 6, 2: 2 / 3})
    for _ in range(8):
        pfsp.record(0, 1.0)  # learner's score (8 + 1) / (8 + 2) = 0.9 -> weight 0.01
    for result in [0.0] * 2 + [-1.0] * 6:
        pfsp.record(2, result)  # score (1 + 1) / (8 + 2) = 0.2 -> weight 0.64; 1: 0.5 -> 0.25
    assert pfsp.probabilities() == pytest.approx({0: 0.01 / 0.9, 1: 0.25 / 0.9, 2: 0.64 / 0.9})
    assert pfsp.records()[2] == {"update": 2, "wins": 0, "draws": 2, "losses": 6}
    draws = np.array([pfsp.sample() for _ in range(20_000)])
    for sid, p in pfsp.probabilities().items():
        assert abs(np.mean(draws == sid) - p) < 0.015


def test_bad_settings_and_an_empty_pool():
    with pytest.raises(ValueError, match="capacity=0 must be >= 1"):
        OpponentPool(0)
    with pytest.raises(ValueError, match="sampling='best' must be one of"):
        OpponentPool(2, "best")
    with pytest.raises(RuntimeError, match="the opponent pool is empty"):
        OpponentPool(2).sample()


def test_its_arrays_round_trip_through_bytes_and_sample_on_alike():
    pool = OpponentPool(3, "pfsp", seed=7)
    for k in range(4):
        pool.add(_params(k), 100 + k)
    for sid, result in [(1, 1.0), (2, -1.0), (3, 0.0), (3, -1.0)]:
        pool.record(sid, result)
    pool.sample()
    restored = OpponentPool(3, "pfsp", seed=999)
    restored.restore_arrays(snapshot.from_bytes(snapshot.to_bytes(pool.to_arrays())), _params(0))
    assert restored.ids() == pool.ids() and restored.records() == pool.records()
    for sid in pool.ids():
        np.testing.assert_array_equal(restored.params(sid)["b"]["c"], pool.params(sid)["b"]["c"])
    assert [restored.sample() for _ in range(50)] == [pool.sample() for _ in range(50)]
    assert restored.add(_params(9), 200) == pool.add(_params(9), 200) == 4
    with pytest.raises(ValueError, match="saved opponent snapshot 2 has no leaf 'v' of this run's"):
        OpponentPool(3).restore_arrays(pool.to_arrays(), {"v": np.zeros(2)})


def test_pfsp_in_real_games_turns_to_the_snapshot_the_learner_cannot_beat():
    """Two snapshots: random (kind 0) and perfect play (kind 1). The learner plays perfectly:
    it beats random mostly and only draws perfect play, so PFSP comes to play the second."""
    rng = np.random.default_rng(0)
    random_player, perfect = g.random_legal(rng), g.perfect_tictactoe(rng)

    class Snapshots:  # a RowPolicy's protocol, memoryless
        def act_masked(self, params, obs, legal_mask, games):
            player = perfect if params["kind"] == 1 else random_player
            return player.act(obs, legal_mask, games)

        def restart(self, at=None):
            pass

    pool = OpponentPool(2, "pfsp", seed=3)
    pool.add({"kind": np.array(0)}, 0)
    pool.add({"kind": np.array(1)}, 1)
    roles = [(LEARNER, "pool"), ("pool", LEARNER)] * 4
    env = SeatedGame(
        make_env("TicTacToe-v1", {}, 8, 4, seed=2), roles, {"pool": PoolPlayer(pool, Snapshots())}
    )
    env.async_reset()
    while len(env.finished) < 300:
        obs, _, _, _, info = env.recv()
        env.send(perfect.act(obs[AGENT_VIEW], info["legal_action_mask"], None), info["env_id"])
    env.close()
    records = pool.records()
    assert records[0]["losses"] == records[1]["losses"] == 0  # the learner never loses
    assert records[1]["wins"] == 0 and records[1]["draws"] > 0  # perfect play only draws
    assert records[0]["wins"] > records[0]["draws"]
    assert sum(r["wins"] + r["draws"] for r in records.values()) >= 290  # every game recorded
    assert pool.probabilities()[1] > 0.9


def _draws(pool, round_, n=200):
    stop = threading.Event()
    return [pool.draw(round_, np.random.default_rng(s), stop) for s in range(n)]


def test_a_lockstep_draw_follows_from_the_rounds_before_it():
    """Deterministic mode: a draw in round u sees the newest `capacity` snapshots drawn from u
    or before, weighted (PFSP) by the games that ended in rounds before u alone, and waits for
    the pool's owner to reach u; the snapshots a replayed round may draw stay, and a checkpoint
    keeps the records of the rounds acted."""
    pool = OpponentPool(2, "pfsp", seed=0)
    pool.lockstep(epoch_updates=4)
    for r in range(10):
        pool.add(_params(r), update=r, round_=r)
    pool.reached(9)
    # Kept: the newest 2 drawn by round 4 (the epoch of round 9 - 2 starts there) and after.
    assert pool.ids() == [3, 4, 5, 6, 7, 8, 9]
    assert set(_draws(pool, 5)) == {4, 5}
    before = {r: _draws(pool, r) for r in (6, 7)}
    for _ in range(6):
        pool.record_at(6, -1.0, 6)  # the learner lost to snapshot 6, in round 6
    assert _draws(pool, 6) == before[6]  # round 6's own games do not weigh its draws
    assert _draws(pool, 7).count(6) > before[7].count(6) + 40  # they weigh round 7's
    restored = OpponentPool(2, "pfsp", seed=1)
    restored.lockstep(epoch_updates=4)
    restored.restore_arrays(pool.to_arrays(before_round=6), _params(0))
    # Saved before round 6: its games are not (a resume acts round 6 again).
    assert restored.ids() == pool.ids() and _draws(restored, 7) == before[7]
    stop = threading.Event()
    stop.set()
    with pytest.raises(ActingStopped):  # round 10 not reached: the draw waits, until a stop
        pool.draw(10, np.random.default_rng(0), stop)
    # Snapshots of one round beyond `capacity` (a replay agent's updates between two rounds):
    # only the newest 2 of round 10 can ever be drawn (and with round 10 the floor is 8).
    for k in range(3):
        pool.add(_params(10 + k), update=10 + k, round_=10)
    assert pool.ids() == [7, 8, 9, 11, 12]
    # Rounds counted again from 0 (a resume whose replay's rounds were not saved): the oldest.
    assert pool.draw(0, np.random.default_rng(0), stop) == 7


def test_a_frozen_start_draws_in_any_round_without_waiting():
    """A frozen start (`frozen`, or another agent's `frozen:NAME` that may not learn at all)
    takes no snapshot after its first, so its draws wait for no round."""
    frozen = OpponentPool(1)
    frozen.lockstep(epoch_updates=4, fixed=True)
    frozen.add(_params(0), update=0)
    stop = threading.Event()
    stop.set()
    assert frozen.draw(50, np.random.default_rng(0), stop) == 0
