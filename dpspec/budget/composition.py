"""Composition of several releases into one ledger.

Releases of the same data compose sequentially: their budgets add up, but only within one
premetric, so every budget is first converted into a common one (and the ledger keeps each
conversion). Releases run separately on disjoint parts of the data (the 50 states) compose in
parallel: the maximum over the parts counts, once.
"""

from __future__ import annotations

from collections import OrderedDict
from fractions import Fraction

import attrs

from dpspec import ir
from dpspec.errors import ConversionError

from .conversions import Conversion, convert, identity
from .exact import exact_sum, sqrt_upper
from .premetrics import (
    ApproxDP,
    Budget,
    GaussianDP,
    PureDP,
    RenyiCurve,
    RenyiDP,
    ZCDP,
    budget_from_params,
    format_figure,
    normalize_kind,
    to_exact,
)
from .statement import BudgetStatement, PublicCondition

SEQUENTIAL_CITATIONS = {
    "pure": "Dwork & Roth (2014), Theorem 3.16 (epsilons add up)",
    "zcdp": "Bun & Steinke (2016), Lemma 1.7 (rhos add up)",
    "gdp": "Dong, Roth & Su (2022), Corollary 3.3 (mus add in quadrature)",
    "renyi": "Mironov (2017), Proposition 1 (epsilons add up at each order)",
    "approx": "Dwork & Roth (2014), Theorem 3.16 (basic composition: epsilons and deltas add up)",
}
PARALLEL_CITATION = "McSherry (2009), Privacy Integrated Queries, Theorem 4 (parallel composition)"


def _budget_or_statement(value):
    if isinstance(value, BudgetStatement):
        return value
    return budget_from_params(value)


@attrs.frozen
class LedgerRelease:
    """One release and its budget (a plain budget, or a per-universe `BudgetStatement`).

    parallel_group: releases sharing a group ran on disjoint parts of the data; `universe`
    names the part (e.g. group 'states', universe 'MA')."""

    name: str
    budget: Budget | BudgetStatement = attrs.field(converter=_budget_or_statement)
    universe: str | None = None
    parallel_group: str | None = None

    @property
    def statement(self) -> BudgetStatement:
        if isinstance(self.budget, BudgetStatement):
            return self.budget
        return BudgetStatement.fixed(self.budget)


@attrs.frozen
class LedgerEntry:
    """A release's budget as stated, as composed, and the conversion between the two."""

    release: LedgerRelease
    original: Budget
    converted: Budget
    conversion: Conversion

    def to_json(self) -> dict:
        return {
            "name": self.release.name,
            "universe": self.release.universe,
            "parallel_group": self.release.parallel_group,
            "original": self.original.to_json(),
            "converted": self.converted.to_json(),
            "conversion": self.conversion.to_json(),
        }


@attrs.frozen
class Ledger:
    """The composed budget of a program of releases, with every step that produced it.

    total: the composed budget for the actual universe(s). worst: the composed worst case over
    admitted universes (None when some release has no finite worst case). conversions: the
    conversions applied to subtotals (e.g. a zCDP subtotal converted to (eps, delta)).
    public: the public information the guarantee is conditioned on (costs no budget)."""

    entries: tuple[LedgerEntry, ...]
    total: Budget
    premetric: str
    method: str
    worst: Budget | None = None
    per_universe: bool = False
    notes: tuple[str, ...] = ()
    conversions: tuple[Conversion, ...] = ()
    public: tuple[PublicCondition, ...] = ()
    depends_on: dict = attrs.field(factory=dict, hash=False)

    def total_in(self, to: str, **kwargs) -> Conversion:
        """The total re-quoted in another premetric (for comparison with a stated bound)."""
        return convert(self.total, to, **kwargs)

    def to_json(self) -> dict:
        """A JSON-ready dict (infinities as the string 'inf')."""
        return {
            "premetric": self.premetric,
            "total": self.total.to_json(),
            "worst": None if self.worst is None else self.worst.to_json(),
            "per_universe": self.per_universe,
            "method": self.method,
            "notes": list(self.notes),
            "entries": [e.to_json() for e in self.entries],
            "conversions": [c.to_json() for c in self.conversions],
            "public": [p.to_json() for p in self.public],
            "depends_on": ir.to_jsonable(self.depends_on, fractions="float", coerce=True),
        }

    def __str__(self) -> str:
        return f"{self.total} ({self.method})"


