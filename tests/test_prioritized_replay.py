"""PrioritizedReplay: n-step windows cut at segment ends, priorities against a NumPy reference,
stale ids, the rate limiter in transitions. Pure NumPy and threads."""

import math
import threading

import jax
import numpy as np
import pytest

from jaxrl_dist.data import snapshot
from jaxrl_dist.data.base import QueueItem
from jaxrl_dist.data.prioritized import PrioritizedReplay
from jaxrl_dist.types import Rollout

T = 5


def make_item(ids, ends=()) -> QueueItem:
    """`[T + 1, len(ids)]` segments whose entries encode `(id, t)`; `ends`: `(column, t)` pairs
    where `obs[t]` ends an episode (terminated when t is even, else truncated)."""
    ids = np.asarray(ids, np.int64)
    code = ids[None, :] * 100 + np.arange(T + 1)[:, None]  # [T + 1, b]
    terminated = np.zeros(code.shape, bool)
    truncated = np.zeros(code.shape, bool)
    for column, t in ends:
        (terminated if t % 2 == 0 else truncated)[t, column] = True
    return QueueItem(
        0,
        Rollout(
            obs=np.stack([code, -code], axis=-1).astype(np.float32),
            reward=(code + 0.5).astype(np.float32),
            terminated=terminated,
            truncated=truncated,
            action=code[:-1].astype(np.int32),
            agent_extras={"q": code[:-1, :, None].astype(np.float32) * [1, 2]},
            policy_version=np.broadcast_to(ids, (T, len(ids))).astype(np.int32),
        ),
    )


def make_replay(**kwargs) -> PrioritizedReplay:
    args = dict(
        capacity=100 * T,
        min_size=1,
        samples_per_insert=1.0,
        tolerance=math.inf,
        batch_size=64,
        seed=0,
        stop=threading.Event(),
        unroll_length=T,
        n_step=3,
        priority_exponent=1.0,
    )
    args.update(kwargs)
    return PrioritizedReplay(**args)


def check_windows(w: Rollout, n: int) -> None:
    """Every column of `w` (drawn from `make_item([7, 8, 9], ends=[(1, 3), (2, 2)])`) is its
    segment from the drawn transition on, cut at the segment's end."""
    starts = np.asarray(w.obs[0, :, 0]).astype(np.int64)
    ids, t0 = np.divmod(starts, 100)
    # Transitions that start at an episode end are never drawn.
    assert not np.any((ids == 8) & (t0 == 3)) and not np.any((ids == 9) & (t0 == 2))
    w = jax.tree.map(np.asarray, w)
    for j in range(len(starts)):
        t = t0[j] + np.arange(n + 1)
        code = ids[j] * 100 + np.minimum(t, T)
        np.testing.assert_array_equal(w.obs[:, j, 0], code)
        reward = np.where(t > T, 0.0, code + 0.5)
        np.testing.assert_array_equal(w.reward[:, j], reward)
        cut = t >= T
        own_cut = (ids[j] == 8) & (np.minimum(t, T) == 3)  # the env's own truncation
        np.testing.assert_array_equal(w.truncated[:, j], cut | own_cut)
        np.testing.assert_array_equal(w.terminated[:, j], (ids[j] == 9) & (np.minimum(t, T) == 2))
        step_code = ids[j] * 100 + np.minimum(t[:n], T - 1)
        np.testing.assert_array_equal(w.action[:, j], step_code)
        np.testing.assert_array_equal(w.agent_extras["q"][:, j, 1], 2 * step_code)
        np.testing.assert_array_equal(w.policy_version[:, j], ids[j])


WINDOW_ITEM = {"ids": [7, 8, 9], "ends": [(1, 3), (2, 2)]}


@pytest.mark.parametrize("n", [1, 3, T])
def test_windows_are_the_segment_cut_at_its_end(n):
    replay = make_replay(n_step=n, batch_size=256)
    replay.write(make_item(**WINDOW_ITEM))
    batch = replay.read(0)
    w = batch.data
    assert w.obs.shape[:2] == (n + 1, 256) and w.action.shape[:2] == (n, 256)
    check_windows(w, n)
    held = 3 * T
    np.testing.assert_array_equal(w.agent_extras["replay_count"], held)
    assert batch.sample_ids.shape == (256, 2)


