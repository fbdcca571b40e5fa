"""UniformReplay: FIFO segment ring, uniform sampling, the rate limiter, stop and dead actors.

Pure NumPy and threads. Every segment is built from an id, so a sampled column can be checked
against the segment it must be a copy of, field by field.
"""

import math
import threading
import time

import jax
import numpy as np
import pytest

from jaxrl_dist.data.base import QueueItem
from jaxrl_dist.data.replay import UniformReplay
from jaxrl_dist.errors import RunError
from jaxrl_dist.threads import POLL_S
from jaxrl_dist.types import Rollout

T = 3


def make_item(ids, unroll=T) -> QueueItem:
    """A `[T + 1, len(ids)]` rollout whose column j holds values derived from `ids[j]` and t."""
    ids = np.asarray(ids, np.int64)
    base = ids[None, :] * 100 + np.arange(unroll + 1)[:, None]  # [T + 1, b]
    act = base[:-1]  # action[t] is taken at obs[t]
    rollout = Rollout(
        obs=np.stack([base, -base], axis=-1).astype(np.float32),
        reward=(base * 0.5).astype(np.float32),
        terminated=base % 2 == 0,
        truncated=base % 3 == 0,
        action=act.astype(np.int32),
        agent_extras={
            "logits": np.stack([act, act + 1, act + 2], axis=-1).astype(np.float32),
            "value": act.astype(np.float64),
        },
        policy_version=np.broadcast_to(ids, act.shape).astype(np.int32),
    )
    return QueueItem(0, rollout)


def assert_segments_of(batch, held):
    """Each column of `batch.data` is exactly the inserted segment of its id, all of it."""
    ids = batch.data.policy_version[0]
    assert set(ids.tolist()) <= set(held)
    expected = make_item(ids).rollout

    def same(got, want):
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)

    jax.tree.map(same, batch.data, expected)


def make_replay(**kwargs) -> UniformReplay:
    args = dict(
        capacity=100,
        min_size=1,
        samples_per_insert=1.0,
        tolerance=math.inf,
        batch_size=4,
        seed=0,
        stop=threading.Event(),
    )
    args.update(kwargs)
    return UniformReplay(**args)


class Background(threading.Thread):
    """Runs `fn()` in a daemon thread; keeps its result or exception."""

    def __init__(self, fn):
        super().__init__(daemon=True)
        self.fn, self.result, self.error = fn, None, None
        self.start()

    def run(self):
        try:
            self.result = self.fn()
        except BaseException as e:  # checked by the test
            self.error = e


@pytest.fixture
def stop():
    """The run's stop flag, set by a watchdog after a few seconds: a hang fails, not stalls."""
    event = threading.Event()
    watchdog = threading.Timer(3.0, event.set)
    watchdog.start()
    yield event
    event.set()
    watchdog.cancel()


def writer_loop(replay, stop, width=2):
    """Writes items of `width` fresh segments until `stop`."""
    next_id = 0
    while not stop.is_set():
        replay.write(make_item(range(next_id, next_id + width)))
        next_id += width


def test_fifo_overwrite_keeps_the_newest_segments_whole():
    replay = make_replay(capacity=4, batch_size=8)
    replay.write(make_item([0, 1, 2]))
    item = make_item([3, 4, 5])
    replay.write(item)
    item.rollout.obs[...] = -7  # the replay holds copies of what was written
    assert replay.size == 4
    replay.write(make_item([6]))  # wraps around a second time
    assert replay.size == 4
    drawn = set()
    for _ in range(50):
        batch = replay.read(0)
        assert batch.data.obs.shape == (T + 1, 8, 2)
        assert batch.data.agent_extras["logits"].shape == (T, 8, 3)
        assert_segments_of(batch, held={3, 4, 5, 6})
        drawn |= set(batch.data.policy_version[0].tolist())
        batch.data.obs[...] = -7  # and hands out copies, not views of its rings
    assert drawn == {3, 4, 5, 6}


