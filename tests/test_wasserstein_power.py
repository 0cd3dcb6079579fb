"""Seed 2's Theorem 15 on a small exact example: a test on the Wasserstein release is at least as
powerful as any test on the release post-processed with Z, strictly so when the post-processing
merges values whose evidence differs."""
from __future__ import annotations

import numpy as np

from dpspec_wasserstein.power import post_processed_law, powers, release_law, ump_test

N, R = 6, 0.4
ALTERNATIVES = [0.35, 0.4, 0.5, 0.6, 0.8, 0.95]


def test_the_release_has_a_monotone_likelihood_ratio_in_theta():
    for loss in ("abs", "square"):
        (a, _), (b, _) = release_law(N, 0.3, R, loss), release_law(N, 0.6, R, loss)
        assert np.all(np.diff(b / a) >= -1e-9 * (b / a)[1:])  # nondecreasing in y: Theorem 15's first claim
        assert abs(a.sum() - 1) < 1e-12 and abs(b.sum() - 1) < 1e-12
    (a, w), (b, _) = release_law(N, 0.3, R, "square"), release_law(N, 0.6, R, "square")
    assert np.all(np.diff(b / a) > 0)  # strictly, under the square loss, beyond 0 and n too


def test_both_tests_have_their_level():
    for loss in ("abs", "square"):
        null, w = release_law(N, 0.3, R, loss)
        assert abs(null @ ump_test(null, 0.05) - 0.05) < 1e-12
        merged = post_processed_law(null, N, w)
        assert abs(merged @ ump_test(merged, 0.05) - 0.05) < 1e-12


def test_the_release_test_is_uniformly_more_powerful_and_strictly_when_the_clamp_merges_evidence():
    # at high privacy (rate 0.05) the level-0.05 threshold on Y lies beyond n, inside the merged values
    square = [row["release"] - row["post_processed"] for row in powers(N, 0.3, ALTERNATIVES, 0.05, loss="square")["rows"]]
    assert min(square) >= -1e-12 and max(square) > 0.05
    # at rate 0.4 the threshold falls inside 0..n, where the two tests reject the same values
    sharp = [row["release"] - row["post_processed"] for row in powers(N, 0.3, ALTERNATIVES, R, loss="square")["rows"]]
    assert max(abs(g) for g in sharp) < 1e-9
    # the control: under the abs loss the likelihood ratio is constant beyond 0 and n, so the clamp
    # merges only values of equal evidence and the two tests have the same power
    flat = [row["release"] - row["post_processed"] for row in powers(N, 0.3, ALTERNATIVES, 0.05, loss="abs")["rows"]]
    assert max(abs(g) for g in flat) < 1e-9


def test_lemma_14_the_bayes_risk_from_the_release_is_at_most_that_from_its_post_processing():
    from dpspec_wasserstein.power import bayes_risks

    grid = [i / 10 for i in range(1, 10)]
    prior = [1 / len(grid)] * len(grid)
    square = bayes_risks(N, grid, prior, 0.05, loss="square")
    assert square["release"] < square["post_processed"] - 1e-4  # strictly: the clamp merges evidence
    flat = bayes_risks(N, grid, prior, 0.05, loss="abs")
    assert abs(flat["release"] - flat["post_processed"]) < 1e-12  # equal: it merges none (the control)
