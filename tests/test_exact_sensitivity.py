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


GRID = [
    (n, q0, q1)
    for n in (2, 5, 17, 40, 120, 200)
    for q0, q1 in [
        (Fraction(1, 100), Fraction(1, 5)),
        (Fraction(1, 5), Fraction(1, 100)),
        (Fraction(1, 10), Fraction(9, 10)),
        (Fraction(3, 10), Fraction(1, 2)),
        (Fraction(1, 1000), Fraction(999, 1000)),
        (Fraction(2, 7), Fraction(2, 7)),
    ]
]


@pytest.mark.parametrize("n,q0,q1", GRID)
def test_the_count_sensitivity_equals_the_brute_force_on_a_grid_with_far_tails(n, q0, q1):
    assert pf.dependent_count_sensitivity(n, q0, q1) == brute_count(n, q0, q1)


@pytest.mark.parametrize(
    "group,q0,q1,rest,p",
    [
        (3, Fraction(1, 20), Fraction(3, 10), 40, Fraction(1, 10)),
        (5, Fraction(1, 100), Fraction(1, 5), 30, Fraction(1, 2)),
        (4, Fraction(3, 10), Fraction(3, 10), 12, Fraction(3, 5)),
    ],
)
def test_the_vector_given_the_total_equals_the_brute_force(group, q0, q1, rest, p):
    g1, g0, r = _binomial(group - 1, q1), _binomial(group - 1, q0), _binomial(rest, p)
    worst = 0
    for t in range(group + rest + 1):
        one = {m + 1: g1[m] * r[t - 1 - m] for m in range(group) if 0 <= t - 1 - m <= rest}
        zero = {m: g0[m] * r[t - m] for m in range(group) if 0 <= t - m <= rest}
        if sum(one.values()) and sum(zero.values()):
            s1, s0 = sum(one.values()), sum(zero.values())
            worst = max(
                worst, 2 * brute_w_inf({k: v / s1 for k, v in one.items()}, {k: v / s0 for k, v in zero.items()})
            )
    assert pf.vector_given_total_sensitivity(group, q0, q1, rest, p) == worst


def test_a_gap_carried_by_a_vanishing_tail_still_counts():
    """W_inf is an essential supremum: mass 10^-100 that must travel 50 steps sets it to 50."""
    tiny = Fraction(1, 10**100)
    assert pf.w_inf_discrete([0, 50], [1 - tiny, tiny], [0], [1]) == 50


def test_the_stated_budget_carries_the_exact_sensitivity(tmp_path):
    (tmp_path / "people.csv").write_text("county\na\nb\n")
    (tmp_path / "s.dps").write_text(
        textwrap.dedent("""\
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
        """)
    )
    from dpspec.api import check

    checked = check(dpspec.load(str(tmp_path / "s.dps")))
    sens = checked.mechanism.sensitivities(checked.spec, checked.params)
    assert sens["counts"]["wasserstein"] == 103
    notes = " ".join(checked.mechanism.budget(checked.spec, checked.params, {}).notes)
    assert "sensitivity over the class is 103" in notes


# ---- the class's figure, and the other routines, against the definition ---------------------


def _class(p0: str, p1: str, n: int):
    from dpspec import ir

    return ir.Pufferfish("dependence", (("p0", Fraction(p0)), ("p1", Fraction(p1)), ("n", Fraction(n))))


@pytest.mark.parametrize(
    "p0,p1,n", [("0.01", "0.2", 40), ("0.2", "0.01", 40), ("0.3", "0.6", 25), ("0.001", "0.05", 120)]
)
def test_the_class_figure_is_the_largest_brute_force_member_on_a_grid_when_the_probabilities_are_lopsided(p0, p1, n):
    """Every member (q0, q1) of a rational grid on [p0, p1]^2, corners included, by brute force:
    the class's sensitivity is their maximum (and at least the DP sensitivity 1)."""
    lo, hi = sorted((Fraction(p0), Fraction(p1)))
    grid = [lo + (hi - lo) * Fraction(i, 4) for i in range(5)]
    worst = max(max(brute_count(n, q0, q1) for q0 in grid for q1 in grid), 1)
    got = pf.count_sensitivity(_class(p0, p1, n))
    assert isinstance(got, Fraction) and got == worst
    assert pf.cell_counts_sensitivity(_class(p0, p1, n), total_in_z=False) == worst  # no total: the count's


def test_the_far_tail_class_is_103_at_n_200():
    assert pf.count_sensitivity(_class("0.01", "0.2", 200)) == 103 == brute_count(200, Fraction(1, 100), Fraction(1, 5))


def test_w_inf_does_not_depend_on_the_order_the_supports_come_in():
    """The quantile walk needs each law sorted by value; a caller's dict or set order must not matter."""
    assert pf.w_inf_discrete([1, 0], [1, 1], [0, 1], [1, 1]) == 0
    assert pf.w_inf_discrete([5, 0, 2], [1, 3, 0], [0], [1]) == 5
    assert pf.w_inf_exact({3: Fraction(1, 2), 0: Fraction(1, 2)}, {0: 1, 3: 1}) == 0


def _solve(matrix, rhs):
    """Gauss-Jordan in Fractions (the 2 x 2 normal equations of the conditional mean)."""
    m = [list(row) + [b] for row, b in zip(matrix, rhs)]
    size = len(m)
    for col in range(size):
        pivot = next(r for r in range(col, size) if m[r][col] != 0)
        m[col], m[pivot] = m[pivot], m[col]
        m[col] = [v / m[col][col] for v in m[col]]
        for r in range(size):
            if r != col:
                m[r] = [a - m[r][col] * b for a, b in zip(m[r], m[col])]
    return [row[-1] for row in m]


