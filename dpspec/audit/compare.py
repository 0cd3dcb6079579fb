"""Compare a spec with a baseline, block by block: same, stronger, weaker or incomparable.

Verdicts are from the spec's side: "stronger" means the spec protects more on that block.
Budgets are only compared in one currency: both are first converted to a common unit (group
privacy when one unit holds the other's), relation (change-one: add/remove converts to it, not
the reverse) and premetric (the first one both convert to), every step named. Where no common
currency exists the row says so instead of comparing numbers.
"""

from __future__ import annotations

import attrs

from dpspec import ir
from dpspec.audit.currency import (
    RELATION_WORDS,
    ancestors,
    common_currency,
    describe_premetric,
    flavor_spec,
    group_size,
    quote,
    unit_word,
)
from dpspec.audit.currency import order as budget_order
from dpspec.audit.multiverse import merged_domain, refinement, undetermined
from dpspec.budget import ApproxDP, GaussianDP, PureDP, RenyiDP, ZCDP, convert
from dpspec.check.checker import STAGES
from dpspec.errors import ConversionError
from dpspec.budget.ledger import DEFAULT_DELTA, SPEC_TO_KIND
from dpspec.audit.base import jsonable

VERDICTS = ("same", "stronger", "weaker", "incomparable")
BLOCKS = ("domain", "multiverse", "unit", "premetric", "budget")


@attrs.frozen
class BlockComparison:
    block: str
    verdict: str
    reason: str
    spec: str
    baseline: str
    evidence: dict = attrs.field(factory=dict, eq=False, hash=False)

    def to_json(self) -> dict:

        return {
            "block": self.block,
            "verdict": self.verdict,
            "reason": self.reason,
            "spec": self.spec,
            "baseline": self.baseline,
            "evidence": jsonable(self.evidence),
        }


@attrs.frozen
class Comparison:
    spec_title: str | None
    baseline_title: str | None
    rows: tuple[BlockComparison, ...]

    def row(self, block: str) -> BlockComparison:
        return next(r for r in self.rows if r.block == block)

    def to_json(self) -> dict:
        return {"spec": self.spec_title, "baseline": self.baseline_title, "rows": [r.to_json() for r in self.rows]}


def _verdict(stronger: list[str], weaker: list[str]) -> str:
    if stronger and weaker:
        return "incomparable"
    if stronger:
        return "stronger"
    if weaker:
        return "weaker"
    return "same"


# ---- descriptions --------------------------------------------------------------------------


def describe_domain(spec: ir.Spec) -> str:
    d = spec.domain
    if d is None:
        return "no domain declared"
    tables = "; ".join(f"{t.name} ({', '.join(t.column_names)})" for t in d.tables)
    stage = f"stage {d.stage}" if d.stage else "stage not declared"
    return f"{d.name}, {stage}: {tables}"


def describe_multiverse(spec: ir.Spec) -> str:
    if not spec.invariants:
        return "no invariants: one universe, the whole domain"
    return "; ".join(q.describe() for q in spec.invariants)


def describe_unit(unit: ir.Unit | None, domain: ir.Domain | None = None) -> str:
    if unit is None:
        return "no unit declared"
    text = f"{RELATION_WORDS.get(unit.relation, unit.relation)} {unit_word(domain, unit.table)} ({unit.relation})"
    if unit.bound:
        text += f", each holding at most {unit.bound.k} {unit.bound.finer}"
    return text


# ---- domain --------------------------------------------------------------------------------


def _value_set(col: ir.Column):
    ty = col.type
    if ty.kind == "enum":
        return set(ty.values)
    if ty.kind == "int":
        return range(ty.low, ty.high + 1)
    if ty.kind == "bool":
        return {"true", "false"}
    return None  # open categories: no finite set to compare


def _subset(a, b) -> bool:
    if isinstance(a, range) and isinstance(b, range):
        return a.start >= b.start and a.stop <= b.stop
    if isinstance(a, range) or isinstance(b, range):
        return False
    return a <= b


