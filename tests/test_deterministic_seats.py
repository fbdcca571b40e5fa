"""Deterministic mode with seats on Sebulba (issue 57, item 3): a learner seat moves only at
its turns, so a lockstep actor's streams fill their unrolls apart; a full one waits, its game
paused, while the others play on, in an order that follows from the env and the actions alone
(`LockstepActor._play`), so a run depends only on its seed and a resume replays the epoch's
actions into the same games (`acting/lockstep.py`)."""

import threading

import jax
import numpy as np
import pytest
from train_runs import interrupted_run

from jaxrl_dist.acting.actor import ActorShared, ActorStats
from jaxrl_dist.acting.lockstep import LockstepActor
from jaxrl_dist.config.cli import load_config
from jaxrl_dist.envs import EpisodeTracker, make_env
from jaxrl_dist.envs import games as g
from jaxrl_dist.envs.seats import LEARNER, SeatedGame, same_roles
from jaxrl_dist.run.trainer import Trainer
from jaxrl_dist.types import ACTION_MASK

TICTACTOE = "configs/ppo_tictactoe.py:quick"
# Two actors of 6 games against a scripted player, the learner's starting policy and its
# opponent pool (a snapshot every 2 updates, the newest 2 drawn by PFSP), with random
# openings, an LSTM (its states carried across the held rows and put back on resume), env
# epochs of 4 updates.
LOCKSTEP = {
    "deterministic": True,
    "sebulba.async_envs": False,
    "sebulba.num_actor_threads": 2,
    "sebulba.envs_per_actor": 6,
    "sebulba.env_epoch_updates": 4,
    "seats.games": (("learner", "heuristic"), ("frozen", "learner"), ("learner", "pool")),
    "seats.pool_every_updates": 2,
    "seats.pool_capacity": 2,
    "seats.opening_plies": 2,
    "network.core": "lstm",
    "network.core_size": 16,
    "batch_size": 12,
    "total_env_steps": 12 * 16 * 10,
    "checkpoint_every_updates": 3,
}


def _config():
    return load_config(TICTACTOE, **LOCKSTEP)


@pytest.fixture(scope="module")
def whole(tmp_path_factory):
    workdir = str(tmp_path_factory.mktemp("seats") / "run")
    return Trainer(_config(), workdir, quiet=True).run().summary


def test_a_deterministic_seated_run_depends_only_on_its_seed(whole, tmp_path):
    summary = Trainer(_config(), str(tmp_path / "again"), quiet=True).run().summary
    assert whole["updates"] == 10 and summary["updates"] == 10
    assert summary["state_sha256"] == whole["state_sha256"]


def test_a_deterministic_seated_run_resumed_ends_as_the_whole_run(whole, tmp_path):
    """Stopped in its second env epoch and resumed: each actor replays the epoch's actions,
    each stream's in its own order, into new games, and the run ends as the whole run."""
    cut = str(tmp_path / "cut")
    assert 4 < interrupted_run(_config(), cut, 12 * 16 * 6).updates < 10
    summary = Trainer(_config(), cut, resume=True, quiet=True).run().summary
    assert summary["updates"] == 10
    assert summary["state_sha256"] == whole["state_sha256"]


def test_an_unroll_holds_the_streams_that_are_done_and_replays_into_the_same_games():
    """One actor's unroll over 6 seated games, its actions chosen at random: every stream gets
    exactly T actions while its games move at their own turns, and replaying those actions
    into a new pool ends at the very observations the unroll ended at."""

    def seated():
        pool = make_env("TicTacToe-v1", {}, 6, 1, seed=7)
        players = {"random": g.random_legal(np.random.default_rng(8))}
        roles = same_roles(3, (LEARNER, "random")) + same_roles(3, ("random", LEARNER))
        return SeatedGame(pool, roles, players, gather=True)

    shared = ActorShared(
        write=None,
        stop=threading.Event(),
        stats=ActorStats(),
        unroll_length=5,
        segments_per_rollout=1,
    )
    # Its env protocol alone: no thread, no policy client.
    actor = LockstepActor(0, seated, None, shared, key=None, progress=None, epoch_updates=1)
    rng = np.random.default_rng(9)
    chosen = np.zeros((5, 6), np.int32)
    rounds = []

    def choose(obs, env_ids, first, steps):
        legal = obs[ACTION_MASK]
        action = np.array([rng.choice(np.flatnonzero(m)) for m in legal], np.int32)
        chosen[steps, env_ids] = action
        rounds.append(len(env_ids))
        return action

    played = _play_one(actor, seated(), choose)
    replayed = _play_one(actor, seated(), lambda obs, ids, first, steps: chosen[steps, ids])
    assert sorted(played[0]) == list(range(6)) and len(set(rounds)) > 1  # streams apart
    by_stream = [jax.tree.map(lambda x, w=w: x[np.argsort(w[0])], w[1]) for w in (played, replayed)]
    jax.tree.map(np.testing.assert_array_equal, *by_stream)  # obs, reward, terminated, truncated


def _play_one(actor, env, choose):
    """`actor._play` on a new pool from its first observations: the rows ending the unroll,
    `(stream ids, (obs, reward, terminated, truncated))`."""
    actor._ended = np.ones(env.config["num_envs"], bool)
    env.async_reset()
    tracker = EpisodeTracker(env.config["num_envs"])
    env_ids, (_, step) = actor._play(env, actor._receive(env, tracker)[:2], choose, tracker)
    env.close()
    return env_ids, step
