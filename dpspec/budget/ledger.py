"""From a mechanism's native budget to the spec's declared flavor, one named step at a time.

A mechanism proves a budget under its own flavor (say zCDP, add/remove one person). The spec
may declare another unit, relation or premetric; every conversion needed to reach the spec's
currency is a step of the ledger, named with its method, so a reader can retrace it. Declared
budget bounds are then checked in their own quoted currency, exactly: the achieved figure is an
exact rational or a certified upper bound (dpspec.budget.exact), the declared one is the exact
number the spec wrote, and no tolerance lets a figure above its bound pass.
"""

from __future__ import annotations

import math
from fractions import Fraction

import attrs

from dpspec import ir
from dpspec.budget import change_relation, convert, group, hamming_to_symdiff_fixed_size
from dpspec.budget.premetrics import format_figure, format_against
from dpspec.errors import ConversionError
from dpspec.check.invariants import determines

SPEC_TO_KIND = {"pure": "pure", "approximate": "approx", "zcdp": "zcdp", "renyi": "renyi", "gdp": "gdp"}
DEFAULT_DELTA = Fraction(1, 10**10)  # exact: the float 1e-10 is a little above 10^-10


@attrs.frozen
class Step:
    what: str  # "unit", "relation", "premetric"
    source: object
    result: object
    method: str
    citation: str = ""


@attrs.frozen
class BoundCheck:
    bound: ir.BudgetBound
    achieved: Fraction | float  # exact (or a certified upper bound); math.nan when it cannot be checked
    holds: bool
    currency: str  # how the achieved figure was computed, in words


@attrs.frozen
class FlavorLedger:
    """The budget the mechanism achieves, in the spec's flavor, with every step."""

    native: object  # BudgetStatement under the mechanism's native flavor
    native_flavor: object
    steps: tuple[Step, ...]
    declared: object | None  # the budget in the spec's flavor (None if no conversion exists)
    worst: object | None  # the worst case over admitted universes, in the spec's flavor
    problem: str | None
    currencies: tuple  # the declared budget in other premetrics: (Conversion, ...)
    bounds: tuple[BoundCheck, ...] = ()

    @property
    def bounds_hold(self) -> bool:
        return all(b.holds for b in self.bounds)


def _unit_steps(spec: ir.Spec, native_table: str, budget):
    """Group privacy from the mechanism's unit to the spec's unit, when they differ."""
    unit = spec.unit
    if native_table == unit.table:
        return budget, []
    tables = {t.name: t for t in spec.domain.tables}
    finer = tables.get(native_table)
    if finer is not None and finer.parent == unit.table:
        if unit.bound is not None and unit.bound.finer == native_table:
            k = unit.bound.k
        elif finer.link_bound is not None:
            k = finer.link_bound
        else:
            raise ConversionError(
                f"the mechanism protects one {native_table} record, but the spec's unit is {unit.table}; "
                f"group privacy needs a bound: unit {unit.table} : {unit.relation} holds at most K {native_table}, "
                f"or 'in {unit.table} by {finer.link} at most K' on table {native_table}"
            )
        conv = group(budget, k)
        return conv.result, [Step("unit", budget, conv.result, conv.method, conv.citation)]
    coarser = tables.get(unit.table)
    if coarser is not None and coarser.parent == native_table:
        # Changing one finer record changes one coarser unit: the guarantee carries over as is.
        return budget, [
            Step(
                "unit",
                budget,
                budget,
                f"a change to one {unit.table} record is a change to one {native_table}: same budget",
            )
        ]
    raise ConversionError(
        f"no known relation between the mechanism's unit ({native_table}) and the spec's unit ({unit.table})"
    )


def fixes_size(spec: ir.Spec) -> bool:
    """Whether the invariants (or public counts) fix how many units a dataset holds: then every
    dataset the guarantee compares has one size."""
    if spec.unit is None or spec.domain is None:
        return False
    fixed = list(spec.invariants) + [p.query for p in spec.public]
    return determines(fixed, ir.CountQuery(spec.unit.table), spec.domain)


def _relation_step(spec: ir.Spec, value, native_relation: str):
    """change-one -> add/remove exists only where the dataset size is fixed (factor 2 on the
    distance); every other direction is `change_relation`'s."""
    try:
        return change_relation(value, native_relation, spec.unit.relation)
    except ConversionError:
        if native_relation == "hamming" and spec.unit.relation == "symdiff" and fixes_size(spec):
            return hamming_to_symdiff_fixed_size(value)
        raise


def to_spec_flavor(spec: ir.Spec, native_flavor, budget):
    """Convert one budget value from the native flavor into the spec's; returns (value, steps)."""
    if budget is None:
        return None, []
    value, steps = _unit_steps(spec, native_flavor.table, budget)
    if native_flavor.relation != spec.unit.relation:
        conv = _relation_step(spec, value, native_flavor.relation)
        steps.append(Step("relation", value, conv.result, conv.method, conv.citation))
        value = conv.result
    kind = SPEC_TO_KIND[spec.premetric.kind]
    if value.kind != kind:
        delta = spec.premetric.option("delta")
        alpha = spec.premetric.option("alpha")
        conv = convert(value, kind, delta=delta, alpha=alpha)
        steps.append(Step("premetric", value, conv.result, conv.method, conv.citation))
        value = conv.result
    return value, steps