# ---- composing budgets that share one premetric --------------------------------------------


def _common_orders(budgets) -> tuple[float, ...]:
    orders = None
    for b in budgets:
        mine = {a for a, _ in b.points}
        orders = mine if orders is None else orders & mine
    if not orders:
        raise ConversionError("Rényi budgets at different orders cannot be composed: no order is shared by all")
    return tuple(sorted(orders))


def _renyi(points) -> Budget:
    return RenyiDP(*points[0]) if len(points) == 1 else RenyiCurve(points)


def sequential(budgets: list[Budget]) -> Budget:
    """Compose budgets of one premetric applied to the same data."""
    kind = budgets[0].kind
    if kind == "pure":
        return PureDP(exact_sum(b.epsilon for b in budgets))
    if kind == "zcdp":
        return ZCDP(exact_sum(b.rho for b in budgets))
    if kind == "gdp":  # sqrt of the exact sum of squares, certified from above
        return GaussianDP(sqrt_upper(exact_sum(b.mu * b.mu for b in budgets)))
    if kind == "approx":
        return ApproxDP(exact_sum(b.epsilon for b in budgets), min(Fraction(1), exact_sum(b.delta for b in budgets)))
    orders = _common_orders(budgets)
    table = [dict(b.points) for b in budgets]
    return _renyi(tuple((a, exact_sum(t[a] for t in table)) for a in orders))


def parallel(budgets: list[Budget]) -> Budget:
    """Compose budgets of one premetric applied to disjoint parts of the data (the max)."""
    kind = budgets[0].kind
    if kind == "pure":
        return PureDP(max(b.epsilon for b in budgets))
    if kind == "zcdp":
        return ZCDP(max(b.rho for b in budgets))
    if kind == "gdp":
        return GaussianDP(max(b.mu for b in budgets))
    if kind == "approx":
        return ApproxDP(max(b.epsilon for b in budgets), max(b.delta for b in budgets))
    orders = _common_orders(budgets)
    table = [dict(b.points) for b in budgets]
    return _renyi(tuple((a, max(t[a] for t in table)) for a in orders))


def _blocks(releases) -> list[list[list[int]]]:
    """Indices grouped as blocks (composed sequentially) of parts (composed in parallel) of
    releases (composed sequentially within a part)."""
    blocks: "OrderedDict[object, OrderedDict[str, list[int]]]" = OrderedDict()
    for i, r in enumerate(releases):
        if r.parallel_group is None:
            blocks[("single", i)] = OrderedDict({"": [i]})
            continue
        if r.universe is None:
            raise ConversionError(
                f"release {r.name!r} is in parallel group {r.parallel_group!r} but names no "
                "universe (the part of the data it ran on)"
            )
        parts = blocks.setdefault(("group", r.parallel_group), OrderedDict())
        parts.setdefault(r.universe, []).append(i)
    return [list(parts.values()) for parts in blocks.values()]


def _compose_structure(budgets: list[Budget], blocks) -> Budget:
    return sequential([parallel([sequential([budgets[i] for i in part]) for part in parts]) for parts in blocks])


# ---- choosing the common premetric ---------------------------------------------------------


def _auto_target(kinds: set[str]) -> str:
    if not kinds or kinds == {"pure"}:
        return "pure"
    if kinds == {"gdp"}:
        return "gdp"
    if "approx" in kinds:
        return "approx"
    if "renyi" in kinds:
        return "renyi"
    return "zcdp"


