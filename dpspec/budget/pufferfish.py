"""Z-Pufferfish (seed 2, Definition 3): the class of data-generating distributions a guarantee holds
for, and the Wasserstein sensitivity the mechanisms of Theorems 9-10 need.

The sensitivity of a statistic T under a class is the largest infinity-Wasserstein distance
between T's conditional distributions given the two secrets of a discriminative pair and Z, over
the class. It is computed here, not taken on faith, because it is what the class changes: under
independence a count moves by one person (the DP sensitivity, Lemma 12), under Section 4.4's
dependence it moves by the people whose secrets follow one person's, and under arbitrary
dependence it has no finite bound at all ("no free lunch").
"""

from __future__ import annotations

import bisect
import collections
import functools
import itertools
import math
from fractions import Fraction
from typing import NamedTuple

from dpspec import ir
from dpspec.language.pufferfish import (  # noqa: F401 - the class as declared, served here with its sensitivities
    CLASS_OPTIONS,
    CONDITIONAL_INDEPENDENCE,
    NO_FREE_LUNCH,
    NO_FREE_LUNCH_HINT,
    class_problems,
    plain_words,
)


# ---- infinity-Wasserstein distances ------------------------------------------------------


def w_inf_discrete(support_a, pmf_a, support_b, pmf_b) -> int | Fraction:
    """W_inf between two distributions on the line: in one dimension the quantile coupling is
    optimal for every W_p, so W_inf = sup_u |F^-1(u) - G^-1(u)| over u in (0, 1).

    Exact: the weights are integers or Fractions (any common scale), compared without rounding.
    W_inf is an essential supremum, so a gap carried by tail mass 1e-100 counts as much as one
    carried by half the mass; a float CDF with a cut-off drops it (the stated sensitivity was
    then too small: docs/security/known-vulnerabilities.md). The supports may come in any order:
    the quantile functions need each law sorted by value, so it is sorted here."""
    law_a = sorted(zip(support_a, pmf_a, strict=True), key=lambda atom: atom[0])
    law_b = sorted(zip(support_b, pmf_b, strict=True), key=lambda atom: atom[0])
    wa = [Fraction(w) for _, w in law_a]
    wb = [Fraction(w) for _, w in law_b]
    if any(w < 0 for w in wa + wb) or not sum(wa) or not sum(wb):
        raise ValueError("W_inf needs nonnegative weights with a positive total")
    den = math.lcm(*(w.denominator for w in wa + wb))
    ia, ib = [int(w * den) for w in wa], [int(w * den) for w in wb]
    ta, tb = sum(ia), sum(ib)
    ca = list(itertools.accumulate(w * tb for w in ia))  # both on the common total ta * tb
    cb = list(itertools.accumulate(w * ta for w in ib))
    xa, xb = [x for x, _ in law_a], [x for x, _ in law_b]
    worst = 0
    for level in sorted(set(ca) | set(cb)):  # the quantiles are constant on (previous level, level]
        if level == 0:
            continue
        qa = xa[min(bisect.bisect_left(ca, level), len(xa) - 1)]
        qb = xb[min(bisect.bisect_left(cb, level), len(xb) - 1)]
        worst = max(worst, abs(qa - qb))
    return worst


def dependent_count_sensitivity(n: int, q0, q1) -> int | Fraction:
    """Section 4.4: one count over n units; given one unit's secret x, each of the n - 1 others
    has secret 1 with probability q_x (independently given x). The count is x + Bin(n-1, q_x),
    so the sensitivity is W_inf(1 + Bin(n-1, q1), Bin(n-1, q0)), computed exactly (q0, q1 as
    exact rationals; a float argument is read as the decimal it prints as)."""
    k = list(range(n))
    return w_inf_discrete([v + 1 for v in k], _binomial_weights(n - 1, q1), k, _binomial_weights(n - 1, q0))


def _exact(q) -> Fraction:
    return q if isinstance(q, Fraction) else Fraction(str(q)) if isinstance(q, float) else Fraction(q)


def _binomial_weights(m: int, q) -> list[int]:
    """Bin(m, q) on 0..m as exact integer weights: C(m, k) a^k (b - a)^(m - k) for q = a / b."""
    q = _exact(q)
    a, c = q.numerator, q.denominator - q.numerator
    if a == 0 or c == 0:  # a point mass at 0 or at m
        return [int(k == (0 if a == 0 else m)) for k in range(m + 1)]
    out, term = [], c**m
    for k in range(m + 1):  # each term from the last (exact division), not a power per term
        out.append(term)
        term = term * (m - k) * a // ((k + 1) * c)
    return out


