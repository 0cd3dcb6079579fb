"""Changing the unit of protection: the neighbor relation, and coarser units (groups).

A budget is stated for one input premetric. Re-quoting it for another unit is itself a
conversion, with a rule and a citation, and some directions do not exist: a budget for
change-one neighbors says nothing about add/remove neighbors, because the two relations compare
datasets from different domains (fixed size versus any size).
"""

from __future__ import annotations

import math
import numbers
from fractions import Fraction

from dpspec.errors import ConversionError

from .conversions import Conversion, identity
from .exact import iv
from .premetrics import ApproxDP, Budget, GaussianDP, PureDP, ZCDP, budget_from_params

RELATIONS = ("symdiff", "hamming")

_RELATION_ALIASES = {
    "symdiff": "symdiff",
    "symmetric-difference": "symdiff",
    "add-remove": "symdiff",
    "add/remove": "symdiff",
    "addremove": "symdiff",
    "add-or-remove": "symdiff",
    "unbounded": "symdiff",
    "hamming": "hamming",
    "change-one": "hamming",
    "change": "hamming",
    "replace": "hamming",
    "replace-one": "hamming",
    "substitution": "hamming",
    "bounded": "hamming",
}

GROUP_CITATIONS = {
    "pure": "Dwork & Roth (2014), The Algorithmic Foundations of Differential Privacy, Theorem 2.2 (group privacy)",
    "zcdp": "Bun & Steinke (2016), Concentrated Differential Privacy, Proposition 1.9 (group privacy: k^2 rho)",
    "approx": "Vadhan (2017), The Complexity of Differential Privacy, group privacy for "
    "(epsilon, delta)-DP, applied step by step: (k eps, k e^((k-1) eps) delta)",
    "gdp": "Dong, Roth & Su (2022), Gaussian Differential Privacy, Theorem 2.14 (group privacy: k mu)",
}


def _exp_upper_at_most_1(log_value) -> Fraction:
    """min(1, e^x) from above, for an interval x (1 as soon as x may reach 0)."""
    if log_value.hi >= 0:
        return Fraction(1)
    return min(Fraction(1), log_value.exp().upper())


def normalize_relation(name: str) -> str:
    """Map 'add/remove', 'change-one', 'bounded'... to 'symdiff' or 'hamming'."""
    key = str(name).strip().lower().replace("_", "-").replace(" ", "-")
    if key not in _RELATION_ALIASES:
        raise ConversionError(f"unknown neighbor relation {name!r}; expected symdiff or hamming")
    return _RELATION_ALIASES[key]


def _scale(budget: Budget, k: int) -> tuple[Budget, str]:
    """The budget for neighbors at distance k, and the rule, per premetric (k >= 1)."""
    if isinstance(budget, PureDP):
        return PureDP(k * budget.epsilon), f"pure epsilon x {k}"
    if isinstance(budget, ZCDP):
        return ZCDP(k * k * budget.rho), f"zCDP rho x {k * k}"
    if isinstance(budget, GaussianDP):
        return GaussianDP(k * budget.mu), f"GDP mu x {k}"
    if isinstance(budget, ApproxDP):
        eps, delta = budget.epsilon, budget.delta
        # Chaining one step at a time gives delta * (1 + e^eps + ... + e^((k-1) eps)); the
        # simpler published bound k e^((k-1) eps) delta is at least that, and is what we state.
        if delta == 0:
            new_delta = Fraction(0)
        elif math.isinf(eps):
            new_delta = Fraction(1)
        else:  # in log space (e^((k-1) eps) grows past any float), certified from above
            new_delta = _exp_upper_at_most_1(iv(k).ln() + (k - 1) * iv(eps) + iv(delta).ln())
        return ApproxDP(k * eps, new_delta), f"(k eps, k e^((k-1) eps) delta) with k = {k}"
    raise ConversionError(
        f"no exact group-privacy rule for {budget.kind} budgets: a Rényi bound at one order "
        "only gives group bounds from bounds at higher orders (Mironov 2017, Proposition 2); "
        "convert to zcdp or approx first"
    )