def other_currencies(budget, delta: float) -> tuple:
    """The declared budget restated in the other premetrics, each conversion named."""
    if budget is None or not budget.is_finite:
        return ()
    # (target premetric, options); "via" chains through zCDP, as a zCDP accountant would report
    plans = {
        "pure": [
            ("zcdp", {}),
            ("approx", {}),
            ("approx", {"method": "bs16", "via": "zcdp"}),
            ("approx", {"method": "cks20", "via": "zcdp"}),
        ],
        "zcdp": [("approx", {"method": "bs16"}), ("approx", {"method": "cks20"})],
        "renyi": [("approx", {})],
        "gdp": [("approx", {}), ("zcdp", {})],
    }
    out = []
    plan = plans.get(budget.kind, [])
    for to, kwargs in plan:
        kwargs = dict(kwargs)
        via = kwargs.pop("via", None)
        try:
            if via:  # e.g. pure -> zCDP -> approximate: what a zCDP accountant would report
                first = convert(budget, via)
                second = convert(first.result, to, delta=delta, **kwargs)
                out.append(attrs.evolve(second, source=budget, method=f"{first.method}, then {second.method}"))
            else:
                out.append(convert(budget, to, delta=delta, **kwargs))
        except ConversionError:
            continue
    return tuple(out)


def _achieved_for_bound(bound: ir.BudgetBound, spec: ir.Spec, native_flavor, native_value):
    """The achieved budget in the bound's own currency; returns (figure, words)."""
    relation = bound.relation or spec.unit.relation
    flavor = attrs.evolve(spec, unit=attrs.evolve(spec.unit, relation=relation))
    value, _ = to_spec_flavor(flavor, native_flavor, native_value)
    with_ = dict(bound.with_)
    method = bound.method or "cks20"
    q = bound.quantity
    if q in value.params() and not (q == "epsilon" and "delta" in with_ and value.kind != "approx"):
        return value.params()[q], f"{value.kind}, {relation}"
    if q == "epsilon":
        delta = with_.get("delta", spec.premetric.option("delta") or DEFAULT_DELTA)
        conv = convert(value, "approx", delta=delta, method=method)
        return conv.result.epsilon, f"approximate DP at delta = {format_figure(delta)} by {conv.method}, {relation}"
    if q == "rho":
        conv = convert(value, "zcdp")
        return conv.result.rho, f"zCDP by {conv.method}, {relation}"
    if q == "delta":
        eps = with_.get("epsilon")
        if eps is None:
            raise ConversionError("a delta bound needs 'with epsilon = E'")
        conv = convert(value, "approx", epsilon=eps, method=method)
        return conv.result.delta, f"delta at epsilon = {format_figure(eps)} by {conv.method}, {relation}"
    if q == "mu":
        conv = convert(value, "gdp")
        return conv.result.mu, f"Gaussian DP by {conv.method}, {relation}"
    raise ConversionError(f"cannot express the budget as {q}")


def upper_limit(bound) -> Fraction | None:
    """An upper bound's limit ('rho <= 4.96': 4.96, exact), what an achieved figure is read
    against; None for a bound of another form."""
    if getattr(bound, "op", None) not in ("<=", "<"):
        return None
    try:
        return Fraction(bound.value)
    except (TypeError, ValueError):
        return None


def achieved_text(check) -> str:
    """A bound check's achieved figure with the digits that put it on the right side of its
    bound (4.962 against 'rho <= 4.96', never a rounded 4.96 that reads as meeting it); '—' when
    there is none."""

    value = check.achieved
    if isinstance(value, float) and math.isnan(value):
        return "—"
    return format_against(value, upper_limit(check.bound), bool(check.holds))


EQUAL_TOLERANCE = Fraction(1, 10**9)  # 'epsilon = 52.83' quotes a rounded figure: equal to 1e-9 relative


def _holds(op: str, achieved, limit) -> bool:
    """Whether `achieved op limit`, decided in exact arithmetic (achieved is exact or a certified
    upper bound, so '<=' and '<' are never wrongly said to hold). '=' holds within a relative
    1e-9 (a figure quoted from a publication is rounded), measured exactly."""
    limit = Fraction(limit)
    if isinstance(achieved, float) and math.isnan(achieved):
        return False
    if op == "<=":
        return achieved <= limit
    if op == "<":
        return achieved < limit
    if math.isinf(achieved):
        return False
    return abs(Fraction(achieved) - limit) <= EQUAL_TOLERANCE * abs(limit)


def build(spec: ir.Spec, native_flavor, statement, currencies: bool = True) -> FlavorLedger:
    """The ledger; `currencies=False` skips restating it in other premetrics (CKS20 needs scipy),
    for callers that read only the declared and worst-case figures, such as `dpspec check`."""
    problem = None
    steps: list[Step] = []
    declared = worst = None
    try:
        declared, steps = to_spec_flavor(spec, native_flavor, statement.actual)
        worst, _ = to_spec_flavor(spec, native_flavor, statement.worst)
    except ConversionError as exc:
        problem = str(exc)
    delta = spec.premetric.option("delta") or DEFAULT_DELTA
    checks = []
    for bound in spec.budgets:
        try:
            figure, words = _achieved_for_bound(bound, spec, native_flavor, statement.actual)
        except ConversionError as exc:
            checks.append(BoundCheck(bound, math.nan, False, f"cannot be checked: {exc}"))
            continue
        checks.append(BoundCheck(bound, figure, _holds(bound.op, figure, bound.value), words))
    return FlavorLedger(
        statement,
        native_flavor,
        tuple(steps),
        declared,
        worst,
        problem,
        other_currencies(declared, delta) if currencies else (),
        tuple(checks),
    )
