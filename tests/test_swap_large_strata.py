"""Large strata are deranged one by one (rejection on one permutation): still exactly uniform."""

from __future__ import annotations

import numpy as np
from scipy import stats

import dpspec_swap.derangements as derangements
from dpspec_swap.algorithm import uniform_derangements
from tests.test_swap_algorithm import ALPHA, pattern_counts


def test_per_stratum_path_is_uniform_over_derangements(monkeypatch):
    monkeypatch.setattr(derangements, "LARGE_STRATUM", 4)  # sizes 4 and 5 take the per-stratum path
    rng = np.random.default_rng(20261123)
    sizes = rng.permutation(np.repeat([4, 5, 2, 3], [4_500, 8_800, 300, 300]))
    perm = uniform_derangements(sizes, rng)
    for k in (4, 5):
        counts = pattern_counts(perm, sizes, k)
        assert len(counts) == {4: 9, 5: 44}[k]
        assert stats.chisquare(counts).pvalue > ALPHA, counts
    assert pattern_counts(perm, sizes, 3).sum() == 300  # the batch still handles the small ones


def test_large_and_small_strata_together_give_a_valid_derangement():
    rng = np.random.default_rng(8)
    big = derangements.LARGE_STRATUM
    sizes = np.array([big * 3, 2, 0, 7, big, 3, big + 1])
    perm = uniform_derangements(sizes, rng)
    n = int(sizes.sum())
    seg = np.repeat(np.arange(sizes.size), sizes)
    assert (perm != np.arange(n)).all() and (seg[perm] == seg).all()
    assert np.array_equal(np.sort(perm), np.arange(n))


def test_a_large_stratum_sends_each_element_anywhere_else_uniformly():
    rng = np.random.default_rng(99)
    k, reps = derangements.LARGE_STRATUM, 400
    first = np.array([uniform_derangements([k], rng)[0] for _ in range(reps)])
    assert (first != 0).all()
    # where element 0 lands, in 8 bins of positions 1..k-1: uniform
    counts = np.bincount((first - 1) * 8 // (k - 1), minlength=8)
    assert stats.chisquare(counts).pvalue > ALPHA, counts
