"""`dpspec budget`: the achieved budget of a spec (or the composed total of a program).

Public facts such as swapping's largest stratum are computed from the data only when the
mechanism's budget depends on them (they are functions of the invariants, so printing them
discloses nothing the release does not). One spec's account is `spec_account.spec_ledger`;
this module imports it and prints programs (`program`), one way.
"""

from __future__ import annotations

import math

from dpspec import ir
from dpspec.budget import ledger as ledger_mod, ZCDP
from dpspec.budget.budget_text import budget_figure, budget_line
from dpspec.budget.premetrics import exact_text, json_number, needs_exact
from dpspec.budget.program import program_summary, program_text
from dpspec.budget.spec_account import spec_ledger
from dpspec.budget.semantics import no_semantics, semantics_json, semantics_text, stated_semantics
from dpspec.contract.results import budget_breakdown_result
from dpspec.errors import ConversionError, SpecError
from dpspec.language.describe import notation


def _budget_json(b):
    return b.to_json() if b is not None else None


def _conversion_json(c) -> dict:
    out = c.result.to_json()
    out["method"] = c.method
    out["citation"] = c.citation
    return out


def _components(spec: ir.Spec, flavor, statement) -> list[dict]:
    """The statement's parts (e.g. each geography level and stage), each also in the spec's flavor."""

    out = []
    for c in getattr(statement, "components", ()):
        item = {k: (json_number(v) if k == "rho" else v) for k, v in c.items()}
        if "rho" in c:
            try:
                value, _ = ledger_mod.to_spec_flavor(spec, flavor, ZCDP(c["rho"]))
                item["in_spec_flavor"] = _budget_json(value)
            except ConversionError:  # a part without a conversion is shown natively only
                item["in_spec_flavor"] = None
        out.append(item)
    return out


def _nan(x) -> bool:
    return isinstance(x, float) and math.isnan(x)


def _achieved_exact(x) -> dict:
    """Additive: the achieved figure's exact text where its JSON number does not state it."""
    return {} if _nan(x) or not needs_exact(x) else {"achieved_exact": exact_text(x)}


def budget_summary(
    spec: ir.Spec, delta: float | None = None, method: str = "cks20", per_attribute: bool = False
) -> dict:
    """`per_attribute` makes the per-attribute and per-geography budgets required: a mechanism
    without attribute structure is then a SpecError naming it (they are shown whenever the
    mechanism has them)."""
    if spec.program is not None:
        if per_attribute:
            raise SpecError(
                "per-attribute budgets are stated for one spec, not a program: ask for them on a member spec",
                spec.path,
                spec.text,
            )
        return program_summary(spec, delta=delta, method=method)
    checked, facts, statement, flavor, ledger = spec_ledger(spec)
    delta = delta if delta is not None else (spec.premetric.option("delta") or ledger_mod.DEFAULT_DELTA)
    semantics = stated_semantics(spec, checked)
    breakdown = budget_breakdown_result(checked.mechanism.budget_breakdown(spec, checked.params), checked.mechanism)
    if semantics is None and per_attribute:
        raise no_semantics(spec, checked.mechanism.name)
    currencies = ledger_mod.other_currencies(ledger.declared, delta)
    headline = budget_line(_budget_json(ledger.declared), named=False) if ledger.declared is not None else "undefined"
    return {
        "spec": spec.title,
        "notation": notation(spec, headline),
        "flavor": {
            "domain": spec.domain.name,
            "stage": spec.domain.stage,
            "invariants": [q.describe() for q in spec.invariants],
            "unit": spec.unit.table,
            "relation": spec.unit.relation,
            "premetric": spec.premetric.kind,
            "premetric_options": {k: float(v) for k, v in spec.premetric.options},
        },
        "mechanism": {"name": checked.mechanism.name, "version": checked.mechanism.version},
        "native": {
            "flavor": {"unit": flavor.table, "relation": flavor.relation, "premetric": flavor.premetric},
            "budget": _budget_json(statement.actual),
            "worst_case": _budget_json(statement.worst),
            "per_universe": bool(statement.per_universe),
            "depends_on": {k: (json_number(v) if isinstance(v, float) else v) for k, v in statement.depends_on.items()},
            "notes": list(statement.notes),
            "components": _components(spec, flavor, statement),
            "conditioned_on": [p.to_json() for p in statement.public],
        },
        "steps": [
            {"what": s.what, "from": str(s.source), "to": str(s.result), "method": s.method, "citation": s.citation}
            for s in ledger.steps
        ],
        "budget": _budget_json(ledger.declared),
        "worst_case": _budget_json(ledger.worst),
        "problem": ledger.problem,
        "conversions": [_conversion_json(c) for c in currencies],
        "headline_conversion": method,
        "public_information": [{"statistic": p.query.describe(), "released": p.source} for p in spec.public],
        "bounds": [
            {
                "bound": b.bound.describe(),
                "achieved": json_number(b.achieved) if not _nan(b.achieved) else None,
                "holds": b.holds,
                "currency": b.currency,
                **_achieved_exact(b.achieved),
            }
            for b in ledger.bounds
        ],
        "bounds_hold": ledger.bounds_hold and ledger.problem is None,
        # the mechanism's own breakdown of the budget (TopDown: "allocation" per level and query)
        **breakdown.figures,
        # per attribute and per geography, as the 2020 certificates print them (additive key)
        **({"semantics": semantics_json(spec, flavor, semantics, delta)} if semantics is not None else {}),
    }