def _to_common(budgets: list[Budget], target: str, alpha) -> list[Conversion]:
    """Convert each budget into the working premetric `target` (not approx)."""
    if target == "renyi":
        if alpha is None:
            renyis = [b for b in budgets if b.kind == "renyi"]
            if not renyis:
                raise ConversionError("composing in Rényi DP needs the order(s) alpha")
            orders = _common_orders(renyis)
        else:
            orders = tuple(
                sorted({to_exact(a, "alpha") for a in (alpha if isinstance(alpha, (list, tuple)) else [alpha])})
            )
        arg = orders[0] if len(orders) == 1 else list(orders)
        out = []
        for b in budgets:
            c = convert(b, "renyi", alpha=arg)
            if c.result == b:
                c = identity(b)
            out.append(c)
        return out
    return [convert(b, target) for b in budgets]


def _compose_once(budgets, blocks, target, delta, method, alpha):
    """Compose in `target`; returns (total, per-entry conversions, subtotal conversions, notes)."""
    notes: list[str] = []
    if target != "approx":
        convs = _to_common(budgets, target, alpha)
        total = _compose_structure([c.result for c in convs], blocks)
        notes.append(f"sequential composition in {target}: {SEQUENTIAL_CITATIONS[target]}")
        return total, convs, [], notes

    # (eps, delta): compose the non-approximate releases in their own (tighter) premetric,
    # convert that subtotal once, then add the approximate releases by basic composition.
    approx_idx = [i for i, b in enumerate(budgets) if b.kind == "approx"]
    other_idx = [i for i, b in enumerate(budgets) if b.kind != "approx"]
    convs: list[Conversion | None] = [None] * len(budgets)
    sub_convs: list[Conversion] = []

    def restrict(keep: set[int]):
        """The block structure of the releases in `keep` only (a subset of a program)."""
        kept = [[[i for i in part if i in keep] for part in parts] for parts in blocks]
        return [[p for p in parts if p] for parts in kept if any(parts)]

    approx_total = ApproxDP(0, 0)
    if approx_idx:
        for i in approx_idx:
            convs[i] = identity(budgets[i])
        approx_total = _compose_structure(budgets, restrict(set(approx_idx)))
    if not other_idx:
        notes.append(f"basic composition of (epsilon, delta): {SEQUENTIAL_CITATIONS['approx']}")
        if delta is not None and to_exact(delta, "delta") < approx_total.delta:
            # The total is what it is; a stated bound on delta is checked elsewhere.
            notes.append(
                f"the releases' deltas add up to {format_figure(approx_total.delta)}, above the "
                f"requested total delta {format_figure(to_exact(delta, 'delta'))}"
            )
        return approx_total, convs, sub_convs, notes

    sub_target = _auto_target({budgets[i].kind for i in other_idx})
    sub = _to_common([budgets[i] for i in other_idx], sub_target, alpha)
    for i, c in zip(other_idx, sub):
        convs[i] = c
    mapped = list(budgets)
    for i, c in zip(other_idx, sub):
        mapped[i] = c.result
    subtotal = _compose_structure(mapped, restrict(set(other_idx)))
    notes.append(f"sequential composition in {sub_target}: {SEQUENTIAL_CITATIONS[sub_target]}")

    if sub_target == "pure":
        sub_conv = convert(subtotal, "approx")
    else:
        if delta is None:
            raise ConversionError(f"composing {sub_target} releases into (epsilon, delta) needs the total delta")
        d_total = to_exact(delta, "delta")
        d_sub = d_total - approx_total.delta
        if not d_sub > 0:
            raise ConversionError(
                f"the (epsilon, delta) releases already use delta = "
                f"{format_figure(approx_total.delta)}, leaving none of the total "
                f"{format_figure(d_total)} for the {sub_target} releases"
            )
        sub_conv = convert(subtotal, "approx", delta=d_sub, method=method)
        if approx_idx:
            notes.append(
                f"the {sub_target} subtotal gets delta = {format_figure(d_sub)}: the total "
                f"{format_figure(d_total)} minus the (epsilon, delta) releases' "
                f"{format_figure(approx_total.delta)}"
            )
    sub_convs.append(sub_conv)
    if approx_idx:
        notes.append(
            f"basic composition of the converted {sub_target} subtotal with the (epsilon, delta) "
            f"releases: {SEQUENTIAL_CITATIONS['approx']}"
        )
        total = sequential([sub_conv.result, approx_total])
    else:
        total = sub_conv.result
    return total, convs, sub_convs, notes


