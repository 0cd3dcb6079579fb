"""Budgets in one currency: what a figure is quoted in, and how two figures meet.

A budget is a banknote and its flavor the currency. To compare two, both are converted to one
unit (group privacy when one unit holds the other's), one relation (change-one: add/remove
converts to it, not the reverse) and one premetric (the first both convert to), every step
named by `dpspec.budget.ledger.to_spec_flavor`. When no such currency exists, `common_currency` says
why instead of returning numbers.
"""

from __future__ import annotations

import math
import os
from fractions import Fraction

import attrs

from dpspec import ir
from dpspec.audit.multiverse import merged_domain
from dpspec.budget import ApproxDP, GaussianDP, PureDP, RenyiDP, ZCDP
from dpspec.errors import ConversionError, DpspecError
from dpspec.budget.ledger import DEFAULT_DELTA, SPEC_TO_KIND, to_spec_flavor
from dpspec.contract.mechanism import NativeFlavor
from dpspec.lazy import LazyModule

# imported on first use: `dpspec --help` loads this module, not them
_program = LazyModule("dpspec.budget.program", "_program", globals())
_parser = LazyModule("dpspec.language.parser", "_parser", globals())

# Where a quoted budget comes from, in words a reader without the ledger's vocabulary follows.
ACHIEVED = "achieved by the mechanism, as dpspec computes it, not the bound the spec declares"

KIND_TO_SPEC = {v: k for k, v in SPEC_TO_KIND.items()}
PREMETRIC_WORDS = {
    "pure": "pure DP (MULT)",
    "approx": "approximate DP",
    "zcdp": "zCDP",
    "renyi": "Rényi DP",
    "gdp": "Gaussian DP",
}
RELATION_WORDS = {"hamming": "change one", "symdiff": "add or remove one"}


def describe_premetric(p: ir.Premetric | None) -> str:
    if p is None:
        return "no premetric declared"
    kind = SPEC_TO_KIND.get(p.kind, p.kind)
    text = PREMETRIC_WORDS.get(kind, p.kind)
    for name, value in p.options:
        text += f", {name} = {ir.format_number(value)}"
    if p.events:
        text += f', on events "{p.events}" only'
    return text


def unit_word(domain: ir.Domain | None, table: str) -> str:
    """What one row of a table is (person, household), for prose; the table name otherwise."""
    t = domain.table(table) if domain else None
    return t.unit if t is not None and t.unit else table


def ancestors(table: str, domain: ir.Domain | None) -> list[str]:
    """The tables whose units contain this table's units, nearest first."""
    out = []
    t = domain.table(table) if domain else None
    while t is not None and t.parent and t.parent not in out:
        out.append(t.parent)
        t = domain.table(t.parent)
    return out


def group_size(finer: str, coarser: str, *units: ir.Unit | None, domain: ir.Domain | None = None) -> int | None:
    """How many FINER units one COARSER unit holds at most: from a `unit COARSER : ... holds at
    most k FINER` declaration, or else from the domain's links (`in P by ID at most k`), whose
    bounds multiply along a chain (visits in patients in practices)."""
    for u in units:
        if u is not None and u.table == coarser and u.bound is not None and u.bound.finer == finer:
            return u.bound.k
    return link_group_size(finer, coarser, domain)


def link_group_size(finer: str, coarser: str, domain: ir.Domain | None) -> int | None:
    """The product of the link bounds from FINER up to COARSER; None if one is missing."""
    k, t = 1, domain.table(finer) if domain else None
    seen = set()
    while t is not None and t.parent and t.name not in seen:
        seen.add(t.name)
        if t.link_bound is None:
            return None
        k *= t.link_bound
        if t.parent == coarser:
            return k
        t = domain.table(t.parent)
    return None


@attrs.frozen
class Quote:
    """A budget figure with its whole currency: unit, relation, premetric, and where it came from."""

    budget: object
    table: str
    relation: str
    source: str
    method: str | None = None
    unit: str | None = None  # what one row of the table is (person, household), for prose
    computed: bool = True  # False: a stated bound, not a budget the ledger computed

    def describe(self) -> str:
        return (
            f"{self.budget} ({PREMETRIC_WORDS.get(self.budget.kind, self.budget.kind)}, "
            f"{RELATION_WORDS.get(self.relation, self.relation)} {self.unit or self.table})"
        )


