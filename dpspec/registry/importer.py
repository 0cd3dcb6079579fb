"""`dpspec import --registry`: a registry entry becomes a spec without data.

What the entry states formally becomes a formal block: the variant and the privacy parameters
become the premetric, a `declared` mechanism (the curator's budget, taken as stated) and a
budget bound; the privacy unit and its neighbour relation become the unit; the unprotected
quantities become invariants. Formal blocks that dpspec itself exported (fenced dpspec
notation) are read exactly; prose is read by the recognisers in `prose`, and what they do not
recognise is listed in the note `dpspec.unchecked`, which the audit reports. All prose is kept
as notes keyed by the entry's field paths, so nothing the curator wrote is lost.
"""

from __future__ import annotations

import os
import re
from fractions import Fraction

from dpspec import ir
from dpspec.audit.registry_rules import STATED_MECHANISM, UNCHECKED_NOTE
from dpspec.errors import SpecError
from dpspec.registry import prose
from dpspec.registry.entry import Entry, errors, validate
from dpspec.language.parser import parse
from dpspec.budget import ZCDP
from dpspec.budget.conversions import convert
from dpspec.check.checker import check
from dpspec.language.formatter import format_spec

D = "deployment"
REQUIRED = (
    (D, "dp_variant"),
    (D, "dp_variant", "variant_name"),
    (D, "privacy_loss"),
    (D, "privacy_loss", "privacy_unit"),
    (D, "privacy_loss", "privacy_parameters"),
)
FORMAL_FIELDS = {  # the fields whose fenced dpspec block holds a formal part of the spec
    "domain": (D, "dp_variant", "data_domain"),
    "where": (D, "dp_variant", "unprotected_quantities"),
    "unit": (D, "privacy_loss", "privacy_unit_details"),
    "budget": (D, "privacy_loss", "privacy_parameters_details"),
}
PARAMS = (D, "privacy_loss", "privacy_parameters")
NOT_NOTES = {("deployment", "basic", "name")}  # the title


class _Problems:
    def __init__(self, entry: Entry):
        self.entry, self.items = entry, []

    def add(self, field, message, hint=None):
        self.items.append((tuple(field), message, hint))

    def raise_any(self):
        if self.items:
            raise errors(self.entry, self.items)


def _number(value, field, problems: _Problems) -> Fraction | None:
    """An exact number from a YAML number or a string such as '1e-10', '1/100' or '10^-10'."""
    if isinstance(value, bool):
        problems.add(field, f"expected a number, got {value!r}")
        return None
    try:
        if isinstance(value, (int, float)):
            out = getattr(value, "exact", None)  # a YAML float keeps its decimal (dpspec.registry.entry)
            if out is None:
                out = Fraction(repr(value)) if isinstance(value, float) else Fraction(value)
        else:
            text = str(value).strip()
            m = re.fullmatch(r"10\s*\^\s*\{?\s*-\s*(\d+)\s*\}?", text)
            out = Fraction(1, 10 ** int(m.group(1))) if m else Fraction(text)
    except (ValueError, ZeroDivisionError, OverflowError):
        problems.add(
            field, f"cannot read {value!r} as a number", "write a decimal such as 1e-10, or a fraction such as 1/100"
        )
        return None
    if out < 0:
        problems.add(field, f"{value!r} is negative; privacy parameters are at least 0")
        return None
    return out


def _fragment(entry: Entry, field, code: str) -> ir.Spec:
    """Parse a fenced dpspec block; its errors point at the entry field that holds it."""

    try:
        return parse(code, None)
    except SpecError as exc:
        first = exc.diagnostics[0].message if exc.diagnostics else "syntax error"
        raise entry.error(field, f"its dpspec block does not parse: {first}") from None


