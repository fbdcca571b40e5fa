"""The device replay (`data/device_replay.py`): the host replay's windows, priorities and
sampling rules as pure JAX functions (the Anakin runtime's Rainbow replay)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from test_prioritized_replay import WINDOW_ITEM, T, check_windows, make_item

from jaxrl_dist.data.device_replay import DevicePrioritizedReplay, Draw, find


def make(slots=100, n_step=3, batch_size=64, alpha=1.0, eps=1e-6) -> DevicePrioritizedReplay:
    return DevicePrioritizedReplay(slots, T, n_step, batch_size, alpha, eps)


def filled(spec, *items):
    """A replay with `items` (`make_item` rollouts) inserted in order."""
    items = [jax.tree.map(jnp.asarray, item) for item in items]
    state = spec.init(items[0], jax.random.PRNGKey(0))
    for item in items:
        state = jax.jit(spec.insert)(state, item)
    return state


@pytest.mark.parametrize("n", [1, 3, T])
def test_windows_are_the_segment_cut_at_its_end(n):
    """The same checks as the host replay's windows, on the device's draws."""
    spec = make(n_step=n, batch_size=256)
    state = filled(spec, make_item(**WINDOW_ITEM).rollout)
    state, window, draw = jax.jit(spec.sample)(state)
    assert window.obs.shape[:2] == (n + 1, 256) and window.action.shape[:2] == (n, 256)
    check_windows(window, n)
    np.testing.assert_array_equal(window.agent_extras["replay_count"], 3 * T)
    np.testing.assert_array_equal(np.asarray(window.obs[0, :, 0]) // 100, np.asarray(draw.slot) + 7)
    np.testing.assert_array_equal(np.asarray(window.obs[0, :, 0]) % 100, draw.t)


def test_insert_sets_new_priorities_and_wraps_the_ring():
    """New transitions get the largest stored priority, 0 where they start at an episode end;
    a fifth segment in a ring of 4 overwrites the oldest."""
    spec = make(slots=4, batch_size=4)
    state = filled(spec, make_item([0, 1, 2], ends=[(1, 3)]).rollout)
    np.testing.assert_array_equal(state.priority[1], [1, 1, 1, 0, 1])
    np.testing.assert_array_equal(state.priority[3], 0)  # not written yet
    draw = Draw(jnp.array([0, 0, 2, 2]), jnp.array([1, 1, 4, 0]))
    state = spec.set_priorities(state, draw, jnp.array([4.0, 9.0, 2.0, 0.5]))
    assert float(state.max_priority) == pytest.approx(9.0 + 1e-6)
    state = jax.jit(spec.insert)(state, jax.tree.map(jnp.asarray, make_item([3, 4]).rollout))
    assert int(state.size) == 4 and int(state.next_slot) == 1
    ids = np.asarray(state.ring.obs[0, :, 0]) // 100
    np.testing.assert_array_equal(ids, [4, 1, 2, 3])
    np.testing.assert_allclose(state.priority[0], 9.0 + 1e-6)  # slot 0 rewritten: max priority
    np.testing.assert_allclose(state.priority[2], [0.5 + 1e-6, 1, 1, 1, 2 + 1e-6])


def test_a_transition_drawn_twice_keeps_its_last_priority():
    spec = make(slots=2, batch_size=5, alpha=0.5, eps=1e-3)
    state = filled(spec, make_item([0, 1]).rollout)
    draw = Draw(jnp.array([1, 0, 1, 1, 0]), jnp.array([2, 2, 2, 3, 0]))
    state = jax.jit(spec.set_priorities)(state, draw, jnp.array([1.0, 2.0, 3.0, 4.0, 5.0]))
    stored = lambda p: (p + 1e-3) ** 0.5  # noqa: E731
    np.testing.assert_allclose(state.priority[1, 2], stored(3.0), rtol=1e-6)
    np.testing.assert_allclose(state.priority[1, 3], stored(4.0), rtol=1e-6)
    np.testing.assert_allclose(state.priority[0, [0, 2]], [stored(5.0), stored(2.0)], rtol=1e-6)
    np.testing.assert_array_equal(state.priority[0, [1, 3, 4]], 1.0)
    np.testing.assert_allclose(state.max_priority, stored(5.0), rtol=1e-6)


def test_sampling_follows_priorities_and_reports_their_probabilities():
    """Over 200k draws the frequencies are the stored priorities' shares (within 5 standard
    errors), `replay_probability` is exactly that share, and a transition with priority 0 (an
    episode end, or a slot's step zeroed here by hand) is never drawn."""
    spec = make(slots=4, batch_size=50, alpha=0.6, eps=1e-3)
    state = filled(spec, make_item([0, 1, 2], ends=[(2, 1)]).rollout)
    rng = np.random.default_rng(0)
    priority = np.where(np.asarray(state.priority) > 0, rng.uniform(0, 3, (4, T)), 0.0)
    priority[0, 3] = 0.0
    state = state._replace(priority=jnp.asarray(priority, jnp.float32))

    def draws(state, _):
        state, window, draw = spec.sample(state)
        return state, (draw.slot * T + draw.t, window.agent_extras["replay_probability"][0])

    _, (leaves, probability) = jax.jit(lambda s: jax.lax.scan(draws, s, None, 4000))(state)
    leaves, probability = np.asarray(leaves).ravel(), np.asarray(probability).ravel()
    expected = priority.ravel() / priority.sum()
    freq = np.bincount(leaves, minlength=4 * T) / leaves.size
    stderr = np.sqrt(expected * (1 - expected) / leaves.size)
    assert np.all(np.abs(freq - expected) <= 5 * stderr + 1e-12), (freq, expected)
    assert np.all(expected[leaves] > 0)
    np.testing.assert_allclose(probability, expected[leaves], rtol=1e-5)


def test_draws_are_stratified():
    """One draw in each of `batch_size` equal slices of the mass: with uniform priorities over
    64 transitions and a batch of 64, every transition is drawn exactly once."""
    spec = make(slots=16, batch_size=64)
    state = filled(spec, make_item(list(range(16))).rollout)
    state = state._replace(priority=jnp.ones((16, T), jnp.float32).at[:, 4].set(0.0))
    _, _, draw = jax.jit(spec.sample)(state)
    leaves = np.sort(np.asarray(draw.slot) * T + np.asarray(draw.t))
    np.testing.assert_array_equal(leaves, [s * T + t for s in range(16) for t in range(4)])


@pytest.mark.parametrize(("seed", "flaw"), [(0, "steps down"), (19, "steps up over empty")])
def test_draws_at_every_boundary_of_a_large_partly_filled_ring_have_mass(seed, flaw):
    """XLA's float32 running sum over slots is not added in order: for these fills of a
    3,125-slot ring (the CartPole config's) it `flaw`s (checked here, so the test keeps its
    teeth). Points at, just below and just above every boundary of XLA's own running sums, and
    the top of the mass, all land on transitions with priority > 0 in filled slots."""
    rng = np.random.default_rng(seed)
    filled = int(rng.integers(50, 3000))
    priority = np.zeros((3125, 16), np.float32)
    priority[:filled] = rng.uniform(0.01, 30, (filled, 16)).astype(np.float32)
    priority[np.arange(filled), rng.integers(0, 16, filled)] = 0.0  # episode ends
    priority[[3, 40]] = 0.0  # whole slots without mass inside the filled part
    p = jnp.asarray(priority)
    cdf = np.asarray(jax.jit(lambda p: jnp.cumsum(jnp.sum(p, 1)))(p))
    steps = np.diff(cdf)
    assert np.any(steps < 0) if flaw == "steps down" else np.any(steps[filled:] > 0)
    rows = np.asarray(jax.jit(lambda p: jnp.cumsum(p, axis=1))(p))[:filled]
    edges = np.concatenate([cdf, (rows + np.r_[0, cdf[: filled - 1]][:, None]).ravel()])
    edges = np.unique(edges[edges > 0]).astype(np.float32)
    u = np.concatenate([edges, np.nextafter(edges, 0), np.nextafter(edges, np.inf), [0.0]])
    u = np.minimum(u, np.nextafter(np.float32(cdf[-1]), 0))
    draw = jax.jit(find)(p, jnp.asarray(u, jnp.float32))
    slot, t = np.asarray(draw.slot), np.asarray(draw.t)
    assert slot.max() < filled and np.all(priority[slot, t] > 0)


def test_the_host_and_device_replays_keep_the_same_priorities():
    """The same inserts and learner priorities (drawn by the host replay, duplicates included,
    then two more segments that wrap the ring) leave the same stored priorities and running
    maximum in both replays, and the device reports the host's probabilities."""
    from test_prioritized_replay import make_replay

    host = make_replay(capacity=4 * T, batch_size=32, priority_exponent=0.6, priority_epsilon=1e-3)
    spec = make(slots=4, batch_size=32, alpha=0.6, eps=1e-3)
    first = make_item([0, 1, 2], ends=[(1, 3), (2, 0)])
    host.write(first)
    device = filled(spec, first.rollout)
    batch = host.read(0)
    priorities = np.random.default_rng(1).uniform(0, 5, 32)
    host.update_priorities(batch.sample_ids, priorities)
    leaves = batch.sample_ids[:, 0]
    draw = Draw(jnp.asarray(leaves // T, jnp.int32), jnp.asarray(leaves % T, jnp.int32))
    device = spec.set_priorities(device, draw, jnp.asarray(priorities, jnp.float32))
    second = make_item([3, 4], ends=[(0, 4)])
    host.write(second)
    device = jax.jit(spec.insert)(device, jax.tree.map(jnp.asarray, second.rollout))
    stored = host._tree.get(np.arange(4 * T))
    np.testing.assert_allclose(np.asarray(device.priority).ravel(), stored, rtol=1e-6)
    assert float(device.max_priority) == pytest.approx(host._max_priority, rel=1e-6)
    _, window, draw = jax.jit(spec.sample)(device)
    leaf = np.asarray(draw.slot) * T + np.asarray(draw.t)
    np.testing.assert_allclose(
        window.agent_extras["replay_probability"][0], stored[leaf] / stored.sum(), rtol=1e-5
    )