def bound_budget(spec: ir.Spec, bound: ir.BudgetBound):
    """A declared bound as a budget value in its own quoted currency (None if it cannot be read)."""
    value = bound.value  # exact, as the spec wrote it
    with_ = dict(bound.with_)
    p = spec.premetric
    kind = SPEC_TO_KIND.get(p.kind) if p else None
    q = bound.quantity
    if q == "rho":
        return ZCDP(value)
    if q == "mu":
        return GaussianDP(value)
    if q == "delta":
        return ApproxDP(with_["epsilon"], value) if "epsilon" in with_ else None
    if q != "epsilon":
        return None
    if "delta" in with_:
        return ApproxDP(value, with_["delta"])
    if kind == "pure":
        return PureDP(value)
    if kind == "approx":
        return ApproxDP(value, p.option("delta") or DEFAULT_DELTA)
    if kind == "renyi" and p.option("alpha") is not None:
        return RenyiDP(p.option("alpha"), value)
    return ApproxDP(value, DEFAULT_DELTA)


def program_total(spec: ir.Spec):
    """(composed total, first member spec) of a program, or None when it cannot be composed."""

    try:
        members, ledger = _program.program_ledger(spec)
    except DpspecError:
        return None
    return (ledger.total, _with_program_unit(spec, members[0].spec)) if members else None


def _with_program_unit(program: ir.Spec, member: ir.Spec) -> ir.Spec:
    """A member's flavor with the program's composed unit, when the program states one."""
    return attrs.evolve(member, unit=program.unit) if program.unit is not None else member


def flavor_spec(spec: ir.Spec) -> ir.Spec:
    """The spec whose flavor stands for this one: a program's members share one flavor."""
    if spec.program is None:
        return spec

    for part in spec.program.parts:
        for rel in part.paths:
            path = rel if os.path.isabs(rel) else os.path.join(spec.base_dir, rel)
            try:
                return _with_program_unit(spec, _parser.parse(_parser.read_source(path), path))
            except DpspecError:
                return spec
    return spec


def quote(spec: ir.Spec, result=None, account=None) -> Quote | None:
    """The figure to compare: the achieved budget when known (a program's composed total), else
    the first readable bound."""
    ledger = getattr(result, "ledger", None) or getattr(account, "ledger", None)
    if spec.program is not None:
        found = program_total(spec)
        if found is None:
            return None
        total, member = found
        return Quote(
            total,
            member.unit.table,
            member.unit.relation,
            "composed total of the program",
            unit=unit_word(member.domain, member.unit.table),
        )
    if spec.unit is None:
        return None
    if ledger is not None and ledger.declared is not None:
        return Quote(
            ledger.declared, spec.unit.table, spec.unit.relation, ACHIEVED, unit=unit_word(spec.domain, spec.unit.table)
        )
    for bound in spec.budgets:
        try:
            b = bound_budget(spec, bound)
        except ConversionError:  # an out-of-range figure in a spec that failed the check
            continue
        if b is not None:
            return Quote(
                b,
                spec.unit.table,
                bound.relation or spec.unit.relation,
                f"stated bound '{bound.describe()}'",
                bound.method,
                unit_word(spec.domain, spec.unit.table),
                computed=False,
            )
    return None


def _target_premetrics(a, b, declared=()) -> list[ir.Premetric]:
    """Candidate common premetrics, fewest conversions first. An approximate target takes the
    largest delta either spec declares or either figure carries (the weaker yardstick)."""
    kinds = []
    for k in (a.kind, b.kind, "zcdp", "approx"):
        if k not in kinds:
            kinds.append(k)
    deltas = [x.delta for x in (a, b) if x.kind == "approx"]
    deltas += [p.option("delta") for p in declared if p is not None and p.option("delta") is not None]
    alphas = [x.alpha for x in (a, b) if x.kind == "renyi"]
    out = []
    for k in kinds:
        options = ()
        if k == "approx":
            options = (("delta", max((_exact(d) for d in deltas), default=_exact(DEFAULT_DELTA))),)
        elif k == "renyi":
            if not alphas:
                continue
            options = (("alpha", min(alphas)),)
        out.append(ir.Premetric(KIND_TO_SPEC[k], tuple((n, _exact(v)) for n, v in options)))
    return out