def _stated(entry: Entry, problems: _Problems, formal: ir.Spec | None, unchecked: list[str]):
    """(premetric, declared-mechanism budget parameters, budget bounds)."""
    variant = entry.get(D, "dp_variant", "variant_name")
    raw = entry.get(*PARAMS) or {}
    values = {k: _number(v, PARAMS + (k,), problems) for k, v in raw.items()}
    if problems.items:
        return None, {}, ()
    if formal is not None and formal.premetric is not None:
        stated = {k: v for k, v in values.items() if v is not None}
        if formal.premetric.kind == "renyi" and formal.premetric.option("alpha") is not None:
            stated["alpha"] = formal.premetric.option("alpha")
        return formal.premetric, stated, formal.budgets
    kind = prose.PREMETRIC_OF_VARIANT.get(variant)
    field = (D, "dp_variant", "variant_name")
    if kind is None:
        problems.add(
            field,
            f"the variant '{variant}' names no premetric dpspec can formalise",
            "state it in privacy_parameters_details as a dpspec block, e.g. ```dpspec premetric gdp```",
        )
        return None, {}, ()
    eps, delta, rho = values.get("epsilon"), values.get("delta"), values.get("rho")
    need = {"pure": ("epsilon",), "approximate": ("epsilon", "delta"), "zcdp": ("rho",)}.get(kind)
    if kind == "renyi":
        problems.add(
            field,
            "a Renyi DP budget needs its order alpha, and the registry schema has no field for it",
            "state it in privacy_parameters_details as a dpspec block: premetric renyi alpha 2",
        )
        return None, {}, ()
    missing = [k for k in need if values.get(k) is None]
    if missing:
        have = ", ".join(sorted(k for k, v in values.items() if v is not None)) or "no parameters"
        problems.add(PARAMS, f"the variant is {variant}, which needs {' and '.join(need)}; the entry gives {have}")
        return None, {}, ()
    if kind == "pure" and (rho is not None or (delta or 0) > 0):
        problems.add(
            PARAMS,
            f"the variant is Pure DP but the entry also gives {'rho' if rho is not None else 'a delta above 0'}",
            "use variant_name 'Approximate DP' for (epsilon, delta)",
        )
        return None, {}, ()
    if kind == "approximate" and rho is not None:
        problems.add(PARAMS + ("rho",), "the variant is Approximate DP; rho belongs to Zero-concentrated DP")
        return None, {}, ()
    if kind == "pure":
        return ir.Premetric("pure"), {"epsilon": eps}, (ir.BudgetBound("epsilon", "<=", eps),)
    if kind == "approximate":
        return (
            ir.Premetric("approximate", (("delta", delta),)),
            {"epsilon": eps, "delta": delta},
            (ir.BudgetBound("epsilon", "<=", eps, (("delta", delta),)),),
        )
    bounds = [ir.BudgetBound("rho", "<=", rho)]
    if eps is not None and delta is not None:
        implied = _implied_epsilon(rho, delta)
        if eps >= implied:  # exact; a published conversion that rho implies: the budget command checks it
            bounds.append(ir.BudgetBound("epsilon", "<=", eps, (("delta", delta),)))
        else:
            unchecked.append(
                f"the entry's (epsilon = {ir.format_number(eps)}, delta = {ir.format_number(delta)}) is not "
                f"implied by rho = {ir.format_number(rho)} alone (the conversion of Canonne, Kamath & Steinke 2020 gives "
                f"epsilon = {float(implied):.4g}); it may rest on an analysis of the mechanism the entry does not state"
            )
    return ir.Premetric("zcdp"), {"rho": rho}, tuple(bounds)


def _implied_epsilon(rho: Fraction, delta: Fraction):
    """The epsilon at delta that rho-zCDP implies for every mechanism (Canonne, Kamath & Steinke
    2020), a certified upper bound (exact Fraction)."""

    return convert(ZCDP(rho), "approx", delta=delta, method="cks20").result.epsilon


def _unit(entry: Entry, problems: _Problems, formal: ir.Spec | None, unchecked: list[str]):
    """(unit, names of the unit tables)."""
    text = entry.get(D, "privacy_loss", "privacy_unit") or ""
    if formal is not None and formal.unit is not None:
        return formal.unit, [formal.unit.table]
    names = prose.unit_names(text)
    if not names:
        problems.add(
            (D, "privacy_loss", "privacy_unit"),
            f"cannot tell the unit from {text!r}",
            "name it as 'person-level', 'user-day-level', ...",
        )
        return None, []
    details = prose.split_formal(entry.get(D, "privacy_loss", "privacy_unit_details"))[0]
    relation = prose.relation_from_prose(details) or prose.relation_from_prose(text)
    if relation is None:
        relation = "symdiff"
        unchecked.append(
            "the neighbour relation is not stated (or stated both ways); read as add/remove one "
            f"{names[0]} (symdiff), under which a change-one figure is larger"
        )
    if len(names) > 1:
        unchecked.append(
            f"the entry names several units ({', '.join(names)}) under one budget; the spec "
            f"formalises the first, {names[0]}"
        )
    return ir.Unit(prose.table_for(names[0]), relation), [prose.table_for(n) for n in names]


def _where(entry: Entry, formal: ir.Spec | None, unchecked: list[str]):
    if formal is not None:
        return formal.invariants, formal.public, formal.public_keys
    text = prose.split_formal(entry.get(*FORMAL_FIELDS["where"]))[0]
    found, unknown = prose.invariants_from_prose(text)
    for item in unknown:
        unchecked.append(f"unprotected quantity not formalised: {item}")
    queries = []
    for table, by in found:
        q = ir.CountQuery(table, by)
        if q not in queries:
            queries.append(q)
    return tuple(queries), (), ()