def test_uniform_sampling_and_seeded():
    def draws(seed):
        replay = make_replay(capacity=10, batch_size=50, seed=seed)
        replay.write(make_item(range(10)))
        return np.concatenate([replay.read(0).data.policy_version[0] for _ in range(200)])

    ids = draws(seed=3)
    counts = np.bincount(ids, minlength=10)
    expected = len(ids) / 10
    chi2 = ((counts - expected) ** 2 / expected).sum()
    assert counts.min() > 0 and chi2 < 50, counts  # 9 dof: P(chi2 > 50) ~ 1e-7
    np.testing.assert_array_equal(ids, draws(seed=3))
    assert not np.array_equal(ids, draws(seed=4))


def test_env_steps_are_counted_since_the_previous_read():
    replay = make_replay(batch_size=2)
    replay.write(make_item([0, 1, 2]))
    batch = replay.read(0)
    assert (batch.env_steps, batch.dropped, batch.env_actions) == (3 * T, 0, None)
    replay.write(make_item([3, 4]))
    replay.write(make_item([5, 6]))
    assert replay.read(0).env_steps == 4 * T
    assert replay.read(0).env_steps == 0
    assert replay.stats()["inserted"] == 7 and replay.stats()["sampled"] == 6
    assert UniformReplay.env_steps_per_update(20, 32, 4.0) == 160.0


def test_min_size_blocks_reads_but_never_writes():
    # A wide tolerance: only the size rule holds the read back.
    replay = make_replay(min_size=5, samples_per_insert=2.0, tolerance=100.0, batch_size=2)
    reader = Background(lambda: replay.read(0))
    writer = Background(lambda: replay.write(make_item([0, 1, 2, 3])))
    writer.join(1.0)
    assert not writer.is_alive() and writer.result < 0.05
    time.sleep(3 * POLL_S)
    assert reader.is_alive(), "read returned before min_size segments were in"
    assert replay.write(make_item([4])) < 0.05
    reader.join(1.0)
    assert not reader.is_alive() and reader.error is None
    assert_segments_of(reader.result, held=range(5))


def test_rate_limiter_blocks_each_side_exactly_at_its_limit(stop):
    # SPI 1, min_size 4, tolerance 2: diff = inserted - sampled, min_diff 2, max_diff 6.
    replay = make_replay(min_size=4, tolerance=2.0, batch_size=2, stop=stop)
    for i in range(6):  # diff 1 .. 6: the 6th lands exactly on max_diff
        assert replay.write(make_item([i])) < 0.05
    writer = Background(lambda: replay.write(make_item([6])))
    time.sleep(3 * POLL_S)
    assert writer.is_alive() and replay.size == 6, "insert beyond max_diff was not blocked"
    assert replay.read(0) is not None  # diff 4: the writer's segment fits (5)
    writer.join(1.0)
    assert not writer.is_alive() and writer.error is None
    assert replay.size == 7 and writer.result >= 2 * POLL_S
    assert replay.stats()["insert_wait_s"] == pytest.approx(writer.result)
    assert replay.read(0) is not None  # diff 3
    reader = Background(lambda: replay.read(0))  # 3 - 2 is below min_diff
    time.sleep(2 * POLL_S)
    assert reader.is_alive(), "sample beyond min_diff was not blocked"
    assert replay.write(make_item([7])) < 0.05  # diff 4: 4 - 2 lands exactly on min_diff
    reader.join(1.0)
    assert not reader.is_alive() and reader.result is not None
    assert replay.stats()["sampled"] == 6


def test_an_item_split_by_the_limiter_keeps_its_columns(stop):
    # SPI 50, tolerance 26: min_diff 24, max_diff 76. Segment 0 takes diff to 50, segment 1
    # waits until 24 reads of one segment bring it to 26, then 52 more reads are allowed.
    replay = make_replay(
        capacity=4, samples_per_insert=50.0, tolerance=26.0, batch_size=1, stop=stop
    )
    writer = Background(lambda: replay.write(make_item([0, 1])))
    time.sleep(2 * POLL_S)
    assert writer.is_alive() and replay.size == 1
    drawn = [replay.read(0) for _ in range(24)]
    writer.join(1.0)
    assert not writer.is_alive() and replay.size == 2
    drawn += [replay.read(0) for _ in range(52)]
    for batch in drawn:
        assert_segments_of(batch, held={0, 1})
    assert {int(b.data.policy_version[0, 0]) for b in drawn[24:]} == {0, 1}