def compose(releases, *, to: str | None = None, delta=None, method: str = "cks20", alpha=None, public=()) -> Ledger:
    """Compose releases into a ledger.

    The common premetric is `to`, or else: pure if all are pure, GDP if all are GDP, zCDP for
    a mix of pure/zCDP/GDP, Rényi if Rényi budgets are involved, (eps, delta) if any is.
    `delta` is the total delta when the result is (eps, delta); `method` names the zCDP ->
    (eps, delta) conversion; `public` lists public information the guarantee is conditioned on."""
    releases = tuple(r if isinstance(r, LedgerRelease) else LedgerRelease(**r) for r in releases)
    statements = [r.statement for r in releases]
    actual = [s.actual for s in statements]
    kinds = {b.kind for b in actual}
    target = normalize_kind(to) if to is not None else _auto_target(kinds)
    blocks = _blocks(releases)

    if not releases:
        zero = {"pure": PureDP(0), "approx": ApproxDP(0, 0), "zcdp": ZCDP(0), "gdp": GaussianDP(0)}
        total = zero.get(target, PureDP(0))
        return Ledger((), total, total.kind, "no releases", worst=total, public=tuple(public))

    total, convs, sub_convs, notes = _compose_once(actual, blocks, target, delta, method, alpha)

    worsts = [s.worst_case for s in statements]
    per_universe = any(s.per_universe for s in statements)
    worst = None
    if all(w is not None for w in worsts):
        if not per_universe and worsts == actual:
            worst = total
        else:
            worst = _compose_once(worsts, blocks, target, delta, method, alpha)[0]

    groups = [parts for parts in blocks if len(parts) > 1 or releases[parts[0][0]].parallel_group is not None]
    for parts in groups:
        g = releases[parts[0][0]].parallel_group
        names = ", ".join(str(releases[p[0]].universe) for p in parts)
        notes.append(
            f"parallel group {g!r}: releases on disjoint parts ({names}) count once, at the "
            f"maximum over parts ({PARALLEL_CITATION}); this holds when one unit's change "
            "touches one part only (parts fixed by values the neighbor relation cannot change, "
            "or add/remove neighbors)"
        )
    for s in statements:
        notes.extend(n for n in s.notes if n not in notes)

    method_parts = [f"sequential composition in {total.kind if not sub_convs else _sub_kind(sub_convs)}"]
    if groups:
        method_parts.append(f"parallel composition (max) in {len(groups)} group(s)")
    for c in sub_convs:
        if c.method != "identity":
            method_parts.append(f"{c.source.kind} subtotal to {c.result.kind} by {c.method}")
    if target == "approx" and any(b.kind == "approx" for b in actual):
        method_parts.append("basic composition of (epsilon, delta)")

    entries = tuple(LedgerEntry(r, b, c.result, c) for r, b, c in zip(releases, actual, convs))
    depends_on: dict = {}
    conditions = list(public)
    for s in statements:
        depends_on.update(s.depends_on)
        conditions.extend(p for p in s.public if p not in conditions)
    return Ledger(
        entries=entries,
        total=total,
        premetric=total.kind,
        method="; ".join(method_parts),
        worst=worst,
        per_universe=per_universe,
        notes=tuple(notes),
        conversions=tuple(sub_convs),
        public=tuple(PublicCondition(p) if isinstance(p, str) else p for p in conditions),
        depends_on=depends_on,
    )


def _sub_kind(sub_convs) -> str:
    return sub_convs[0].source.kind