def _domain(entry: Entry, formal: ir.Spec | None, unit_tables, invariants, public) -> ir.Domain:
    if formal is not None and formal.domain is not None:
        return formal.domain
    text = prose.split_formal(entry.get(*FORMAL_FIELDS["domain"]))[0]
    columns: dict[str, list[str]] = {t: [] for t in unit_tables}
    for q in list(invariants) + [p.query for p in public]:
        cols = columns.setdefault(q.table, [])
        cols.extend(c for c in q.columns if c not in cols)
    tables = tuple(
        ir.Table(t, prose.unit_of_table(t), tuple(ir.Column(c, ir.ColumnType("category")) for c in cols))
        for t, cols in columns.items()
    )
    levels = prose.geography_levels(c for cols in columns.values() for c in cols)
    geography = ir.Geography("census", levels) if levels else None
    # The prose stays in the note dp_variant.data_domain; the domain block holds the formal part.
    return ir.Domain("deployment", None, prose.stage_from_prose(text), tables, geography)


def _notes(entry: Entry) -> list[ir.Note]:
    """Every text field of the entry, its formal block removed, keyed by its path."""
    notes = []

    def walk(node, path):
        if isinstance(node, dict):
            for k, v in node.items():
                walk(v, path + (k,))
            return
        if path in NOT_NOTES or path[:3] == PARAMS:
            return
        if isinstance(node, list):
            text = "\n".join(str(v) for v in node)
        elif isinstance(node, str):
            text = prose.split_formal(node)[0]
        elif isinstance(node, (int, float)) and not isinstance(node, bool):
            text = str(node)
        else:
            return
        text = "\n".join(line.rstrip() for line in text.replace("\r", "").strip("\n").split("\n"))
        if text.strip():
            key = ".".join(str(p) for p in (path[1:] if path[0] == D else path))
            notes.append(ir.Note(key, text))

    walk(entry.data, ())
    return notes


def build_spec(entry: Entry) -> ir.Spec:
    """The spec an entry states; raises a located SpecError naming every field it cannot use."""
    validate(entry)
    problems = _Problems(entry)
    for field in REQUIRED:
        if entry.get(*field) is None:
            problems.add(field, "missing: an entry needs this to become a spec (the registry's tier 2 fields)")
    problems.raise_any()
    formal = {}
    for part, field in FORMAL_FIELDS.items():
        code = prose.split_formal(entry.get(*field))[1]
        formal[part] = _fragment(entry, field, code) if code else None
    carried = formal["budget"].note(UNCHECKED_NOTE) if formal["budget"] is not None else None
    unchecked = [line.lstrip("- ") for line in (carried or "").split("\n") if line.strip()]
    premetric, stated, bounds = _stated(entry, problems, formal["budget"], unchecked)
    unit, unit_tables = _unit(entry, problems, formal["unit"], unchecked)
    problems.raise_any()
    invariants, public, public_keys = _where(entry, formal["where"], unchecked)
    domain = _domain(entry, formal["domain"], unit_tables, invariants, public)
    slug = entry.get("url_slug")
    params = [ir.Param("table", ir.Name(unit.table)), ir.Param("relation", ir.Name(unit.relation))]
    params += [ir.Param(k, v) for k, v in stated.items()]
    params.append(ir.Param("source", f"OpenDP Deployments Registry entry {slug}"))
    notes = _notes(entry)
    if unchecked:
        notes.append(ir.Note(UNCHECKED_NOTE, "\n".join(f"- {u}" for u in unchecked)))
    name = os.path.basename(entry.path) if entry.path else "a registry entry"
    header = (
        "# Imported by `dpspec import --registry` from " + name + ".",
        "# The budget is the curator's published statement (mechanism declared), not derived by dpspec;",
        "# the entry's prose is kept in the notes section.",
    )
    return ir.Spec(
        title=entry.get(D, "basic", "name"),
        domain=domain,
        invariants=invariants,
        public=public,
        public_keys=public_keys,
        unit=unit,
        premetric=premetric,
        mechanism=ir.MechanismCall(STATED_MECHANISM, ir.ParamBlock(tuple(params))),
        budgets=tuple(bounds),
        notes=tuple(notes),
        comments=(("title", header),),
    )


def import_text(entry: Entry) -> str:
    """The canonical .dps text of an entry, checked: what `dpspec import` writes."""

    text = format_spec(build_spec(entry))
    try:
        check(parse(text, None))
    except SpecError as exc:  # formal blocks that contradict each other (an invariant on an unknown column)
        first = exc.diagnostics[0].message if exc.diagnostics else "it does not check"
        raise entry.error((D,), f"the spec this entry states does not check: {first}") from None
    return text
