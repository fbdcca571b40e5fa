"""SegmentBuffer: async EnvPool results scattered by env_id into consistent per-env segments."""

import numpy as np
import pytest

from jaxrl_dist.data.segments import SegmentBuffer


def _run_fake_async_pool(num_envs, batch, unroll, num_recvs, seed=0, segments_per_rollout=None):
    """Drives a SegmentBuffer with a fake async pool whose env j emits obs (j, step_j)."""
    rng = np.random.default_rng(seed)
    buffer = SegmentBuffer(num_envs, unroll, segments_per_rollout=segments_per_rollout or batch)
    steps = np.zeros(num_envs, np.int64)
    rollouts = []
    for _ in range(num_recvs):
        ids = np.sort(rng.choice(num_envs, batch, replace=False))  # any envs may finish first
        obs = np.stack([ids, steps[ids]], axis=1)
        ended = steps[ids] % 7 == 6
        buffer.add_observation(ids, obs, steps[ids].astype(np.float32), ended, np.zeros_like(ended))
        action = (steps[ids] * 10 + ids).astype(np.int32)  # encodes (env, step) to check alignment
        buffer.add_action(
            ids, action, {"logits": obs.astype(np.float32)}, version=int(steps[ids][0])
        )
        steps[ids] += 1
        while (rollout := buffer.pop_rollout()) is not None:
            rollouts.append(rollout)
    return rollouts


@pytest.mark.parametrize("segments_per_rollout", [4, 2, 3])
def test_segments_are_per_env_consecutive_and_overlap_by_one(segments_per_rollout):
    """Async pool (4 of 8 envs per recv); rollouts as wide as the recv batch or narrower, so
    segments left over from one recv() are carried into the next rollout."""
    unroll, batch = 5, segments_per_rollout
    rollouts = _run_fake_async_pool(
        num_envs=8, batch=4, unroll=unroll, num_recvs=200, segments_per_rollout=batch
    )
    assert len(rollouts) > 10
    last_obs_of_env = {}
    for r in rollouts:
        assert r.obs.shape == (unroll + 1, batch, 2)
        assert r.action.shape == (unroll, batch)
        assert r.agent_extras["logits"].shape == (unroll, batch, 2)
        assert r.policy_version.shape == (unroll, batch)
        for b in range(batch):
            env, step = r.obs[:, b, 0], r.obs[:, b, 1]
            assert (env == env[0]).all(), "a segment mixes envs"
            np.testing.assert_array_equal(step, step[0] + np.arange(unroll + 1))
            # action[t] was chosen at obs[t]
            np.testing.assert_array_equal(r.action[:, b], step[:-1] * 10 + env[0])
            np.testing.assert_array_equal(r.agent_extras["logits"][:, b], r.obs[:-1, b])
            np.testing.assert_array_equal(r.reward[:, b], step)
            np.testing.assert_array_equal(r.terminated[:, b], step % 7 == 6)
            if env[0] in last_obs_of_env:  # the next segment of this env starts where it ended
                assert last_obs_of_env[env[0]] == step[0]
            last_obs_of_env[env[0]] = step[-1]


def test_sync_pool_emits_whole_batches():
    rollouts = _run_fake_async_pool(num_envs=4, batch=4, unroll=3, num_recvs=13)
    assert (
        len(rollouts) == 4
    )  # 13 recvs: obs rows 0..3 fill a segment every 3 steps after the first
    for r in rollouts:
        assert sorted(r.obs[0, :, 0]) == [0, 1, 2, 3]


def test_rollouts_smaller_than_the_env_batch():
    """A rollout may hold fewer segments than one recv() completes (the learner batch and the
    env batch are independent): one recv() then yields several rollouts, none lost or mixed."""
    rollouts = _run_fake_async_pool(
        num_envs=4, batch=4, unroll=3, num_recvs=13, segments_per_rollout=2
    )
    assert len(rollouts) == 8  # the 4 whole-batch segments of each completion, 2 at a time
    for first, second in zip(rollouts[::2], rollouts[1::2], strict=True):
        assert sorted([*first.obs[0, :, 0], *second.obs[0, :, 0]]) == [0, 1, 2, 3]
        assert first.obs.shape == (4, 2, 2)


def test_dict_observations_keep_their_structure_and_alignment():
    """A view and an action mask per observation (a board game's): each leaf is cut like an
    array observation, the mask row staying with its view, across segment boundaries."""
    buffer, rollouts = SegmentBuffer(3, unroll_length=2, segments_per_rollout=3), []
    for step in range(5):
        ids = np.arange(3)
        view = np.stack([ids, np.full(3, step)], axis=1)
        mask = (np.arange(4)[None] <= (ids + step)[:, None]) % 2 == 0  # [3, 4], differs per row
        obs = {"agent_view": view, "action_mask": mask}
        buffer.add_observation(ids, obs, np.zeros(3), np.zeros(3, bool), np.zeros(3, bool))
        buffer.add_action(ids, ids.astype(np.int32), {}, version=0)
        while (rollout := buffer.pop_rollout()) is not None:
            rollouts.append(rollout)
    assert len(rollouts) == 2
    for k, rollout in enumerate(rollouts):
        assert set(rollout.obs) == {"agent_view", "action_mask"}
        assert rollout.obs["action_mask"].shape == (3, 3, 4)
        np.testing.assert_array_equal(
            rollout.obs["agent_view"][:, :, 1], np.repeat(2 * k + np.arange(3)[:, None], 3, axis=1)
        )
        for t in range(3):
            for b in range(3):
                env, step = rollout.obs["agent_view"][t, b]
                expected = (np.arange(4) <= env + step) % 2 == 0
                np.testing.assert_array_equal(rollout.obs["action_mask"][t, b], expected)