@pytest.mark.parametrize(
    "n,sigma2,tau,gamma,omega",
    [
        (10, "1", "0", "0", "1"),
        (10, "1", "0.3", "0", "2"),
        (25, "2", "0.5", "0.7", "1.5"),
        (4, "1", "0.2", "-0.4", "1"),
        (7, "3", "-0.1", "1.1", "0.9"),
    ],
)
def test_example_1_normal_mean_sensitivity_equals_exact_gaussian_conditioning(n, sigma2, tau, gamma, omega):
    """The slope of E[mean(X) | X_j = x, Z] in x, from the whole (n + 1) x (n + 1) covariance in
    Fractions: cov(mean, (X_j, Z)) solved against cov((X_j, Z)); the sensitivity is r |slope|."""
    sigma2, tau, gamma, omega = map(Fraction, (sigma2, tau, gamma, omega))
    cov = [[sigma2 if i == k else tau for k in range(n)] + [gamma] for i in range(n)] + [[gamma] * n + [omega]]
    j, z = 0, n
    mean_row = [sum(cov[i][c] for i in range(n)) / n for c in (j, z)]
    slope = _solve([[cov[j][j], cov[j][z]], [cov[z][j], cov[z][z]]], mean_row)[0]
    r = Fraction(3, 2)
    got = pf.normal_mean_sensitivity(n, r, sigma2, tau, gamma, omega)
    assert isinstance(got, Fraction) and got == abs(r * slope)


@pytest.mark.parametrize(
    "n,theta,k,t,ref",
    [
        (12, Fraction(1, 100), 3, None, None),
        (30, Fraction(1, 50), 4, None, None),
        (20, Fraction(3, 10), 2, Fraction(1, 5), Fraction(1, 4)),
        (40, Fraction(1, 1000), 5, None, None),
    ],
)
def test_example_4_sdl_sensitivity_equals_the_brute_force_when_the_tails_are_thin(n, theta, k, t, ref):
    """T given each secret, restricted to the SDL-admissible counts (recomputed here), brute-forced:
    with theta small the mass beyond an empty-cell gap is far below any float's resolution."""
    allowed = [
        c
        for c in range(n + 1)
        if all(v == 0 or v >= k for v in (c, n - c)) and (t is None or abs(Fraction(c, n) - ref) <= t)
    ]
    pmf = _binomial(n - 1, theta)
    one = {c: pmf[c - 1] for c in allowed if c >= 1 and pmf[c - 1]}
    zero = {c: pmf[c] for c in allowed if c <= n - 1 and pmf[c]}
    s1, s0 = sum(one.values()), sum(zero.values())
    expected = brute_w_inf({c: v / s1 for c, v in one.items()}, {c: v / s0 for c, v in zero.items()})
    assert pf.sdl_count_sensitivity(n, theta, k, t, ref) == expected


@pytest.mark.parametrize(
    "group,q0,q1,rest,p",
    [
        (3, Fraction(1, 20), Fraction(3, 10), 40, Fraction(1, 10)),
        (4, Fraction(1, 100), Fraction(1, 5), 25, Fraction(1, 3)),
    ],
)
def test_the_class_given_the_total_is_at_least_every_brute_force_member(group, q0, q1, rest, p):
    """The class's figure given the total is a supremum over members: at or above each member's
    brute-force value (the member of `test_the_vector_given_the_total_equals_the_brute_force`)."""
    g1, g0, r = _binomial(group - 1, q1), _binomial(group - 1, q0), _binomial(rest, p)
    member = 0
    for t in range(group + rest + 1):
        one = {m + 1: g1[m] * r[t - 1 - m] for m in range(group) if 0 <= t - 1 - m <= rest}
        zero = {m: g0[m] * r[t - m] for m in range(group) if 0 <= t - m <= rest}
        s1, s0 = sum(one.values()), sum(zero.values())
        if s1 and s0:
            member = max(
                member, 2 * brute_w_inf({k: v / s1 for k, v in one.items()}, {k: v / s0 for k, v in zero.items()})
            )
    c = _class(str(q0), str(q1), group)
    assert pf.cell_counts_sensitivity(c, total_in_z=True) >= member


# ---- through the command line ----------------------------------------------------------------

FAR_TAIL = """spec "far tail"
domain d {
  table people unit person {
    county : {a, b, c}
  }
}
pufferfish {
  class dependence p0 0.01 p1 0.2 n N
}
unit people : symdiff
premetric pure
mechanism wasserstein_exponential {
  table: people
  cell: county
  epsilon: 2
  base: naive
}
budget epsilon <= 2
"""


@pytest.mark.parametrize("n,exact,float_figure", [(60, 32, 28), (100, 52, 41), (150, 78, 55), (200, 103, 69)])
def test_dpspec_budget_states_the_exact_figure_not_the_float_one(tmp_path, n, exact, float_figure):
    """`dpspec budget` (text and --json) on the issue's spec states the brute-force figure; the
    float routine's figure (kept as a control) is not it."""
    import json

    from click.testing import CliRunner

    from dpspec.cli.main import main

    path = tmp_path / "far.dps"
    path.write_text(FAR_TAIL.replace("n N", f"n {n}"))
    assert brute_count(n, Fraction(1, 100), Fraction(1, 5)) == exact != float_figure
    text = CliRunner().invoke(main, ["budget", str(path)], catch_exceptions=False)
    assert text.exit_code == 0, text.output
    assert f"sensitivity over the class is {exact} (DP sensitivity 1" in text.output
    out = CliRunner().invoke(main, ["budget", "--json", str(path)], catch_exceptions=False)
    counts = json.loads(out.output)["pufferfish"]["sensitivity"]["counts"]
    assert counts["wasserstein"] == exact and counts["given"] == "nothing"