def test_sampling_follows_priorities_and_reports_their_probabilities():
    """After priorities come back, draws follow `(p + eps) ** alpha` (within 5 standard errors
    of a NumPy reference over 200k draws), and `replay_probability` is exactly that share."""
    alpha, eps = 0.6, 1e-3
    replay = make_replay(priority_exponent=alpha, priority_epsilon=eps, batch_size=50)
    replay.write(make_item([0, 1]))  # 10 transitions, all valid
    rng = np.random.default_rng(0)
    first = replay.read(0)
    new = rng.uniform(0, 3, size=50)
    replay.update_priorities(first.sample_ids, new)
    # The reference: last priority per transition, max-so-far for the never-drawn ones.
    leaves = first.sample_ids[:, 0]
    stored = np.full(2 * T, np.nan)
    for leaf, p in zip(leaves, new, strict=True):
        stored[leaf] = (p + eps) ** alpha
    stored[np.isnan(stored)] = 1.0  # never drawn: the max priority when they went in
    draws, probs = [], {}
    for _ in range(4000):
        b = replay.read(0)
        draws.append(b.sample_ids[:, 0])
        probability = b.data.agent_extras["replay_probability"][0]
        for leaf, p in zip(b.sample_ids[:, 0], probability, strict=True):
            probs[int(leaf)] = p
    draws = np.concatenate(draws)
    expected = stored / stored.sum()
    freq = np.bincount(draws, minlength=2 * T) / draws.size
    stderr = np.sqrt(expected * (1 - expected) / draws.size)
    assert np.all(np.abs(freq - expected) <= 5 * stderr), (freq, expected)
    for leaf, p in probs.items():
        assert p == pytest.approx(expected[leaf], rel=1e-12)


def test_new_transitions_get_the_largest_priority_so_far():
    replay = make_replay(priority_exponent=1.0, priority_epsilon=1e-6, batch_size=4)
    replay.write(make_item([0]))
    batch = replay.read(0)
    replay.update_priorities(batch.sample_ids, np.array([9.0, 0.0, 0.0, 0.0]))
    replay.write(make_item([1]))
    slot1 = np.arange(T) + T
    np.testing.assert_allclose(replay._tree.get(slot1), 9.0 + 1e-6)


def test_priorities_of_an_overwritten_slot_are_dropped():
    replay = make_replay(capacity=2 * T, batch_size=8)
    replay.write(make_item([0, 1]))
    stale = replay.read(0)
    replay.write(make_item([2, 3]))  # both slots rewritten
    before = replay._tree.get(np.arange(2 * T)).copy()
    replay.update_priorities(stale.sample_ids, np.full(8, 50.0))
    np.testing.assert_array_equal(replay._tree.get(np.arange(2 * T)), before)
    fresh = replay.read(0)
    replay.update_priorities(fresh.sample_ids, np.full(8, 50.0))
    assert replay._tree.get(fresh.sample_ids[:, 0]).min() > 1.0


def test_the_rate_limiter_counts_transitions():
    """`samples_per_insert=2` counts transitions: 20 segments of T=5 pay for ~200 sampled
    transitions (40 batches of 5), within the tolerance."""
    tolerance = (5 + T * 2.0) / 2
    replay = make_replay(samples_per_insert=2.0, tolerance=tolerance, batch_size=5, min_size=T)
    reads = 0
    for i in range(20):
        assert replay._limiter.can_insert(replay._items())
        replay.write(make_item([i]))
        while replay._limiter.can_sample(replay._items()):
            replay.read(0)
            reads += 1
    limiter = replay._limiter
    assert limiter.inserted == 20 * T and limiter.sampled == 5 * reads
    assert abs(limiter.inserted * 2 - limiter.sampled - T * 2) <= tolerance
    assert 37 <= reads <= 40