def domain_differences(spec: ir.Spec, baseline: ir.Spec) -> dict:
    """What the spec's domain drops, adds or narrows against the baseline's."""
    out = {"stage": None, "dropped": [], "added": [], "narrowed": [], "widened": [], "changed": []}
    ds, db = spec.domain, baseline.domain
    if ds is None or db is None:
        return out
    if ds.stage != db.stage:
        if ds.stage in STAGES and db.stage in STAGES:
            later = STAGES.index(ds.stage) > STAGES.index(db.stage)
            out["stage"] = "later" if later else "earlier"
        else:
            out["stage"] = "different"
    for tb in db.tables:
        ts = ds.table(tb.name)
        if ts is None:
            out["dropped"].append(f"table {tb.name}")
            continue
        for cb in tb.columns:
            cs = ts.column(cb.name)
            if cs is None:
                out["dropped"].append(f"{tb.name}.{cb.name}")
                continue
            if cs.type == cb.type and cs.nullable == cb.nullable:
                continue
            vs, vb = _value_set(cs), _value_set(cb)
            if vs is not None and vb is not None and _subset(vs, vb):
                out["narrowed"].append(f"{tb.name}.{cb.name}")
            elif vs is not None and vb is not None and _subset(vb, vs):
                out["widened"].append(f"{tb.name}.{cb.name}")
            else:
                out["changed"].append(f"{tb.name}.{cb.name}")
    for ts in ds.tables:
        tb = db.table(ts.name)
        if tb is None:
            out["added"].append(f"table {ts.name}")
            continue
        out["added"].extend(f"{ts.name}.{c.name}" for c in ts.columns if tb.column(c.name) is None)
    return out


def compare_domain(spec: ir.Spec, baseline: ir.Spec) -> BlockComparison:
    diff = domain_differences(spec, baseline)
    stronger, weaker = [], []
    if diff["stage"] == "later":
        weaker.append(f"starts later in the data life cycle ({spec.domain.stage}, not {baseline.domain.stage})")
    elif diff["stage"] == "earlier":
        stronger.append(f"starts earlier in the data life cycle ({spec.domain.stage}, not {baseline.domain.stage})")
    if diff["dropped"]:
        weaker.append("drops " + ", ".join(diff["dropped"]))
    if diff["narrowed"]:
        weaker.append("narrows the values of " + ", ".join(diff["narrowed"]))
    if diff["added"]:
        stronger.append("adds " + ", ".join(diff["added"]))
    if diff["widened"]:
        stronger.append("widens the values of " + ", ".join(diff["widened"]))
    verdict = _verdict(stronger, weaker)
    if diff["stage"] == "different" or diff["changed"]:
        verdict = "incomparable"
        if diff["stage"] == "different":
            weaker.append(f"has a stage ({spec.domain.stage}) that cannot be ordered against {baseline.domain.stage}")
        if diff["changed"]:
            weaker.append("changes the types of " + ", ".join(diff["changed"]))
    reasons = weaker + stronger
    reason = (
        ("The spec's domain " + "; ".join(reasons) + ".") if reasons else "Same tables, columns and life-cycle stage."
    )
    return BlockComparison("domain", verdict, reason, describe_domain(spec), describe_domain(baseline), diff)


# ---- multiverse ----------------------------------------------------------------------------


def compare_multiverse(spec: ir.Spec, baseline: ir.Spec) -> BlockComparison:
    domain = merged_domain(spec.domain, baseline.domain)
    order = refinement(spec.invariants, baseline.invariants, domain)
    extra = undetermined(spec.invariants, baseline.invariants, domain)
    missing = undetermined(baseline.invariants, spec.invariants, domain)
    verdict = {"same": "same", "finer": "weaker", "coarser": "stronger", "incomparable": "incomparable"}[order]
    if order == "same":
        reason = "Each set of invariants determines the other: the same universes."
    elif order == "finer":
        reason = (
            "The spec's invariants determine the baseline's and also fix "
            + "; ".join(q.describe() for q in extra)
            + ": its multiverse shatters the baseline's, so each universe is smaller and less is protected."
        )
    elif order == "coarser":
        reason = (
            "The baseline's invariants determine the spec's and also fix "
            + "; ".join(q.describe() for q in missing)
            + ": the spec's universes are unions of the baseline's, so protection extends further."
        )
    else:
        reason = (
            "Neither set of invariants determines the other: the spec fixes "
            + "; ".join(q.describe() for q in extra)
            + ", the baseline fixes "
            + "; ".join(q.describe() for q in missing)
            + "."
        )
    pub_s = {p.query.key() for p in spec.public}
    pub_b = {p.query.key() for p in baseline.public}
    if pub_s != pub_b:
        reason += " The public information each guarantee is conditioned on also differs."
    evidence = {
        "order": order,
        "spec_only": [q.describe() for q in extra],
        "baseline_only": [q.describe() for q in missing],
    }
    return BlockComparison(
        "multiverse", verdict, reason, describe_multiverse(spec), describe_multiverse(baseline), evidence
    )