def count_sensitivity(c: ir.Pufferfish | None) -> Fraction | float:
    """The W_inf sensitivity of one count (the number of units with secret 1) over the class.

    Independence: exactly 1 (the shift coupling; Lemma 12's DP sensitivity). The dependence class
    holds every member with both conditional probabilities in [p0, p1] (dependence of either
    sign); W_inf is largest at the two corners, so the maximum over the class is theirs: a
    binomial grows stochastically with its probability, so the upper quantile gap of
    1 + Bin(n-1, q1) over Bin(n-1, q0) is largest at (q0, q1) = (min, max) and the lower gap at
    (max, min). Exact (a Fraction); math.inf only for 'class arbitrary', which check refuses."""
    if c is None or c.kind == "independent":
        return Fraction(1)
    if c.kind == "arbitrary":
        return math.inf
    p0, p1, n = _exact(c.option("p0")), _exact(c.option("p1")), int(c.option("n"))
    lo, hi = min(p0, p1), max(p0, p1)
    return Fraction(max(1, dependent_count_sensitivity(n, lo, hi), dependent_count_sensitivity(n, hi, lo)))


def cell_counts_sensitivity(c: ir.Pufferfish | None, total_in_z: bool) -> Fraction | float:
    """W_inf sensitivity of the L1 loss ||y - counts||_1 of a vector of cell counts (a unit in one cell).

    Without a total in Z, the pair moves one cell's count by the count sensitivity. With the exact
    total in Z the two conditional distributions share it:
    - independence: exactly 2. Given the total, the other units' secrets follow a product measure
      conditioned on its size, and such laws at sizes t - 1 and t couple with one unit added
      (product measures are strong Rayleigh; Borcea, Branden & Liggett 2009), so present in cell a
      against absent is one unit moved between cells: L1 change 2, and no less in general;
    - the dependence class (p0 != p1): the exact supremum 2 (1 + f(n - 1, R)) of
      `dependence_given_total`, when its exact computation is certified within its reach, else
      the proven bound 2n (the reason is in `dependence_given_total(...).reason`)."""
    base = count_sensitivity(c)
    if not total_in_z:
        return base
    if c is None or c.kind == "independent" or (c.kind == "dependence" and c.option("p0") == c.option("p1")):
        return Fraction(2)
    if c.kind == "dependence":
        return dependence_given_total(c.option("p0"), c.option("p1"), int(c.option("n"))).value
    return 2 * base


class GivenTotal(NamedTuple):
    """The class's vector-loss sensitivity given the total: the value used, whether it is the
    certified exact supremum, and why (shown in `dpspec budget --json`)."""

    value: Fraction
    certified: bool
    reason: str


CERTIFIED_UP_TO = 128  # group sizes whose exact supremum is computed (at most about a second and a half)