def test_rate_limiter_holds_the_ratio_with_a_concurrent_writer(stop):
    spi, min_size, tolerance = 1.0, 8, 3.0
    replay = make_replay(
        capacity=64, min_size=min_size, samples_per_insert=spi, tolerance=tolerance, stop=stop
    )
    writer = Background(lambda: writer_loop(replay, stop, width=3))
    try:
        for _ in range(200):
            assert replay.read(0) is not None
            s = replay.stats()
            error = (s["inserted"] - min_size) * spi - s["sampled"]
            assert -tolerance <= error <= tolerance, s
    finally:
        stop.set()
        writer.join(1.0)
    assert writer.error is None
    assert abs(s["sampled"] / s["inserted"] - spi) <= (tolerance + min_size * spi) / s["inserted"]


@pytest.mark.parametrize("spi, batch_size", [(1.0, 4), (0.3, 3), (2.5, 1), (4.0, 6)])
def test_smallest_tolerance_cannot_deadlock(spi, batch_size, stop):
    least = (batch_size + spi) / 2
    with pytest.raises(ValueError, match="tolerance"):
        make_replay(samples_per_insert=spi, tolerance=least - 0.01, batch_size=batch_size)
    replay = make_replay(
        capacity=20,
        min_size=5,
        samples_per_insert=spi,
        tolerance=least,
        batch_size=batch_size,
        stop=stop,
    )
    writer = Background(lambda: writer_loop(replay, stop, width=2))
    try:
        for i in range(100):
            assert replay.read(0) is not None, f"deadlocked after {i} reads"
    finally:
        stop.set()  # the watchdog turns a deadlock into read() -> None
        writer.join(1.0)
    assert writer.error is None


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(min_size=0), "min_size"),
        (dict(capacity=3, min_size=4), "capacity"),
        (dict(batch_size=0), "batch_size"),
        (dict(samples_per_insert=0.0), "samples_per_insert"),
        (dict(samples_per_insert=1.0, batch_size=4, tolerance=2.4), "tolerance"),
        (dict(tolerance=math.nan), "tolerance"),
    ],
)
def test_bad_settings_are_refused(kwargs, match):
    with pytest.raises(ValueError, match=match) as info:
        make_replay(**kwargs)
    assert "\n" not in str(info.value) and "--" not in str(info.value)


def test_stop_releases_a_blocked_write_and_a_blocked_read(stop):
    full = make_replay(min_size=1, tolerance=1.0, batch_size=1, stop=stop)  # max_diff 2
    assert full.write(make_item([0, 1])) < 1.0  # diff 1, then 2 = max_diff: no blocking
    writer = Background(lambda: full.write(make_item([2, 3])))
    empty = make_replay(stop=stop)
    reader = Background(lambda: empty.read(0))
    time.sleep(2 * POLL_S)
    assert writer.is_alive() and reader.is_alive()
    start = time.monotonic()
    stop.set()
    writer.join(3.0)
    reader.join(3.0)
    assert not writer.is_alive() and not reader.is_alive()
    assert time.monotonic() - start < 3.0  # within a few polls; slack for a busy CI machine
    assert reader.error is None and reader.result is None
    assert writer.error is None and full.size == 2  # returned without inserting
    assert full.read(0) is None  # data held, but stopped


class ActorDied(Exception):
    pass


@pytest.mark.parametrize("set_later", [False, True])
def test_check_actors_runs_while_read_waits_and_its_error_propagates(set_later):
    calls = []

    def check_actors():
        calls.append(time.monotonic())
        if len(calls) == 3:
            raise ActorDied("actor 0 died")

    if set_later:  # the run sets it once its actors exist
        replay = make_replay(dead_timeout_s=5.0)
        replay.check_actors = check_actors
    else:
        replay = make_replay(check_actors=check_actors, dead_timeout_s=5.0)
    start = time.monotonic()
    with pytest.raises(ActorDied):
        replay.read(0)
    assert len(calls) == 3
    # Three polls (3 * POLL_S) well before the 5 s dead timeout; the slack is for busy CI.
    assert time.monotonic() - start < 3 * POLL_S + 1.5