# ---- unit ----------------------------------------------------------------------------------


def compare_unit(spec: ir.Spec, baseline: ir.Spec) -> BlockComparison:
    us, ub = spec.unit, baseline.unit
    domain = merged_domain(spec.domain, baseline.domain)
    evidence = {}
    if us is None or ub is None:
        verdict, reason = "incomparable", "One of the specs declares no unit."
    elif us.table == ub.table and us.relation == ub.relation:
        verdict, reason = "same", "Same unit and neighbor relation."
    elif us.table == ub.table:
        verdict = "incomparable"
        reason = (
            f"Same unit, different neighbor relations ({us.relation} against {ub.relation}): two "
            "currencies. An add/remove budget converts to change-one (pure x2, zCDP x4), not the "
            "reverse; the budget row converts before comparing."
        )
    elif ub.table in ancestors(us.table, domain):
        k = group_size(us.table, ub.table, ub, us, domain=domain)
        evidence = {"finer": us.table, "coarser": ub.table, "k": k}
        fine, coarse = unit_word(domain, us.table), unit_word(domain, ub.table)
        verdict = "weaker"
        reason = f"The spec protects one {fine}, finer than the baseline's whole {coarse}"
        reason += (
            f" (which holds at most {k} {us.table}): by group privacy its budget counts {k} times (pure) per {coarse}."
            if k
            else f"; without a bound on how many {us.table} a {coarse} holds, no group-privacy figure exists."
        )
    elif us.table in ancestors(ub.table, domain):
        k = group_size(ub.table, us.table, us, ub, domain=domain)
        evidence = {"finer": ub.table, "coarser": us.table, "k": k}
        verdict = "stronger"
        reason = (
            f"The spec protects a whole {unit_word(domain, us.table)}, coarser than the baseline's "
            f"{unit_word(domain, ub.table)}."
        )
    else:
        verdict = "incomparable"
        reason = f"The units ({us.table} and {ub.table}) are not nested in one another."
    return BlockComparison(
        "unit", verdict, reason, describe_unit(us, spec.domain), describe_unit(ub, baseline.domain), evidence
    )


# ---- premetric -----------------------------------------------------------------------------


def _sample(p: ir.Premetric):
    kind = SPEC_TO_KIND[p.kind]
    if kind == "pure":
        return PureDP(1)
    if kind == "approx":
        return ApproxDP(1, p.option("delta") or DEFAULT_DELTA)
    if kind == "zcdp":
        return ZCDP(0.5)
    if kind == "renyi":
        return RenyiDP(p.option("alpha") or 2, 1)
    return GaussianDP(1)


def implies(pa: ir.Premetric, pb: ir.Premetric) -> bool:
    """Does a guarantee in premetric pa always give one in pb (a conversion exists)?"""
    kind_b = SPEC_TO_KIND[pb.kind]
    delta = pb.option("delta")
    alpha = pb.option("alpha")
    try:
        conv = convert(_sample(pa), kind_b, delta=delta, alpha=alpha)
    except ConversionError:
        return False
    if kind_b == "approx" and delta is not None:
        return conv.result.delta <= delta  # exact
    return True


def compare_premetric(spec: ir.Spec, baseline: ir.Spec) -> BlockComparison:
    ps, pb = spec.premetric, baseline.premetric
    if ps is None or pb is None:
        return BlockComparison(
            "premetric",
            "incomparable",
            "One of the specs declares no premetric.",
            describe_premetric(ps),
            describe_premetric(pb),
        )
    stronger, weaker, unordered = [], [], []
    if (ps.kind, ps.options) != (pb.kind, pb.options):
        plain_s = describe_premetric(attrs.evolve(ps, events=None))
        plain_b = describe_premetric(attrs.evolve(pb, events=None))
        a_b, b_a = implies(ps, pb), implies(pb, ps)
        if a_b and not b_a:
            stronger.append(f"{plain_s} implies {plain_b}, not the reverse")
        elif b_a and not a_b:
            weaker.append(f"{plain_b} implies {plain_s}, not the reverse")
        elif not a_b and not b_a:
            unordered.append(f"no exact conversion exists between {plain_s} and {plain_b} in either direction")
    if ps.events != pb.events:
        if ps.events and not pb.events:
            weaker.append(f'the spec measures change only on events "{ps.events}"')
        elif pb.events and not ps.events:
            stronger.append(f'the baseline measures change only on events "{pb.events}"')
        else:
            unordered.append("the two measure change on different event spaces")
    verdict = "incomparable" if unordered else _verdict(stronger, weaker)
    reasons = weaker + stronger + unordered
    reason = ("; ".join(reasons) + ".") if reasons else "Same output premetric."
    return BlockComparison(
        "premetric", verdict, reason[0].upper() + reason[1:], describe_premetric(ps), describe_premetric(pb)
    )