def change_relation(budget, from_relation: str, to_relation: str) -> Conversion:
    """Re-quote a budget from one neighbor relation to another.

    symdiff -> hamming: a change-one step is a removal and an addition (two add/remove steps):
    pure x2, zCDP x4, GDP x2, approx (2 eps, (1 + e^eps) delta). hamming -> symdiff does not
    exist in general."""
    budget = budget_from_params(budget)
    src, dst = normalize_relation(from_relation), normalize_relation(to_relation)
    if src == dst:
        return identity(budget)
    if src == "hamming":
        raise ConversionError(
            "the conversion hamming -> symdiff does not exist: a change-one (Hamming) budget "
            "compares datasets of the same size only, so it says nothing about adding or "
            "removing a record (the add/remove relation ranges over datasets of different sizes)"
        )
    if isinstance(budget, ApproxDP):
        eps, delta = budget.epsilon, budget.delta
        if delta == 0:
            new_delta = Fraction(0)
        elif math.isinf(eps):
            new_delta = Fraction(1)
        else:  # (1 + e^eps) delta, in log space, certified from above
            new_delta = _exp_upper_at_most_1(iv(eps) + (1 + iv(-eps).exp()).ln() + iv(delta).ln())
        result, rule = ApproxDP(2 * eps, new_delta), "(2 eps, (1 + e^eps) delta)"
        citation = "Dwork & Roth (2014), Definition 2.4 applied twice: P(S) <= e^eps (e^eps P''(S) + delta) + delta"
    elif budget.kind == "renyi":
        raise ConversionError(
            "no exact rule re-quotes a Rényi bound of one order from add/remove to change-one "
            "neighbors: the weak triangle inequality for Rényi divergence (Mironov 2017, "
            "Proposition 11) needs bounds at higher orders; convert to zcdp or approx first"
        )
    else:
        result, rule = _scale(budget, 2)
        citation = GROUP_CITATIONS[budget.kind] + "; a change-one neighbor is two add/remove steps"
    return Conversion(
        budget,
        result,
        "symdiff-to-hamming",
        citation,
        exact=True,
        note=f"a change-one neighbor is an add/remove pair: {rule}",
    )


def hamming_to_symdiff_fixed_size(budget) -> Conversion:
    """Re-quote a change-one budget for add/remove neighbors where every dataset compared has
    the same size (a declared count invariant on the unit's table fixes it).

    On datasets of one size the add/remove distance is exactly twice the change-one distance,
    so a budget per change-one step is half of it per add/remove step: pure / 2, zCDP / 4,
    GDP / 2. Approximate and Rényi budgets do not scale with the distance, so no rule exists."""
    budget = budget_from_params(budget)
    halves = {
        "pure": lambda b: (PureDP(b.epsilon / 2), "pure epsilon / 2"),
        "zcdp": lambda b: (ZCDP(b.rho / 4), "zCDP rho / 4"),
        "gdp": lambda b: (GaussianDP(b.mu / 2), "GDP mu / 2"),
    }  # exact: Fraction / int
    if budget.kind not in halves:
        raise ConversionError(
            f"even on datasets of one size, a change-one {budget.kind} budget has no exact add/remove "
            "form: it does not scale with the distance (only pure, zCDP and GDP budgets do)"
        )
    result, rule = halves[budget.kind](budget)
    return Conversion(
        budget,
        result,
        "hamming-to-symdiff-fixed-size",
        GROUP_CITATIONS[budget.kind] + ", read backwards: the add/remove distance is twice the change-one "
        "distance on datasets of one size",
        exact=True,
        note=f"the count invariant fixes the dataset size, so one change-one step is two add/remove steps: {rule}",
    )


def group(budget, k) -> Conversion:
    """The budget for a coarser unit holding at most k finer units (group privacy).

    pure x k, zCDP x k^2, approx (k eps, k e^((k-1) eps) delta), GDP x k."""
    budget = budget_from_params(budget)
    if isinstance(k, bool):
        raise ConversionError(f"a group size must be a whole number, got {k!r}")
    if not isinstance(k, numbers.Integral):
        if isinstance(k, numbers.Real) and float(k).is_integer():
            k = int(k)
        else:
            raise ConversionError(f"a group size must be a whole number, got {k!r}")
    k = int(k)
    if k < 1:
        raise ConversionError(f"a group size must be at least 1, got {k}")
    if k == 1:
        return identity(budget)
    result, rule = _scale(budget, k)
    return Conversion(
        budget,
        result,
        f"group-{k}",
        GROUP_CITATIONS[budget.kind],
        exact=True,
        note=f"a unit of at most {k} finer units: {rule}",
    )
