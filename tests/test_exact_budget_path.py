"""The budget path is exact: rational budgets are Fractions, irrational ones certified upper bounds,
and a declared bound is decided without a float tolerance."""

from __future__ import annotations

import glob
import math
import os
from decimal import Decimal, localcontext
from fractions import Fraction

import pytest

from dpspec.budget import ApproxDP, BudgetStatement, PureDP, LedgerRelease, ZCDP, compose, convert, group
from dpspec.budget.budget_report import budget_summary
from dpspec.budget.conversions import bs16_epsilon, cks20_epsilon
from dpspec.budget.ledger import _holds
from dpspec.budget.spec_account import spec_ledger
from dpspec.language.parser import parse, read_source

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PL94 = os.path.join(ROOT, "specs", "pl94_production_topdown.dps")
PL94_RHO = Fraction(293764, 114921)  # the P.L. 94-171 persons file's rho as the allocation gives it


def _d(q) -> Decimal:
    q = Fraction(q)
    return Decimal(q.numerator) / Decimal(q.denominator)


def _pl94_with_bound(bound: str) -> dict:
    """pl94's budget summary with its rho bound replaced (the text is parsed in place: nothing is written)."""
    text = read_source(PL94)
    assert "budget rho <= 2.56\n" in text
    return budget_summary(parse(text.replace("budget rho <= 2.56\n", f"budget rho <= {bound}\n"), PL94))


def test_a_bound_written_as_the_achieved_fraction_holds_and_one_a_hair_below_it_does_not():
    exact = _pl94_with_bound("293764/114921")
    rho_bound = exact["bounds"][0]
    assert rho_bound["holds"] and rho_bound["achieved_exact"] == "293764/114921"
    assert exact["budget"] == {"premetric": "zcdp", "rho": float(PL94_RHO), "rho_exact": "293764/114921"}
    # 2.5562255810513 is below 293764/114921 by 1.3e-14 (relative 5e-15): a float tolerance of 1e-12 passed it
    assert Fraction("2.5562255810513") < PL94_RHO
    below = _pl94_with_bound("2.5562255810513")
    assert not below["bounds"][0]["holds"] and not below["bounds_hold"]
    # the float the JSON shows is the nearest double; its decimal text is above the exact value here
    assert Fraction(repr(float(PL94_RHO))) > PL94_RHO
    assert _pl94_with_bound(repr(float(PL94_RHO)))["bounds"][0]["holds"]


def test_thirds_compose_to_exactly_one():
    ledger = compose([LedgerRelease(f"part {i}", ZCDP(Fraction(1, 3))) for i in range(3)])
    assert ledger.total.rho == 1 and isinstance(ledger.total.rho, Fraction)
    assert _holds("<=", ledger.total.rho, 1) and not _holds("<", ledger.total.rho, 1)
    assert ledger.total.to_json() == {"premetric": "zcdp", "rho": 1.0}


def test_many_small_rhos_just_over_a_bound_are_said_to_exceed_it():
    # 1000 releases of rho 1/1000 + 1/10^16: the exact sum is 1 + 1e-13, over 'rho <= 1'. In floats
    # each term rounds to 0.001 and a relative tolerance of 1e-12 said the bound held.
    small = Fraction(1, 1000) + Fraction(1, 10**16)
    ledger = compose([LedgerRelease(f"r{i}", ZCDP(small)) for i in range(1000)])
    assert ledger.total.rho == 1 + Fraction(1, 10**13)
    assert not _holds("<=", ledger.total.rho, 1)
    assert math.fsum([float(small)] * 1000) <= 1 * (1 + 1e-12)  # what the float path decided


@pytest.mark.parametrize("rho", ["0.001", "0.07", "0.5", "1", "2.63", "2.56", "15.29", "42.8", "1000"])
@pytest.mark.parametrize("delta", ["1e-5", "1e-10", "1e-15"])
def test_the_bs16_conversion_is_a_certified_upper_bound(rho, delta):
    rho, delta = Fraction(rho), Fraction(delta)
    eps = bs16_epsilon(rho, delta)
    assert isinstance(eps, Fraction) and Fraction(float(eps)) == eps  # a float, rounded up
    with localcontext() as ctx:
        ctx.prec = 80
        true = _d(rho) + 2 * (_d(rho) * -(_d(delta).ln())).sqrt()
    assert _d(eps) >= true
    assert _d(eps) - true <= true * Decimal("1e-15")  # and no looser than one rounding


