"""Tests for `jaxrl_dist.ops.running_stats` against exact NumPy moments of all data seen."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxrl_dist.ops.running_stats import (
    RunningStats,
    init_running_stats,
    normalize,
    update_running_stats,
)

INIT_COUNT = 1e-4
SHAPES = [(3,), (2, 4)]
LEADS = [(64,), (8, 16), (2, 5, 7), (300,)]  # [N], [T, B], more leading dims; varying sizes.


def _batches(shape, seed=0):
    """Batches of varying sizes and leading dims with distinct per-feature means and scales."""
    rng = np.random.default_rng(seed)
    loc = rng.uniform(-5, 5, size=shape)
    scale = rng.uniform(0.5, 3, size=shape)
    return [(loc + scale * rng.normal(size=(*lead, *shape))).astype(np.float32) for lead in LEADS]


def _exact_moments(data, shape):
    """Exact mean/var of all data plus the initial pseudo-sample (count 1e-4, mean 0, var 1)."""
    flat = np.concatenate([d.reshape(-1, *shape) for d in data]).astype(np.float64)
    total = len(flat) + INIT_COUNT
    mean = flat.sum(0) / total
    m2 = ((flat - mean) ** 2).sum(0) + INIT_COUNT * (1.0 + mean**2)
    return mean, m2 / total, total, flat


_update_jit = jax.jit(update_running_stats)


def _run(stats, batches, update=_update_jit):
    for batch in batches:
        stats = update(stats, jnp.asarray(batch))
    return stats


def test_init():
    stats = init_running_stats((2, 3))
    assert isinstance(stats, RunningStats)
    np.testing.assert_array_equal(stats.mean, np.zeros((2, 3)))
    np.testing.assert_array_equal(stats.var, np.ones((2, 3)))
    assert stats.count.shape == () and float(stats.count) == pytest.approx(INIT_COUNT)
    assert all(leaf.dtype == jnp.float32 for leaf in stats)


@pytest.mark.parametrize("shape", SHAPES)
def test_matches_moments_of_all_data(shape):
    batches = _batches(shape)
    stats = _run(init_running_stats(shape), batches)
    mean, var, count, flat = _exact_moments(batches, shape)
    assert all(leaf.dtype == jnp.float32 for leaf in stats)
    assert stats.mean.shape == shape and stats.var.shape == shape and stats.count.shape == ()
    np.testing.assert_allclose(stats.mean, mean, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(stats.var, var, rtol=1e-4)
    np.testing.assert_allclose(stats.count, count, rtol=1e-6)
    # The pseudo-count is negligible next to the data: plain NumPy moments agree too.
    np.testing.assert_allclose(stats.mean, flat.mean(0), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(stats.var, flat.var(0), rtol=1e-3)


def test_jit_matches_eager():
    batches = _batches((3,), seed=1)
    eager = _run(init_running_stats((3,)), batches, update_running_stats)
    jitted = _run(init_running_stats((3,)), batches, jax.jit(update_running_stats))
    for a, b in zip(eager, jitted, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-6)
        assert b.dtype == jnp.float32


def test_mask_excludes_entries():
    shape = (3,)
    rng = np.random.default_rng(2)
    x = rng.normal(2.0, 3.0, size=(10, 6, *shape)).astype(np.float32)
    mask = rng.uniform(size=(10, 6)) < 0.6
    x_garbage = np.where(mask[..., None], x, np.float32(1e30))
    x_garbage[~mask & (rng.uniform(size=(10, 6)) < 0.5)] = np.nan  # Some masked entries NaN.
    stats = _run(init_running_stats(shape), _batches(shape, seed=3))
    masked = jax.jit(update_running_stats)(stats, x_garbage, mask.astype(np.float32))
    selected = update_running_stats(stats, x[mask])
    for a, b in zip(masked, selected, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-6)
    nothing = update_running_stats(stats, x_garbage, np.zeros((10, 6), np.float32))
    for a, b in zip(nothing, stats, strict=True):
        np.testing.assert_array_equal(a, b)


def test_normalize_standardises_data():
    shape = (2, 4)
    batches = _batches(shape, seed=4)
    stats = _run(init_running_stats(shape), batches)
    flat = np.concatenate([b.reshape(-1, *shape) for b in batches])
    out = jax.jit(normalize)(stats, flat)
    assert out.shape == flat.shape and out.dtype == jnp.float32
    np.testing.assert_allclose(out.mean(0), 0.0, atol=1e-4)
    np.testing.assert_allclose(out.std(0), 1.0, atol=1e-4)
    lead = normalize(stats, batches[2])  # Any leading dims.
    np.testing.assert_allclose(
        lead, normalize(stats, batches[2].reshape(-1, *shape)).reshape(lead.shape), rtol=1e-6
    )


def test_normalize_clips_and_casts():
    stats = RunningStats(jnp.array([1.0, 0.0]), jnp.array([4.0, 1.0]), jnp.array(10.0))
    x = np.array([[3, 255], [0, 1]], np.uint8)
    out = normalize(stats, x, clip=5.0)
    assert out.dtype == jnp.float32
    np.testing.assert_allclose(out, [[1.0, 5.0], [-0.5, 1.0]], rtol=1e-6)
    np.testing.assert_allclose(normalize(stats, -x.astype(np.float32) * 100)[0], [-10.0, -10.0])