def test_no_inserts_for_dead_timeout_raises_run_error():
    replay = make_replay(dead_timeout_s=0.3)
    start = time.monotonic()
    with pytest.raises(RunError, match="no data inserted for 0.3s"):
        replay.read(0)
    assert 0.3 <= time.monotonic() - start < 2.0  # slack for a busy CI machine


def test_inserts_while_waiting_reset_the_dead_timeout(stop):
    # Inserts 0.25 s apart against a 2 s timeout: the 8x margin absorbs a writer thread
    # starved by a busy CI machine (a 2.5x margin once failed there), while the whole wait
    # (2.5 s) still outlasts the timeout, which is what the test is about.
    replay = make_replay(min_size=10, dead_timeout_s=2.0, stop=stop)

    def trickle():
        for i in range(10):
            time.sleep(0.25)
            replay.write(make_item([i]))

    writer = Background(trickle)
    batch = replay.read(0)  # waits ~2.5 s, longer than dead_timeout_s, with inserts arriving
    writer.join(1.0)
    assert batch is not None
    assert_segments_of(batch, held=range(10))


def test_a_new_ratio_goes_on_from_the_counts():
    """Run-time `replay.samples_per_insert`: the limiter keeps `diff`'s distance from the
    middle of its range (clamped into the new range), so neither side pays for what the old
    ratio owed; then the new ratio holds."""
    from fractions import Fraction

    from jaxrl_dist.data.rate_limiter import RateLimiter

    old = RateLimiter(min_size=4, samples_per_insert=1.0, tolerance=4.0, batch_size=2)
    old.record_inserts(10)  # range [0, 8] around 4 (min_size x SPI)
    for _ in range(3):
        old.record_sample()  # diff 10 - 6 = 4: the middle
    new = old.with_ratio(4.0, 10.0)  # middle 16, range [6, 26]
    assert (new.inserted, new.sampled) == (10, 6)
    assert new._diff() == 16  # at the middle, as before
    samples = 0
    while new.can_sample(size=10):
        new.record_sample()
        samples += 1
    assert samples == 5  # 16 - 5 * 2 = 6, the bottom: 10 samples for no insert
    new.record_inserts(1)  # + 4
    assert new.can_sample(size=11) and new._diff() == 10
    assert new._spi == Fraction(4)
    with pytest.raises(ValueError, match="tolerance"):
        old.with_ratio(40.0, 2.0)  # too narrow for a batch and an insert: refused
    # Before the first sample (the replay filling) nothing is owed: the new ratio counts from
    # the start; a resume gives the saved offset back exactly.
    filling = RateLimiter(min_size=1000, samples_per_insert=1.0, tolerance=100.0, batch_size=2)
    filling.record_inserts(100)
    assert filling.with_ratio(2.0, 100.0).offset == 0
    assert new.with_ratio(4.0, 10.0, offset=new.offset).offset == new.offset != 0


def test_a_snapshot_keeps_a_run_time_ratio_exactly():
    """The limiter's offset goes into the replay's snapshot (exact: a Fraction), so a resume
    that puts the ratio in force back (`set_rate(..., resumed=True)`) has the limiter as it
    was; without the offset, the counts at the config's ratio would hold the learner back."""
    from jaxrl_dist.data import snapshot

    replay = make_replay(min_size=4, tolerance=8.0, batch_size=2)
    for i in range(8):
        replay.write(make_item([i]))
    for _ in range(3):
        replay.read(0)
    replay.set_rate(0.3, 8.0)  # a ratio a float cannot hold exactly
    before = replay._limiter
    assert before.offset != 0
    again = make_replay(min_size=4, tolerance=8.0, batch_size=2)
    again.restore(snapshot.from_bytes(snapshot.to_bytes(replay.snapshot())))
    again.set_rate(0.3, 8.0, resumed=True)
    after = again._limiter
    assert (after.inserted, after.sampled, after.offset) == (8, 6, before.offset)
    assert after._diff() == before._diff() and again.rate_problem(0.3, 8.0) is None
