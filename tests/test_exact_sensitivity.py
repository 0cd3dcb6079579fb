"""Every W_inf sensitivity routine against a brute force from the definition, far tails included.

The brute force is independent of the code: exact Fraction CDFs over the whole support and the
least d with F_a(k) <= F_b(k + d) and F_b(k) <= F_a(k + d) for every k (the CDF-shift form of
W_inf on the integers), not the quantile coupling the code walks. The grid has q0 != 1 - q1 and n
up to 200, where the gaps live at tail probabilities far below any float's reach: the float
routine stated 28/41/55/69 for (0.01, 0.2) at n = 60/100/150/200, the exact figures are
32/52/78/103."""
from __future__ import annotations

import itertools
import math
import textwrap
from fractions import Fraction

import pytest

import dpspec
from dpspec.budget import pufferfish as pf


def _binomial(m: int, q: Fraction) -> list[Fraction]:
    return [math.comb(m, k) * q**k * (1 - q) ** (m - k) for k in range(m + 1)]


def brute_w_inf(law_a: dict, law_b: dict) -> int:
    keys = range(min(min(law_a), min(law_b)) - 1, max(max(law_a), max(law_b)) + 1)
    fa = dict(zip(keys, itertools.accumulate(law_a.get(k, Fraction(0)) for k in keys)))
    fb = dict(zip(keys, itertools.accumulate(law_b.get(k, Fraction(0)) for k in keys)))
    top = keys[-1]
    for d in range(len(keys)):
        if all(fa[k] <= fb[min(k + d, top)] and fb[k] <= fa[min(k + d, top)] for k in keys):
            return d
    raise AssertionError("no shift")


def brute_count(n: int, q0: Fraction, q1: Fraction) -> int:
    """W_inf(1 + Bin(n-1, q1), Bin(n-1, q0)) straight from the definition."""
    one = {k + 1: p for k, p in enumerate(_binomial(n - 1, q1))}
    zero = {k: p for k, p in enumerate(_binomial(n - 1, q0))}
    return brute_w_inf(one, zero)


@pytest.mark.parametrize("n,exact", [(60, 32), (100, 52), (150, 78), (200, 103)])
def test_the_far_tail_count_sensitivity_is_exact(n, exact):
    got = pf.dependent_count_sensitivity(n, Fraction(1, 100), Fraction(1, 5))
    assert got == exact == brute_count(n, Fraction(1, 100), Fraction(1, 5))


GRID = [(n, q0, q1) for n in (2, 5, 17, 40, 120, 200)
        for q0, q1 in [(Fraction(1, 100), Fraction(1, 5)), (Fraction(1, 5), Fraction(1, 100)),
                       (Fraction(1, 10), Fraction(9, 10)), (Fraction(3, 10), Fraction(1, 2)),
                       (Fraction(1, 1000), Fraction(999, 1000)), (Fraction(2, 7), Fraction(2, 7))]]


@pytest.mark.parametrize("n,q0,q1", GRID)
def test_the_count_sensitivity_equals_the_brute_force_on_a_grid_with_far_tails(n, q0, q1):
    assert pf.dependent_count_sensitivity(n, q0, q1) == brute_count(n, q0, q1)


@pytest.mark.parametrize("group,q0,q1,rest,p", [(3, Fraction(1, 20), Fraction(3, 10), 40, Fraction(1, 10)),
                                                (5, Fraction(1, 100), Fraction(1, 5), 30, Fraction(1, 2)),
                                                (4, Fraction(3, 10), Fraction(3, 10), 12, Fraction(3, 5))])
def test_the_vector_given_the_total_equals_the_brute_force(group, q0, q1, rest, p):
    g1, g0, r = _binomial(group - 1, q1), _binomial(group - 1, q0), _binomial(rest, p)
    worst = 0
    for t in range(group + rest + 1):
        one = {m + 1: g1[m] * r[t - 1 - m] for m in range(group) if 0 <= t - 1 - m <= rest}
        zero = {m: g0[m] * r[t - m] for m in range(group) if 0 <= t - m <= rest}
        if sum(one.values()) and sum(zero.values()):
            s1, s0 = sum(one.values()), sum(zero.values())
            worst = max(worst, 2 * brute_w_inf({k: v / s1 for k, v in one.items()}, {k: v / s0 for k, v in zero.items()}))
    assert pf.vector_given_total_sensitivity(group, q0, q1, rest, p) == worst


def test_a_gap_carried_by_a_vanishing_tail_still_counts():
    """W_inf is an essential supremum: mass 10^-100 that must travel 50 steps sets it to 50."""
    tiny = Fraction(1, 10**100)
    assert pf.w_inf_discrete([0, 50], [1 - tiny, tiny], [0], [1]) == 50


def test_the_stated_budget_carries_the_exact_sensitivity(tmp_path):
    (tmp_path / "people.csv").write_text("county\na\nb\n")
    (tmp_path / "s.dps").write_text(textwrap.dedent('''\
        spec "far tail"
        domain d {
          table people unit person {
            county : {a, b}
          }
        }
        data people from "people.csv"
        pufferfish {
          class dependence p0 0.01 p1 0.2 n 200
        }
        unit people : symdiff
        premetric pure
        mechanism wasserstein_exponential {
          table: people
          cell: county
          epsilon: 1
          base: naive
        }
        budget epsilon <= 1
        '''))
    from dpspec.api import check

    checked = check(dpspec.load(str(tmp_path / "s.dps")))
    sens = checked.mechanism.sensitivities(checked.spec, checked.params)
    assert sens["counts"]["wasserstein"] == 103
    notes = " ".join(checked.mechanism.budget(checked.spec, checked.params, {}).notes)
    assert "sensitivity over the class is 103" in notes
