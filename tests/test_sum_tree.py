"""The sum tree against a NumPy reference: totals, lookups and sampling frequencies."""

import numpy as np
import pytest

from jaxrl_dist.data.sum_tree import SumTree


@pytest.mark.parametrize("capacity", [1, 2, 5, 64, 1000])
def test_find_matches_a_cumulative_sum_search(capacity):
    rng = np.random.default_rng(capacity)
    tree = SumTree(capacity)
    p = rng.uniform(0, 2, size=capacity) * (rng.uniform(size=capacity) < 0.7)  # some zeros
    p[0] = max(p[0], 0.1)
    tree.set(np.arange(capacity), p)
    assert tree.total == pytest.approx(p.sum())
    np.testing.assert_array_equal(tree.get(np.arange(capacity)), p)
    u = rng.uniform(0, p.sum(), size=500)
    expected = np.searchsorted(np.cumsum(p), u, side="right")
    np.testing.assert_array_equal(tree.find(u), expected)
    assert np.all(p[tree.find(u)] > 0)


def test_updates_in_batches_with_repeats_keep_the_sums():
    rng = np.random.default_rng(0)
    tree, reference = SumTree(37), np.zeros(37)
    for _ in range(200):
        idx = rng.integers(0, 37, size=rng.integers(0, 9))
        new = rng.exponential(size=idx.size)
        tree.set(idx, new)
        for i, v in zip(idx, new, strict=True):  # last write wins, as NumPy assignment
            reference[i] = v
    np.testing.assert_allclose(tree.get(np.arange(37)), reference)
    assert tree.total == pytest.approx(reference.sum())


def test_sampling_frequencies_follow_the_priorities():
    """200k draws: every item's frequency within 5 standard errors of p_i / sum(p)."""
    rng = np.random.default_rng(1)
    p = np.array([0.0, 1.0, 2.0, 0.5, 10.0, 0.0, 3.0, 0.01])
    tree = SumTree(len(p))
    tree.set(np.arange(len(p)), p)
    n = 200_000
    draws = np.concatenate([tree.sample(rng, 100) for _ in range(n // 100)])
    freq = np.bincount(draws, minlength=len(p)) / n
    expected = p / p.sum()
    stderr = np.sqrt(expected * (1 - expected) / n)
    assert np.all(np.abs(freq - expected) <= 5 * stderr + 1e-12), (freq, expected)
    assert freq[0] == 0 and freq[5] == 0


def test_bad_input():
    tree = SumTree(4)
    with pytest.raises(ValueError, match="all 0"):
        tree.sample(np.random.default_rng(0), 2)
    with pytest.raises(ValueError, match="finite"):
        tree.set(np.array([0]), np.array([np.nan]))
    with pytest.raises(ValueError, match=">= 0"):
        tree.set(np.array([0]), np.array([-1.0]))
    with pytest.raises(IndexError):
        tree.set(np.array([4]), np.array([1.0]))
    with pytest.raises(ValueError, match="capacity"):
        SumTree(0)