# ---- budget --------------------------------------------------------------------------------


def _steps_words(steps) -> str:
    return "; ".join(f"{s.source} -> {s.result} by {s.method}" for s in steps) or "no conversion"


def compare_budget(
    spec: ir.Spec, baseline: ir.Spec, result=None, baseline_result=None, account=None, baseline_account=None
) -> BlockComparison:
    qs, qb = quote(spec, result, account), quote(baseline, baseline_result, baseline_account)
    if qs is None or qb is None:
        missing = "the spec" if qs is None else "the baseline"
        return BlockComparison(
            "budget",
            "incomparable",
            f"{missing.capitalize()} states no budget to compare.",
            qs.describe() if qs else "no budget",
            qb.describe() if qb else "no budget",
        )
    evidence = {
        "spec_quote": {"budget": qs.budget, "source": qs.source, "method": qs.method},
        "baseline_quote": {"budget": qb.budget, "source": qb.source, "method": qb.method},
    }
    try:
        vs, vb, steps_s, steps_b, currency = common_currency(qs, qb, spec, baseline)
    except ConversionError as exc:
        reason = f"No common currency: {exc}. The two figures cannot be compared."
        evidence["no_common_currency"] = str(exc)
        return BlockComparison(
            "budget", "incomparable", reason, f"{qs.describe()}; {qs.source}", f"{qb.describe()}; {qb.source}", evidence
        )
    order = budget_order(vs, vb)
    verdict = {None: "incomparable", -1: "stronger", 0: "same", 1: "weaker"}[order]
    evidence.update(
        {
            "currency": currency,
            "spec_converted": vs,
            "baseline_converted": vb,
            "spec_steps": [{"what": s.what, "method": s.method, "citation": s.citation} for s in steps_s],
            "baseline_steps": [{"what": s.what, "method": s.method, "citation": s.citation} for s in steps_b],
        }
    )
    reason = f"In one currency ({currency}): spec {vs}, baseline {vb}."
    if steps_s:
        reason += f" Spec converted: {_steps_words(steps_s)}."
    if steps_b:
        reason += f" Baseline converted: {_steps_words(steps_b)}."
    if order is None:
        reason += " Neither figure is smaller in every parameter."
    stated = [name for name, q in (("the spec's", qs), ("the baseline's", qb)) if not q.computed]
    if stated:
        what = "figures are stated bounds" if len(stated) == 2 else "figure is a stated bound"
        reason += (
            f" {' and '.join(stated).capitalize()} {what}, not a computed budget"
            " (no budget account: the spec did not check or its data was not read)."
        )
    methods = {q.method for q in (qs, qb) if q.method}
    if len(methods) > 1:
        reason += f" The stated figures were computed by different conversions ({', '.join(sorted(methods))})."
    return BlockComparison(
        "budget", verdict, reason, f"{qs.describe()}; {qs.source}", f"{qb.describe()}; {qb.source}", evidence
    )


def compare(
    spec: ir.Spec, baseline: ir.Spec, result=None, baseline_result=None, *, account=None, baseline_account=None
) -> Comparison:
    """Compare a spec with a baseline block by block (results or accounts supply achieved budgets)."""
    fs, fb = flavor_spec(spec), flavor_spec(baseline)
    rows = (
        compare_domain(fs, fb),
        compare_multiverse(fs, fb),
        compare_unit(fs, fb),
        compare_premetric(fs, fb),
        compare_budget(spec, baseline, result, baseline_result, account, baseline_account),
    )
    return Comparison(spec.title, baseline.title, rows)