@functools.lru_cache(maxsize=64)  # a spec's budget asks for it several times
def dependence_given_total(p0, p1, n: int) -> GivenTotal:
    """The exact supremum, over Section 4.4's class with the total in Z, of the W_inf distance (L1
    metric) between the count vectors given unit j present and absent.

    The class: given x_j = x, each of the g - 1 <= n - 1 others of j's group has secret 1 with
    probability q_x (q0, q1 in [p0, p1]), independently; every other unit is independent of x_j
    (any probabilities, any cells). The supremum is 2 (1 + f(n - 1, R)), R = odds(max p) /
    odds(min p), where f(m, R) is the largest upper quantile gap sup_u (G^-1(u) - F^-1(u)) between
    Bin(m, a) (F) and its tilt Bin(m, b), odds(b) = R odds(a), over a in (0, 1); the derivation
    (an upper bound by likelihood-ratio orderings and a reduction of ultra-log-concave laws to
    binomials, met by a member with a large independent rest) is in docs/guides/z-pufferfish.md.
    f is computed exactly (`tilt_gap`): integer arithmetic, a branch-and-bound over a whose
    every interval is bounded by monotonicity, and a union bound for the two ends. A group above
    CERTIFIED_UP_TO gets the proven upper bound of `_subadditive_bound`, and a search that does not
    close within its work limit the bound of the intervals it left open (certified False: proven
    bounds, not the exact value; never above the proven 2n)."""
    lo, hi = sorted((Fraction(p0), Fraction(p1)))
    if lo == hi:
        return GivenTotal(
            Fraction(2), True, "p0 = p1: the group is independent of the unit, so exactly 2 (independence)"
        )
    if lo == 0 or hi == 1:
        return GivenTotal(
            Fraction(2 * n), True, "a probability of 0 or 1 lets the group copy the unit's secret: the supremum is 2n"
        )
    ratio = (hi / (1 - hi)) / (lo / (1 - lo))
    if n > CERTIFIED_UP_TO:
        return _subadditive_bound(n, ratio)
    gap, exact = tilt_gap(n - 1, ratio)
    if not exact:
        return GivenTotal(
            Fraction(min(2 * n, 2 * (1 + gap))),
            False,
            (
                f"a proven upper bound, not the exact supremum: the exact search did not close within its work limit, and "
                f"every interval it left open has a quantile gap of at most {gap}, so 2 (1 + {gap}) (2n = {2 * n} at most)"
            ),
        )
    return GivenTotal(
        Fraction(2 * (1 + gap)),
        True,
        (
            f"exact supremum over the class: 2 (1 + {gap}), {gap} the largest quantile gap between Bin({n - 1}, a) "
            f"and its tilt by the odds ratio {ir.format_number(ratio)} (certified by exact integer arithmetic)"
        ),
    )


def _subadditive_bound(n: int, ratio: Fraction) -> GivenTotal:
    """A group above the exact computation's reach: a proven upper bound on the supremum.

    gap(P, Q) <= d means P <= Q + d stochastically, which survives convolution, so splitting the
    binomial's trials adds the gaps at the same a: f(m1 + m2) <= f(m1) + f(m2). With
    n - 1 = q M + s (M the largest exactly computed size), f(n - 1) <= q f(M) + f(s), each term
    exact (or, where its search did not close, a proven upper bound)."""
    big = CERTIFIED_UP_TO - 1
    q, s = divmod(n - 1, big)
    (f_big, exact_big), (f_s, exact_s) = tilt_gap(big, ratio), tilt_gap(s, ratio)
    bound = min(2 * n, 2 * (1 + q * f_big + f_s))
    how = "each exact" if exact_big and exact_s else "upper bounds where the exact search did not close"
    return GivenTotal(
        Fraction(bound),
        False,
        (
            f"a proven upper bound, not the exact supremum: n = {n} is above the exact computation's reach (groups of up "
            f"to {CERTIFIED_UP_TO} units), and the quantile gaps add over a split of the binomial's trials, so "
            f"f({n - 1}) <= {q} f({big}) + f({s}) <= {q} x {f_big} + {f_s} ({how}), giving 2 (1 + {q * f_big + f_s}) "
            f"(2n = {2 * n} at most)"
        ),
    )


def _scaled_cdf(m: int, x: int, y: int, scale: int) -> list[int]:
    """scale * (x + y)^m * P(Bin(m, x / (x + y)) <= k) for k = 0..m, as exact integers."""
    out, term, acc = [], y**m * scale, 0
    for i in range(m + 1):
        acc += term
        out.append(acc)
        if i < m:
            term = term * (m - i) * x // ((i + 1) * y)  # exact: C(m, i + 1) x^(i+1) y^(m-i-1) scale
    return out


def quantile_gap(m: int, q_odds: Fraction, p_odds: Fraction) -> int:
    """sup_u (G^-1(u) - F^-1(u)) for F = Bin(m, q), G = Bin(m, p) (given by their odds), exactly:
    the largest j - k with F(k) > G(j - 1), j the least index with G(j) >= F(k)."""
    xq, yq, xp, yp = q_odds.numerator, q_odds.denominator, p_odds.numerator, p_odds.denominator
    fq = _scaled_cdf(m, xq, yq, (xp + yp) ** m)
    fp = _scaled_cdf(m, xp, yp, (xq + yq) ** m)
    best, j = 0, 0
    for k, level in enumerate(fq):
        while fp[j] < level:
            j += 1
        best = max(best, j - k)
    return best