def _exact(v):
    """An exact number as the decimal a person would write (0.01, not its binary expansion)."""
    return v if isinstance(v, Fraction) else Fraction(repr(float(v)))


_SAME = Fraction(1, 10**12)


def order(a, b) -> int | None:
    """-1 if budget a is the smaller (stronger), 0 equal, 1 larger, None if not ordered."""

    def cmp(x, y):
        # equal within a relative 1e-12, measured exactly: one budget reached by two routes of
        # certified conversions (each rounded up to a float) is the same budget
        if x == y or (
            math.isfinite(x)
            and math.isfinite(y)
            and abs(Fraction(x) - Fraction(y)) <= _SAME * max(abs(Fraction(x)), abs(Fraction(y)))
        ):
            return 0
        return -1 if x < y else 1

    if a.kind != b.kind:
        return None
    if a.kind == "pure":
        return cmp(a.epsilon, b.epsilon)
    if a.kind == "zcdp":
        return cmp(a.rho, b.rho)
    if a.kind == "gdp":
        return cmp(a.mu, b.mu)
    if a.kind == "renyi":
        if getattr(a, "alpha", None) != getattr(b, "alpha", None):
            return None
        return cmp(a.epsilon, b.epsilon)
    e, d = cmp(a.epsilon, b.epsilon), cmp(a.delta, b.delta)
    if e == d or d == 0:
        return e
    if e == 0:
        return d
    return None


def common_currency(qs: Quote, qb: Quote, spec: ir.Spec, baseline: ir.Spec):
    """Convert both quotes to one currency; returns (value_s, value_b, steps_s, steps_b, currency)
    or raises ConversionError saying why no common currency exists."""
    spec, baseline = flavor_spec(spec), flavor_spec(baseline)
    domain = merged_domain(spec.domain, baseline.domain)
    bound = None
    if qs.table == qb.table:
        table = qs.table
    else:
        if qb.table in ancestors(qs.table, domain)[:1]:
            finer, coarser = qs.table, qb.table
        elif qs.table in ancestors(qb.table, domain)[:1]:
            finer, coarser = qb.table, qs.table
        else:
            raise ConversionError(
                f"the units {qs.table} and {qb.table} are not nested one in the other, "
                "so neither budget converts into the other's unit"
            )
        k = group_size(finer, coarser, spec.unit, baseline.unit, domain=domain)
        if k is None:
            raise ConversionError(
                f"one spec protects {finer} records and the other whole {coarser}; "
                f"without a declared bound (unit {coarser} : ... holds at most K {finer}) "
                "group privacy gives no figure"
            )
        table, bound = coarser, ir.UnitBound(k, finer)
    relation = qs.relation if qs.relation == qb.relation else "hamming"
    unit = ir.Unit(table, relation, bound)
    problems = []
    for premetric in _target_premetrics(qs.budget, qb.budget, (spec.premetric, baseline.premetric)):
        target = ir.Spec(domain=domain, unit=unit, premetric=premetric)
        try:
            vs, steps_s = to_spec_flavor(target, NativeFlavor(qs.table, qs.relation, qs.budget.kind), qs.budget)
            vb, steps_b = to_spec_flavor(target, NativeFlavor(qb.table, qb.relation, qb.budget.kind), qb.budget)
        except ConversionError as exc:
            problems.append(str(exc))
            continue
        currency = (
            f"{describe_premetric(premetric)}, {RELATION_WORDS[relation]} {unit_word(domain, table)} ({relation})"
        )
        return vs, vb, steps_s, steps_b, currency
    raise ConversionError("no premetric both budgets convert to: " + "; ".join(dict.fromkeys(problems)))