@pytest.mark.parametrize(
    "kwargs,match",
    [
        ({"n_step": 0}, "n_step=0 must be in"),
        ({"n_step": T + 1}, "n_step=6 must be in"),
        ({"priority_exponent": 1.5}, "priority_exponent"),
        ({"priority_epsilon": 0.0}, "priority_epsilon"),
        ({"capacity": T - 1, "min_size": 1}, "holds no segment"),
        ({"min_size": 1000}, "smaller than min_size"),
        ({"tolerance": 1.0}, r"5 \* samples_per_insert"),
    ],
)
def test_bad_settings_are_refused(kwargs, match):
    with pytest.raises(ValueError, match=match):
        make_replay(**kwargs)


def test_bad_priorities_are_refused():
    replay = make_replay(batch_size=2)
    replay.write(make_item([0]))
    batch = replay.read(0)
    with pytest.raises(ValueError, match="finite"):
        replay.update_priorities(batch.sample_ids, np.array([1.0, np.nan]))


def _equal_trees(a, b):
    assert jax.tree.structure(a) == jax.tree.structure(b)
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True):
        np.testing.assert_array_equal(x, y)


def test_a_snapshot_restores_the_contents_priorities_and_sampling_exactly():
    """What a checkpoint saves (`config.replay.save`): a fresh replay that takes back the
    snapshot's bytes holds the same snapshot and draws the same batches, ids and all."""
    replay = make_replay(capacity=4 * T, batch_size=16, priority_exponent=0.5)
    for k in range(6):  # wraps the ring of 4 segments
        replay.write(make_item([2 * k, 2 * k + 1], ends=[(0, 2)]))
        batch = replay.read(0)
        replay.update_priorities(batch.sample_ids, np.arange(16.0) + k)
    saved = snapshot.to_bytes(replay.snapshot())
    restored = make_replay(capacity=4 * T, batch_size=16, priority_exponent=0.5)
    restored.restore(snapshot.from_bytes(saved))
    again = restored.snapshot()
    for name, value in replay.snapshot().items():
        np.testing.assert_array_equal(again[name], value, err_msg=name)
    for _ in range(3):
        a, b = replay.read(0), restored.read(0)
        _equal_trees(a.data, b.data)
        np.testing.assert_array_equal(a.sample_ids, b.sample_ids)
        assert a.env_steps == b.env_steps
    with pytest.raises(ValueError, match="resume with the run's own replay.capacity"):
        make_replay(capacity=8 * T).restore(snapshot.from_bytes(saved))


def test_a_new_priority_exponent_reweighs_every_held_priority():
    """Run-time `replay.priority_exponent`: the held priorities become what they would be had
    they been stored with the new exponent; transitions that may not be drawn stay at 0."""
    eps = 1e-3
    replay = make_replay(priority_exponent=0.6, priority_epsilon=eps, batch_size=8)
    replay.write(make_item([0, 1], ends=[(1, 2)]))
    batch = replay.read(0)
    raw = np.linspace(0.5, 4.0, 8)
    replay.update_priorities(batch.sample_ids, raw)
    before = replay._tree.get(np.arange(2 * T))
    replay.set_priority_exponent(0.3)
    after = replay._tree.get(np.arange(2 * T))
    np.testing.assert_allclose(after, np.where(before > 0, before ** (0.3 / 0.6), 0.0))
    assert after[T + 2] == 0.0  # the reset step after an episode end
    last = {int(leaf): p for leaf, p in zip(batch.sample_ids[:, 0], raw, strict=True)}
    for leaf, p in last.items():  # as if stored at 0.3 from the start
        assert after[leaf] == pytest.approx((p + eps) ** 0.3)
    replay.update_priorities(batch.sample_ids[:1], np.array([2.0]))  # new ones use 0.3
    assert replay._tree.get(batch.sample_ids[:1, 0])[0] == pytest.approx((2.0 + eps) ** 0.3)
    with pytest.raises(ValueError, match="must be in"):
        replay.set_priority_exponent(1.5)