def _tails_clear(m: int, ratio: Fraction, d: int, odds: Fraction) -> bool:
    """True when every a with odds(a) <= `odds` has quantile gap below d: P(Bin(m, b) >= k + d) is at
    most C(m, k + d) b^(k+d) (a union bound), P(Bin(m, a) >= k + 1) at least its single term at
    k + 1, b <= R a, and the resulting inequality only loosens as a falls."""
    x, y, big, small = odds.numerator, odds.denominator, ratio.numerator, ratio.denominator
    s = x + y
    return all(
        math.comb(m, k + d) * big ** (k + d) * x ** (d - 1) * s ** (m - k - 1)
        <= math.comb(m, k + 1) * small ** (k + d) * y ** (m - k - 1) * s ** (d - 1)
        for k in range(m - d + 1)
    )


@functools.lru_cache(maxsize=64)
def tilt_gap(m: int, ratio: Fraction, max_evals: int = 4000) -> tuple[int, bool]:
    """(value, exact): f(m, R) = max over a in (0, 1) of `quantile_gap` between Bin(m, a) and its
    tilt (odds multiplied by R > 1); value is f when exact, else a proven upper bound on it.

    The gap is integer-valued; on an interval of odds [o1, o2] it is at most the gap between
    Bin(m, o1) and Bin(m, R o2) (binomials grow stochastically with their odds), so a
    branch-and-bound that splits every interval whose bound exceeds the best value found (at
    mediants, which keep the integers small; breadth first) ends with a certified maximum. The
    ends (odds below o, and by the symmetry a -> 1 - b, odds above 1 / (R o)) are cleared by
    `_tails_clear`. If it does not close within max_evals gap evaluations (a gap that nearly
    reaches the next integer needs very narrow intervals), the largest bound of the intervals left
    open is returned, not exact (m, the trivial bound, if the ends could not be cleared)."""
    if m == 0:
        return 0, True
    grid = [Fraction(2) ** e for e in range(-12, 13)]
    best = max(quantile_gap(m, o, ratio * o) for o in grid)
    evals, e = len(grid), 1
    while not _tails_clear(m, ratio, best + 1, Fraction(1, 2**e)):  # best >= 1, so this ends
        e *= 2
        if e > 1 << 12:
            return m, False
    lo = Fraction(1, 2**e)
    hi = 1 / (ratio * lo)
    points = sorted({lo, hi} | {Fraction(2) ** k for k in range(-e, 4 * e) if lo < Fraction(2) ** k < hi})
    queue = collections.deque((o1, o2, m) for o1, o2 in zip(points[:-1], points[1:]))  # m: no bound yet
    while queue:
        if evals >= max_evals:
            return max(best, max(bound for _, _, bound in queue)), False
        o1, o2, _ = queue.popleft()
        bound = quantile_gap(m, o1, ratio * o2)
        evals += 1
        if bound <= best:
            continue
        mid = Fraction(o1.numerator + o2.numerator, o1.denominator + o2.denominator)
        best = max(best, quantile_gap(m, mid, ratio * mid))
        evals += 1
        queue += [(o1, mid, bound), (mid, o2, bound)]
    return best, True


def vector_given_total_sensitivity(group: int, q0: float, q1: float, rest: int, p: float) -> float:
    """The exact W_inf (L1 metric on the cell counts) between the count vectors given each secret of
    unit j and the realized total, for one member of the Section 4.4 class, largest over totals.

    The member: unit j and the group - 1 others whose secrets follow j's (each 1 with probability
    q_x given x_j = x, independently) sit in cell a; `rest` independent units with probability p
    sit in cell b. Given the total t the vector is (x_j + K, t - x_j - K) with K the others of the
    group with secret 1, P(K = m | x_j = x, t) proportional to Bin(group - 1, q_x)(m) Bin(rest, p)(t - x - m);
    two vectors with the same total are 2 |difference in cell a| apart in L1, so the distance is
    2 W_inf(x_j + K | 1, K | 0), computed on the line by the quantile coupling. rest = 0 gives 0
    (the total fixes the vector); it never exceeds 2 x group, and can exceed twice the count's
    own sensitivity (see `cell_counts_sensitivity`)."""
    g1, g0 = _binomial_weights(group - 1, q1), _binomial_weights(group - 1, q0)
    r = _binomial_weights(rest, p)
    m = list(range(group))
    worst = 0
    for t in range(group + rest + 1):
        w1 = [g1[i] * r[t - 1 - i] if 0 <= t - 1 - i <= rest else 0 for i in m]
        w0 = [g0[i] * r[t - i] if 0 <= t - i <= rest else 0 for i in m]
        if not any(w1) or not any(w0):
            continue  # a total one secret cannot produce: the pair is not plausible given Z
        worst = max(worst, 2 * w_inf_discrete([i + 1 for i in m], w1, m, w0))
    return worst


