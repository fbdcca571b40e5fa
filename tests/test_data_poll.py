"""`read(updates, wait=False)`: a data flow polled among others never waits, keeps what it
took towards its next batch, and answers exactly as a waiting read would once ready (the
seam several learners in one run will share; issue 40)."""

import threading
import time

import jax
import numpy as np
from test_replay import make_item, make_replay

from jaxrl_dist.data.base import NOT_READY
from jaxrl_dist.data.on_policy import OnPolicyQueue
from jaxrl_dist.threads import POLL_S


def make_queue(need=3, maxsize=4, max_lag=0, ordered=False):
    return OnPolicyQueue(
        maxsize=maxsize,
        items_per_batch=need,
        max_policy_lag=max_lag,
        in_actor_order=ordered,
        stop_writers=threading.Event(),
        stop_reading=threading.Event(),
    )


def _fast(fn):
    start = time.monotonic()
    out = fn()
    assert time.monotonic() - start < POLL_S / 2, "a poll waited"
    return out


def test_an_on_policy_poll_keeps_what_it_took_and_returns_the_same_batch():
    polled, waited = make_queue(), make_queue()
    ids = [[0, 1], [2, 3], [4, 5]]
    for q in (polled, waited):
        q.write(make_item(ids[0]))
    assert _fast(lambda: polled.read(7, wait=False)) is NOT_READY
    assert polled.size == 0  # taken: held towards the batch
    for q in (polled, waited):
        q.write(make_item(ids[1]))
        q.write(make_item(ids[2]))
        q.write(make_item([6, 7]))  # the next batch's
    batch = _fast(lambda: polled.read(7, wait=False))
    want = waited.read(7)
    assert polled.size == waited.size == 1  # never more than a batch taken: back-pressure
    assert (batch.env_steps, batch.dropped) == (want.env_steps, want.dropped) == (6 * 3, 0)
    jax.tree.map(np.testing.assert_array_equal, batch.data, want.data)
    assert _fast(lambda: polled.read(8, wait=False)) is NOT_READY  # [6, 7] held again


def test_an_on_policy_poll_counts_stragglers_and_stops():
    q = make_queue(need=2, max_lag=1)
    q.write(make_item([0, 0]))  # acted with params of update 0: too old at update 5
    q.write(make_item([5, 5]))
    assert q.read(5, wait=False) is NOT_READY
    q.write(make_item([4, 4]))
    batch = q.read(5, wait=False)
    assert (batch.dropped, batch.env_steps) == (1, 3 * 2 * 3)  # the straggler's steps count
    assert batch.data.policy_version[0].tolist() == [5, 5, 4, 4]
    q.write(make_item([5, 5]))
    q._stop.set()
    assert q.read(5, wait=False) is None


def test_a_replay_poll_answers_at_once_and_samples_as_a_read_would():
    polled, waited = make_replay(min_size=4, batch_size=2), make_replay(min_size=4, batch_size=2)
    for r in (polled, waited):
        r.write(make_item([0, 1, 2]))
    assert _fast(lambda: polled.read(0, wait=False)) is NOT_READY  # below min_size
    for r in (polled, waited):
        r.write(make_item([3]))
    batch, want = _fast(lambda: polled.read(0, wait=False)), waited.read(0)
    assert batch.env_steps == want.env_steps == 4 * 3
    np.testing.assert_array_equal(batch.sample_ids, want.sample_ids)  # same seed, same draw
    assert polled.stats()["sampled"] == waited.stats()["sampled"] == 2
    polled._stop.set()
    assert polled.read(0, wait=False) is None