def budget_text(summary: dict) -> str:
    if "program" in summary:
        return program_text(summary)
    lines = [summary["spec"] or "(untitled spec)", "  " + summary["notation"], ""]
    native = summary["native"]
    nf = native["flavor"]
    lines.append(
        f"mechanism {summary['mechanism']['name']} proves, for its native flavor ({nf['relation']} on {nf['unit']}, {nf['premetric']}):"
    )
    lines.append(
        f"  {budget_line(native['budget'])}"
        + ("   (per universe: the value for the actual universe)" if native["per_universe"] else "")
    )
    if native["per_universe"]:
        if native["worst_case"]:
            lines.append(f"  worst case over the admitted universes: {budget_line(native['worst_case'])}")
        else:
            lines.append("  no finite worst case over the admitted universes")
    for k, v in native["depends_on"].items():
        lines.append(f"  depends on {k} = {v}")
    for note in native["notes"]:
        lines.append(f"  note: {note}")
    for p in native.get("conditioned_on", []):
        lines.append(f"  conditioned on: {p['description']}" + (f" ({p['source']})" if p.get("source") else ""))
    if native.get("components"):
        lines.append("  its parts (native, then in the spec's flavor):")
        for c in native["components"]:
            label = " ".join(f"{k}={v}" for k, v in c.items() if k not in ("rho", "rho_exact", "in_spec_flavor"))
            spec_part = f" -> {budget_line(c['in_spec_flavor'], named=False)}" if c.get("in_spec_flavor") else ""
            lines.append(f"    {label}: rho = {c.get('rho_exact', c.get('rho'))}{spec_part}")
    if summary["steps"]:
        lines.append("converted to the spec's flavor:")
        for s in summary["steps"]:
            lines.append(f"  {s['what']}: {s['from']} -> {s['to']}  [{s['method']}]")
    if summary["problem"]:
        lines.append(f"cannot express the budget in the spec's flavor: {summary['problem']}")
    else:
        lines.append(f"budget in the spec's flavor: {budget_line(summary['budget'])}")
    if summary.get("semantics"):
        lines.extend(semantics_text(summary["semantics"]))
    if summary["conversions"]:
        lines.append("in other currencies:")
        for c in summary["conversions"]:
            figures = ", ".join(
                f"{k} = {budget_figure(v)}"
                for k, v in c.items()
                if k not in ("premetric", "method", "citation") and not k.endswith("_exact")
            )
            lines.append(f"  {c['premetric']}: {figures}   [{c['method']}]")
    for p in summary["public_information"]:
        lines.append(f"conditioned on public information: {p['statistic']} (released: {p['released']})")
    for b in summary["bounds"]:
        state = "holds" if b["holds"] else "EXCEEDED"
        achieved = budget_figure(b["achieved"]) if b["achieved"] is not None else "?"
        lines.append(f"declared {b['bound']}: {state} (achieved {achieved}; {b['currency']})")
    return "\n".join(lines)


class BudgetSummary(dict):
    """`budget_summary` as returned by `dpspec.budget`: the same dict, which also keeps its spec
    (a notebook shows the spec's report, budget section included: dpspec.notebook)."""

    def __init__(self, summary: dict, spec: ir.Spec):
        super().__init__(summary)
        self.spec = spec