def dp_cell_counts_sensitivity(relation: str) -> Fraction:
    """The DP sensitivity of the same L1 loss under the unit's relation (Lemma 12's comparison)."""
    return Fraction(2) if relation == "hamming" else Fraction(1)


def normal_mean_sensitivity(n: int, r, sigma2, tau, gamma, omega) -> Fraction | float:
    """Example 1 (Appendix C, Example 3): the mean of n exchangeable jointly normal values with Z.

    Var X_i = sigma2, Cov(X_i, X_j) = tau, Cov(X_i, Z) = gamma, Var Z = omega; the secrets of a pair
    are X_j = a against X_j = b with |a - b| <= r. Given X_j = x and Z, the mean is normal with a
    variance free of x and a mean linear in x with slope (1 + (n - 1) beta) / n, beta the
    regression coefficient of another unit on X_j given Z; two normals of equal variance are
    W_inf apart by their mean difference. Independence (tau = gamma = 0) gives r / n, the DP
    sensitivity of the mean; beta -> 1 gives r (one unit reveals all). The laws are continuous but
    the sensitivity is a rational function of the moments, so no float is needed: a Fraction
    (math.inf when Z determines X_j, the residual variance 0)."""
    r, sigma2, tau, gamma, omega = (_exact(v) for v in (r, sigma2, tau, gamma, omega))  # exact rationals
    residual = sigma2 - gamma * gamma / omega
    if residual <= 0:
        return math.inf
    beta = (tau - gamma * gamma / omega) / residual
    return abs(r * (1 + (n - 1) * beta) / n)


def w_inf_exact(law_a: dict, law_b: dict) -> int | Fraction:
    """W_inf between two laws on the integers given as {value: weight} (exact weights, any scale)."""
    return w_inf_discrete(list(law_a), list(law_a.values()), list(law_b), list(law_b.values()))


def sdl_admissible(n: int, k: int, t=None, reference=None) -> list[int]:
    """The counts T of n binary records whose release satisfies the SDL measures of Examples 2 and 4:
    k-anonymity (each of the two cells, T and n - T, is empty or holds at least k records) and, when
    t is given, t-closeness in total variation to a public proportion (|T/n - reference| <= t)."""
    out = []
    for total in range(n + 1):
        anonymous = all(c == 0 or c >= k for c in (total, n - total))
        close = t is None or abs(Fraction(total, n) - Fraction(reference)) <= Fraction(t)
        if anonymous and close:
            out.append(total)
    return out


def sdl_count_sensitivity(n: int, theta, k: int, t=None, reference=None) -> int | None:
    """Example 4 (Appendix C; Example 2): the W_inf sensitivity of one count T of n binary records,
    iid Bernoulli(theta), when Z is the fact that releasing T satisfies k-anonymity and t-closeness.

    Given x_j = 1 and Z, T follows 1 + Bin(n - 1, theta) restricted to the admissible counts; given
    x_j = 0, Bin(n - 1, theta) restricted to them (exact rationals). None when one secret cannot
    produce an admissible count: Z then removes the pair (the guarantee does not cover it). When the
    admissible counts form an interval the value is 1, the DP sensitivity: SDL restricts which
    pairs are protected, not the noise they need (the paper's point); k-anonymity that admits an
    empty cell (T = 0 or T = n) leaves gaps, and the value jumps to the gap's width."""
    theta = Fraction(theta)
    allowed = set(sdl_admissible(n, k, t, reference))
    pmf = lambda m: math.comb(n - 1, m) * theta**m * (1 - theta) ** (n - 1 - m)  # noqa: E731
    given1 = {total: pmf(total - 1) for total in allowed if 1 <= total}
    given0 = {total: pmf(total) for total in allowed if total <= n - 1}
    given1 = {v: w for v, w in given1.items() if w > 0}
    given0 = {v: w for v, w in given0.items() if w > 0}
    if not given1 or not given0:
        return None
    return w_inf_exact(given1, given0)
