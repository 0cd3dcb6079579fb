"""Derangements by adding fixed points back (one shuffle, then an exact step per fixed point).

The step's branch probability is checked exactly against its definition, its large-m sampler
statistically and on forced random bits, and the whole path for uniformity over every
derangement of 4, 5 and 6 elements (forced onto the add-back path), with controls that show the
same tests reject a wrong step.
"""

from __future__ import annotations

from fractions import Fraction
from itertools import permutations

import numpy as np
import pytest
from scipy import stats

import dpspec_swap.derangements as der
from tests.test_swap_algorithm import ALPHA, pattern_counts


def brute_count(n: int) -> int:
    return sum(all(p[i] != i for i in range(n)) for p in permutations(range(n)))


def test_derangement_numbers():
    assert [der.derangement_count(n) for n in range(8)] == [brute_count(n) for n in range(8)]
    assert der.derangement_count(20) == 895014631192902121  # OEIS A000166


@pytest.mark.parametrize("m", [2, 3, 4, 5, 10, 20, 21, 22, 57, 300])
def test_pair_probability_is_the_share_of_derangements_with_the_new_element_in_a_2_cycle(m):
    num, den = der.pair_probability(m)
    assert Fraction(num, den) == Fraction(m * der.derangement_count(m - 1), der.derangement_count(m + 1))


@pytest.mark.parametrize("m", [24, 25])  # even and odd: the two forms of the correction
def test_large_m_branch_draws_have_the_exact_rate(m):
    rng = np.random.default_rng(m)
    n = 400_000
    hits = int(der._pair_draws(np.full(n, m), rng).sum())
    num, den = der.pair_probability(m)
    assert stats.binomtest(hits, n, num / den).pvalue > ALPHA
    # the control: a rate off by a tenth is rejected at this sample size
    assert stats.binomtest(hits, n, 1.1 * num / den).pvalue < ALPHA


class ZeroBits:
    """A generator whose every draw is the smallest value: forces the tiny correction event."""

    def integers(self, low, high, size, dtype):
        return np.zeros(size, dtype=dtype)


def test_the_correction_event_is_decided_exactly_when_its_first_digit_ties():
    # All-zero bits: A (probability 1/(m+1)) happens, and so does C (probability 1/N): an even
    # m then gives A and not C = false, an odd m gives A or C = true.
    out = der._pair_draws_large(np.array([22, 23, 40, 41]), ZeroBits())
    assert out.tolist() == [False, True, False, True]
    n = der._correction_denominator(22)
    assert n == 23 * der.derangement_count(21) + 1 and n > 2**64


def enumerate_all(sizes, rng, monkeypatch):
    monkeypatch.setattr(der, "REPAIR_FROM", 2)  # every segment takes the add-back path
    return der.uniform_derangements(sizes, rng)


def test_add_back_path_is_uniform_over_all_derangements(monkeypatch):
    rng = np.random.default_rng(20261123)
    sizes = rng.permutation(np.repeat([4, 5, 6, 3, 2], [9_000, 22_000, 40_000, 600, 600]))
    perm = enumerate_all(sizes, rng, monkeypatch)
    for k, n_patterns in ((4, 9), (5, 44), (6, 265)):
        counts = pattern_counts(perm, sizes, k)
        assert len(counts) == n_patterns
        assert stats.chisquare(counts).pvalue > ALPHA, (k, counts)
    assert stats.binomtest(int(pattern_counts(perm, sizes, 3)[0]), 600, 0.5).pvalue > ALPHA


def test_the_uniformity_test_rejects_an_add_back_without_2_cycles(monkeypatch):
    monkeypatch.setattr(der, "_pair_draws", lambda m, rng: np.zeros(m.size, dtype=bool))
    rng = np.random.default_rng(7)
    sizes = np.full(22_000, 5)
    counts = pattern_counts(enumerate_all(sizes, rng, monkeypatch), sizes, 5)
    assert stats.chisquare(counts).pvalue < 1e-10


@pytest.mark.parametrize("broken", [False, True])
def test_large_segments_have_2_cycles_at_the_exact_rate(broken, monkeypatch):
    # In a uniform derangement of n, an element lies in a 2-cycle with probability
    # (n-1)·D(n-2)/D(n); n = 40 takes the large-m branch sampler for every fixed point. The
    # control never takes the 2-cycle branch, and the same test rejects it.
    if broken:
        monkeypatch.setattr(der, "_pair_draws", lambda m, rng: np.zeros(m.size, dtype=bool))
    rng = np.random.default_rng(11)
    n, segs = 40, 30_000
    perm = der.uniform_derangements(np.full(segs, n), rng)
    in_2_cycle = perm[perm] == np.arange(perm.size)
    p = Fraction((n - 1) * der.derangement_count(n - 2), der.derangement_count(n))
    pvalue = stats.binomtest(int(in_2_cycle.sum()), perm.size, float(p)).pvalue
    assert (pvalue < ALPHA) if broken else (pvalue > ALPHA)


def test_add_back_keeps_segments_and_leaves_no_fixed_point():
    rng = np.random.default_rng(3)
    sizes = rng.integers(16, 3_000, size=400)
    sizes[::7] = 0
    perm = der.uniform_derangements(sizes, rng)
    seg = np.repeat(np.arange(sizes.size), sizes)
    assert (perm != np.arange(perm.size)).all() and (seg[perm] == seg).all()
    assert np.array_equal(np.sort(perm), np.arange(perm.size))


def test_the_draws_for_a_seed_are_those_releases_were_made_with():
    """A seed's derangements are part of a release's bytes: the digest of draws over small,
    repaired and large segments (and over more segments than 16-bit keys number) is the one the
    sampler gave when the bundled swap releases were made; a faster sampler must keep it."""
    import hashlib

    rng = np.random.default_rng(46)
    sizes = np.concatenate(
        [rng.integers(2, 16, 3000), rng.integers(16, 2048, 300), rng.integers(2048, 9000, 6), [0, 2, 3, 2048, 2047]]
    )
    rng.shuffle(sizes)
    digest = hashlib.sha256()
    for seed in range(5):
        digest.update(der.uniform_derangements(sizes, np.random.default_rng(seed)).tobytes())
    many = np.full(70_000, 2)
    many[::7] = 3
    digest.update(der.uniform_derangements(many, np.random.default_rng(9)).tobytes())
    assert digest.hexdigest() == "fe867ed90a133a3ff6cc70ded0755574b699083fa019f03cdcfeff57b1f51cbc"
