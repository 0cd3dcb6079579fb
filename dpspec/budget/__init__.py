"""Budget calculus: premetric values, conversions, unit changes, composition, statements.

Every figure this package produces comes with the rule that produced it (a `Conversion` or a
`Ledger`), because a budget means nothing without its currency and its exchange rate.
"""

from __future__ import annotations

import warnings

from dpspec.errors import ConversionError
from dpspec.verbs import make_callable

from .composition import Ledger, LedgerEntry, LedgerRelease, compose, parallel, sequential
from .conversions import (
    CITATIONS,
    Conversion,
    approx_to_approx,
    beyond_floats,
    bs16_delta,
    bs16_epsilon,
    chain,
    cks20_delta,
    cks20_epsilon,
    conversion_json,
    convert,
    gdp_delta,
    gdp_epsilon,
    gdp_to_approx,
    gdp_to_zcdp,
    identity,
    pure_to_approx,
    pure_to_renyi,
    pure_to_zcdp,
    renyi_delta,
    renyi_epsilon,
    renyi_to_approx,
    renyi_to_renyi,
    zcdp_to_approx,
    zcdp_to_renyi,
)
from .premetrics import (
    KINDS,
    ApproxDP,
    Budget,
    GaussianDP,
    InvalidBudget,
    PureDP,
    RenyiCurve,
    RenyiDP,
    ZCDP,
    budget_from_params,
    format_figure,
    normalize_kind,
)
from .statement import BudgetStatement, PublicCondition
from .units import (
    RELATIONS,
    change_relation,
    group,
    hamming_to_symdiff_fixed_size,
    normalize_relation,
    change_relation as _change_relation,
    group as _group,
)

__all__ = [
    "KINDS",
    "RELATIONS",
    "CITATIONS",
    "Budget",
    "PureDP",
    "ApproxDP",
    "ZCDP",
    "RenyiDP",
    "RenyiCurve",
    "GaussianDP",
    "InvalidBudget",
    "ConversionError",
    "budget_from_params",
    "normalize_kind",
    "format_figure",
    "Conversion",
    "convert",
    "chain",
    "identity",
    "conversion_json",
    "pure_to_zcdp",
    "pure_to_approx",
    "pure_to_renyi",
    "zcdp_to_approx",
    "zcdp_to_renyi",
    "renyi_to_approx",
    "renyi_to_renyi",
    "gdp_to_approx",
    "gdp_to_zcdp",
    "approx_to_approx",
    "bs16_epsilon",
    "bs16_delta",
    "cks20_epsilon",
    "cks20_delta",
    "renyi_epsilon",
    "renyi_delta",
    "gdp_epsilon",
    "gdp_delta",
    "change_relation",
    "group",
    "hamming_to_symdiff_fixed_size",
    "normalize_relation",
    "LedgerRelease",
    "Ledger",
    "LedgerEntry",
    "compose",
    "sequential",
    "parallel",
    "BudgetStatement",
    "PublicCondition",
    "convert_request",
]

# names renamed so that each concept has one: old name -> new name (kept with a DeprecationWarning)
_RENAMED = {
    "Release": "LedgerRelease",  # dpspec.api.Release is what a mechanism returns
    "format_number": "format_figure",
}  # dpspec.ir.format_number prints a number exactly


def __getattr__(name: str):
    if name in _RENAMED:
        warnings.warn(
            f"dpspec.budget.{name} is deprecated: use dpspec.budget.{_RENAMED[name]}", DeprecationWarning, stacklevel=2
        )
        return globals()[_RENAMED[name]]
    raise AttributeError(f"module 'dpspec.budget' has no attribute {name!r}")


def convert_request(
    params: dict,
    *,
    to=None,
    delta=None,
    epsilon=None,
    alpha=None,
    method: str = "cks20",
    from_unit=None,
    to_unit=None,
    group=None,
) -> dict:
    """One conversion request, as `dpspec convert` and `dpspec.convert(...)` make it.

    Applies, in this order, a unit change (from_unit -> to_unit), group privacy (a unit of at
    most `group` finer units), then a premetric conversion (`to`; inferred as approx when only
    delta or epsilon is given, renyi when only alpha is). Unit changes come first because they
    are tighter in the native premetric (zCDP x4, then convert). Returns a JSON-ready dict: the
    resulting parameters plus 'premetric', 'method' and 'citation'."""
    budget = budget_from_params(params)
    with beyond_floats(budget):
        return _request(budget, to, delta, epsilon, alpha, method, from_unit, to_unit, group)


def _request(budget, to, delta, epsilon, alpha, method, from_unit, to_unit, group) -> dict:
    steps = []
    if (from_unit is None) != (to_unit is None):
        raise ConversionError("a unit change needs both the relation it is quoted under and the target relation")
    if from_unit is not None:
        steps.append(_change_relation(budget, from_unit, to_unit))
        budget = steps[-1].result
    if group is not None:
        steps.append(_group(budget, group))
        budget = steps[-1].result
    if to is None:
        if delta is not None or epsilon is not None:
            to = "approx"
        elif alpha is not None:
            to = "renyi"
    if to is not None:
        steps.append(convert(budget, to, delta=delta, epsilon=epsilon, alpha=alpha, method=method))
    result = chain(*steps) if steps else identity(budget)
    return conversion_json(result)


make_callable(__name__, "budget")  # dpspec.verbs: `dpspec.budget(...)` after this subpackage is imported
