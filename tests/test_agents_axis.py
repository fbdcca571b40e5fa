"""The optional agents axis: episode statistics and evaluation returns keep `[..., agents]`."""

import numpy as np

from jaxrl_dist.acting.actor import ActorStats
from jaxrl_dist.envs import EpisodeTracker
from jaxrl_dist.evaluation.base import EnvEpisodes


def _info(elapsed):
    return {"elapsed_step": np.asarray(elapsed)}


def test_episode_tracker_keeps_per_agent_returns():
    tracker = EpisodeTracker(num_envs=2)
    ids, no = np.array([0, 1]), np.array([False, False])
    tracker.update(ids, np.zeros((2, 3)), no, no, _info([0, 0]))  # reset step: ignored
    tracker.update(ids, np.array([[1.0, -1.0, 0.5], [2.0, 0.0, 0.0]]), no, no, _info([1, 1]))
    returns, lengths = tracker.update(
        ids,
        np.array([[1.0, 1.0, 1.0], [5.0, 5.0, 5.0]]),
        np.array([True, False]),
        no,
        _info([2, 2]),
    )
    np.testing.assert_array_equal(returns, [[2.0, 0.0, 1.5]])  # env 0, one row per agent
    np.testing.assert_array_equal(lengths, [2])


def test_single_agent_rewards_stay_flat():
    tracker = EpisodeTracker(num_envs=1)
    one, yes = np.array([0]), np.array([True])
    tracker.update(one, np.array([0.0]), ~yes, ~yes, _info([0]))
    returns, _ = tracker.update(one, np.array([3.0]), yes, ~yes, _info([1]))
    assert returns.shape == (1,) and returns[0] == 3.0


def test_actor_stats_log_the_mean_over_agents():
    stats = ActorStats()
    stats.add({}, 10, np.array([[2.0, 0.0], [4.0, 4.0]]), [3, 5])
    out = stats.drain()
    assert out["episode_returns"] == [1.0, 4.0] and stats.episodes_finished == 2


def test_evaluation_returns_are_episodes_by_agents():
    episodes = EnvEpisodes(2)
    episodes.add(np.array([[1.0, -1.0], [0.5, 0.5]]), np.array([False, True]))
    episodes.add(np.array([[1.0, -1.0], [9.0, 9.0]]), np.array([True, True]))  # env 1 is done
    result = episodes.result()
    np.testing.assert_array_equal(result.returns, [[2.0, -2.0], [0.5, 0.5]])
    np.testing.assert_array_equal(result.lengths, [2, 1])
    flat = EnvEpisodes(2)
    flat.add(np.array([1.0, 2.0]), np.array([True, True]))
    assert flat.result().returns.shape == (2, 1)  # [episodes, agents] with one agent