@pytest.mark.parametrize("rho", ["0.01", "0.5", "2.63", "15.29"])
@pytest.mark.parametrize("delta", ["1e-6", "1e-10"])
def test_the_cks20_epsilon_is_proven_by_an_order_alpha_in_high_precision(rho, delta):
    rho, delta = Fraction(rho), Fraction(delta)
    eps = cks20_epsilon(rho, delta)
    assert eps <= bs16_epsilon(rho, delta)
    with localcontext() as ctx:
        ctx.prec = 60
        r, e, target = _d(rho), _d(eps), _d(delta).ln()

        def log_delta(a: Decimal) -> Decimal:  # CKS20 Corollary 13 at order a: a valid bound for every a > 1
            return (a - 1) * (a * r - e) + a * (1 - 1 / a).ln() - (a - 1).ln()

        lo, hi = Decimal(1) + Decimal("1e-30"), Decimal(10**6)
        for _ in range(300):  # golden-section search of the convex objective
            m1, m2 = lo + (hi - lo) * Decimal("0.381966"), hi - (hi - lo) * Decimal("0.381966")
            lo, hi = (lo, m2) if log_delta(m1) < log_delta(m2) else (m1, hi)
        assert log_delta(lo) <= target  # the stated epsilon is valid at delta
        # and tight: a relative 1e-9 less epsilon is not provable at any order near the optimum
        e = _d(eps) * (1 - Decimal("1e-9"))
        assert log_delta(lo) > target


def test_group_privacy_delta_is_certified_from_above():
    b = group(ApproxDP(1, Fraction(1, 10**6)), 3).result
    with localcontext() as ctx:
        ctx.prec = 60
        true = 3 * Decimal(2).exp() * Decimal("1e-6")
    assert b.epsilon == 3 and _d(b.delta) >= true and _d(b.delta) - true < true * Decimal("1e-15")


def test_randomized_response_states_a_certified_epsilon():
    from dpspec_rr import epsilon

    eps = epsilon(Fraction(3, 4))  # ln 3
    with localcontext() as ctx:
        ctx.prec = 60
        assert _d(eps) >= Decimal(3).ln() and _d(eps) - Decimal(3).ln() < Decimal("1e-15")
    old = abs(math.log(Fraction(3, 4)) - math.log(Fraction(1, 4)))  # what the float path stated
    assert Fraction(old) < eps and _d(old) < Decimal(3).ln()  # below ln 3: not a valid budget


def test_a_plugin_written_for_api_1_2_may_still_return_floats():
    stmt = BudgetStatement(PureDP(1.0986122886681096), worst=PureDP(1.0986122886681096))
    assert stmt.actual.epsilon == Fraction(1.0986122886681096)  # taken exactly, the binary number it is
    assert stmt.actual.to_json() == {"premetric": "pure", "epsilon": 1.0986122886681096}
    assert convert(stmt.actual, "zcdp").result.rho == Fraction(1.0986122886681096) ** 2 / 2


def _numbers(budget):
    for v in budget.params().values():
        yield from (v if isinstance(v, list) else [v])


def _exact_or_infinite(x) -> bool:
    return isinstance(x, Fraction) or (isinstance(x, float) and math.isinf(x))


@pytest.mark.parametrize("path", sorted(glob.glob(os.path.join(ROOT, "specs", "*.dps"))), ids=os.path.basename)
def test_no_budget_of_a_bundled_spec_is_a_float(path):
    _, _, statement, _, ledger = spec_ledger(parse(read_source(path), path))
    budgets = [
        statement.actual,
        statement.worst,
        ledger.declared,
        ledger.worst,
        *(c.result for c in ledger.currencies),
        *(s.result for s in ledger.steps),
    ]
    for b in budgets:
        if b is not None:
            assert all(_exact_or_infinite(x) for x in _numbers(b)), (path, b)
    for check in ledger.bounds:
        assert _exact_or_infinite(check.achieved), (path, check)
