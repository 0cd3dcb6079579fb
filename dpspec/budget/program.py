"""Programs: several releases of the same confidential data, composed into one ledger.

A program file lists spec files (`include "a.dps"`); specs inside `parallel { ... }` ran on
disjoint parts of the data (the states, say) and compose in parallel. Each spec's budget is
first put in its own declared flavor; composition needs them all to protect the same unit
under the same relation, and says so when they do not.
"""

from __future__ import annotations

import math
import os

import attrs

from dpspec import ir
from dpspec.budget import compose, budget_from_params, convert
from dpspec.budget.budget_text import budget_line
from dpspec.budget.spec_account import spec_ledger
from dpspec.budget.composition import LedgerRelease
from dpspec.budget.statement import BudgetStatement, PublicCondition
from dpspec.errors import Diagnostic, SpecError, DpspecError
from dpspec.budget.ledger import DEFAULT_DELTA, _holds, SPEC_TO_KIND
from dpspec.budget.premetrics import exact_text, json_number, needs_exact
from dpspec.language.parser import parse, read_source
from dpspec.contract.mechanism import change_one_result
from dpspec.budget.program_unit import UnitStep, check_domains, to_program_unit, describe_unit
from dpspec.language.pufferfish import CONDITIONAL_INDEPENDENCE

KIND_OF_BOUND = {"epsilon": "approx", "rho": "zcdp", "mu": "gdp"}


@attrs.frozen
class Member:
    path: str
    spec: ir.Spec
    statement: BudgetStatement
    group: str | None
    own_budget: object = None  # in the member's own flavor, before the program's unit (if any)
    unit_steps: tuple = ()  # program_unit.UnitStep, member flavor -> the program's unit
    # the mechanism's own change-one budget (tighter than the ledger's group privacy), if it has
    # one and the member's flavor came from add/remove by that step alone: (actual, worst, reason)
    change_one: tuple | None = None
    group_privacy: object = None  # with change_one: the figure for the program's unit by group privacy instead


def load_program(program_spec: ir.Spec) -> list[Member]:
    """Parse and account every spec a program includes (without running mechanisms)."""
    base = program_spec.base_dir
    members: list[Member] = []
    for i, part in enumerate(program_spec.program.parts):
        group = (part.label or f"parallel-{i + 1}") if part.parallel else None
        for rel in part.paths:
            path = rel if os.path.isabs(rel) else os.path.join(base, rel)
            spec = parse(read_source(path), path)
            if spec.program is not None:
                raise SpecError(
                    [Diagnostic(f"'{rel}' is itself a program; programs include specs only")],
                    program_spec.path,
                    program_spec.text,
                )
            checked, facts, statement, flavor, ledger = spec_ledger(
                spec, currencies=False
            )  # declared and worst only: no scipy
            if ledger.declared is None:
                raise SpecError(
                    [Diagnostic(f"'{rel}': its budget cannot be expressed in its own flavor: {ledger.problem}")],
                    program_spec.path,
                    program_spec.text,
                )
            members.append(
                Member(
                    rel,
                    spec,
                    BudgetStatement(
                        ledger.declared, ledger.worst, statement.per_universe, statement.depends_on, statement.notes
                    ),
                    group,
                    change_one=(
                        _change_one(checked, flavor, statement, ledger, program_spec.unit)
                        if program_spec.unit
                        else None
                    ),
                )
            )
    if program_spec.unit is not None:
        return _in_program_unit(program_spec, members)
    _check_same_currency(program_spec, members)
    return members


def _domain_names(program_spec, members) -> set[str]:
    """The members' domains, with those the program's own domain names (`same as`) as one."""
    d = program_spec.domain
    named = {d.name, *d.same_as} if d is not None else set()
    return {d.name if m.spec.domain.name in named else m.spec.domain.name for m in members}


def _change_one(checked, flavor, statement, ledger, unit):
    """The mechanism's own change-one figure, when the member's ledger reached change-one from
    add/remove by group privacy alone (a single relation step, same table and premetric), or when
    the member protects add/remove itself and the program's unit is a change (the program's
    conversion would take that step)."""
    steps = ledger.steps
    if flavor.relation != "symdiff":
        return None
    if steps and (len(steps) != 1 or steps[0].what != "relation"):
        return None
    if not steps and (checked.spec.unit.relation != "symdiff" or unit.relation != "hamming"):
        return None

    mech = checked.mechanism
    hook = getattr(mech, "change_one", None)
    tight = change_one_result(hook(checked.spec, checked.params, statement.actual), mech) if hook else None
    if tight is None or tight.budget.kind != ledger.declared.kind:
        return None
    worst = (
        change_one_result(hook(checked.spec, checked.params, statement.worst), mech)
        if statement.worst is not None
        else None
    )
    return tight.budget, (worst.budget if worst else None), tight.reason


def _in_program_unit(program_spec, members):
    """Every member restated for the program's composed unit (dpspec.budget.program_unit)."""

    if not members:
        return members
    domain = check_domains(program_spec, members)
    out = []
    for m in members:
        start, start_worst, first, generic = m.statement.actual, m.statement.worst, [], None
        as_changed = m
        if m.change_one is not None:
            start, start_worst, reason = m.change_one
            own = m.spec.unit.relation == "symdiff"  # the member protects add/remove; the program's step is done here
            first = [
                UnitStep(
                    "relation",
                    m.statement.actual,
                    start,
                    f"{reason}; in place of "
                    + (
                        "group privacy's two add/remove steps (rho x 4)"
                        if own
                        else "the member's own group-privacy figure"
                    ),
                )
            ]
            generic, _ = to_program_unit(program_spec, domain, m, m.statement.actual)
            if own:
                as_changed = attrs.evolve(
                    m, spec=attrs.evolve(m.spec, unit=attrs.evolve(m.spec.unit, relation="hamming"))
                )
        actual, steps = to_program_unit(program_spec, domain, as_changed, start)
        worst, _ = to_program_unit(program_spec, domain, as_changed, start_worst)
        steps = first + steps
        statement = attrs.evolve(m.statement, actual=actual, worst=worst)
        out.append(
            attrs.evolve(
                m, statement=statement, own_budget=m.statement.actual, unit_steps=tuple(steps), group_privacy=generic
            )
        )
    return out  # one unit and relation now; compose() puts differing premetrics in one


def _check_same_currency(program_spec, members):
    flavors = {(m.spec.unit.table, m.spec.unit.relation) for m in members}
    domains = _domain_names(program_spec, members)
    problems = []
    if len(domains) > 1:
        which = "; ".join(f"'{m.path}' protects '{m.spec.domain.name}'" for m in members)
        problems.append(
            Diagnostic(
                f"the included specs protect different domains ({', '.join(sorted(domains))}): "
                f"{which}; composition is about releases of the same data"
            )
        )
    if len(flavors) > 1 and not _joint_tables(members):
        listed = "; ".join(f"{t} under {r}" for t, r in sorted(flavors))
        problems.append(
            Diagnostic(
                f"the included specs use different units or neighbor relations ({listed}); convert them to one unit before composing"
            )
        )
    if problems:
        raise SpecError(problems, program_spec.path, program_spec.text)


# --- releases of different tables of one domain (P.L. 94-171: persons and housing units) -----


def _joint_tables(members) -> str | None:
    """The note that makes releases of different tables compose, or None if they cannot.

    Each release reads one table of the same domain under the same relation, in sequence (no
    parallel part). Neighbours that differ in one record of every table (one person and one
    housing unit, changed together) differ in one record of each release's table, so each
    release keeps its own guarantee and sequential composition sums them: the relation under
    which the Census Bureau publishes one figure for the P.L. 94-171 file."""
    relations = {m.spec.unit.relation for m in members}
    tables = sorted({m.spec.unit.table for m in members})
    if len(relations) != 1 or any(m.group for m in members):
        return None
    return (
        f"the releases protect different tables ({', '.join(tables)}) of one domain: the total holds "
        f"for neighbours differing in one record of each ({next(iter(relations))} on every table), "
        "each release keeping its own guarantee"
    )


def program_ledger(program_spec: ir.Spec, delta: float | None = None, method: str = "cks20"):
    members = load_program(program_spec)
    releases = []
    for m in members:
        universe = os.path.splitext(os.path.basename(m.path))[0] if m.group else None
        releases.append(LedgerRelease(m.spec.title or m.path, m.statement, universe=universe, parallel_group=m.group))
    public = [PublicCondition(p.query.describe(), p.source) for m in members for p in m.spec.public]
    kinds = {m.spec.premetric.kind for m in members}
    to = None
    if any(b.quantity == "epsilon" and b.with_ for b in program_spec.budgets) or kinds == {"approximate"}:
        to = "approx"
    elif program_spec.premetric is not None and program_spec.unit is not None:
        # the composed guarantee's own premetric block: compose in it (each member converted, a ledger line)

        to = SPEC_TO_KIND[program_spec.premetric.kind]
    alpha = program_spec.premetric.option("alpha") if program_spec.premetric is not None else None
    ledger = compose(releases, to=to, delta=delta or DEFAULT_DELTA, method=method, public=public, alpha=alpha)
    if program_spec.unit is not None and members:
        ledger = attrs.evolve(
            ledger,
            notes=(
                *ledger.notes,
                "the total protects the program's composed unit: "
                + describe_unit(program_spec.unit, program_domain(program_spec, members)),
            ),
        )
        if ledger.total.kind == "zcdp" and ledger.total.is_finite:
            ledger = attrs.evolve(ledger, notes=(*ledger.notes, _epsilon_note(ledger, delta or DEFAULT_DELTA)))
    elif len({m.spec.unit.table for m in members}) > 1:
        ledger = attrs.evolve(ledger, notes=(*ledger.notes, _joint_tables(members)))
    note = _change_one_note(members, ledger)
    if note:
        ledger = attrs.evolve(ledger, notes=(*ledger.notes, note))
    note = _pufferfish_note(members)
    if note:
        ledger = attrs.evolve(ledger, notes=(*ledger.notes, note))
    return members, ledger


def _epsilon_note(ledger, delta: float) -> str:
    """The composed rho in (epsilon, delta): by Canonne, Kamath & Steinke (the 2020 production
    certificates' conversion) and by Bun & Steinke (the looser one the first seed paper uses)."""
    cks = ledger.total_in("approx", delta=delta, method="cks20").result.epsilon
    bs = ledger.total_in("approx", delta=delta, method="bs16").result.epsilon
    return (
        f"the total in (epsilon, delta) at delta = {float(delta):g}: epsilon = {float(cks):.4f} by cks20 (Canonne, Kamath & "
        f"Steinke 2020, the production certificates' conversion), {float(bs):.4f} by bs16 (Bun & Steinke 2016)"
    )


def _change_one_note(members, ledger) -> str | None:
    """Which members count a change of one record by their mechanism's own sensitivity, and what
    the total would be by group privacy for them (the rule a published figure may have used)."""
    tight = [m for m in members if m.group_privacy is not None]
    if (
        not tight
        or ledger.total.kind != "zcdp"
        or any(m.group for m in members)
        or any(b.kind != "zcdp" for m in tight for b in (m.statement.actual, m.group_privacy))
    ):
        return None
    extra = sum(m.group_privacy.rho - m.statement.actual.rho for m in tight)
    parts = ", ".join(
        f"'{m.path}' rho = {float(m.statement.actual.rho):.6g} (group privacy: {float(m.group_privacy.rho):.6g})"
        for m in tight
    )
    return (
        f"change one record: {parts} use their mechanism's own change-one bound; by group privacy "
        f"(two add/remove steps) for them too the total would be rho = {float(ledger.total.rho + extra):.6g}"
    )


def _pufferfish_note(members) -> str | None:
    """Z-Pufferfish releases compose like DP ones only under assumptions DP does not need (seed 2):
    sequential (Lemma 6) when their randomness is conditionally independent given the data and Z,
    parallel (Lemma 7) over a disjoint partition, and only for one class of distributions."""

    puffer = [m for m in members if m.spec.pufferfish is not None]
    if not puffer:
        return None
    classes = sorted({m.spec.pufferfish.kind for m in puffer})
    parts = [
        f"{len(puffer)} of the releases are epsilon-Z-Pufferfish guarantees (class {', '.join(classes)}); "
        + CONDITIONAL_INDEPENDENCE
    ]
    if any(m.group for m in puffer):
        parts.append("the parallel parts compose by Lemma 7 because they read disjoint parts of the data")
    if len(classes) > 1 or len(puffer) < len(members):
        parts.append("the total holds only for distributions in every release's class (DP releases: any distribution)")
    return "; ".join(parts)


def program_summary(program_spec: ir.Spec, delta: float | None = None, method: str = "cks20") -> dict:
    members, ledger = program_ledger(program_spec, delta, method)
    bounds = []
    for b in program_spec.budgets:
        total = ledger.total
        figure = total.params().get(b.quantity)
        words = f"composed total ({ledger.method})"
        if figure is None and b.quantity in KIND_OF_BOUND:
            kwargs = {"delta": dict(b.with_).get("delta", delta or DEFAULT_DELTA)} if b.quantity == "epsilon" else {}
            conv = (
                ledger.total_in(KIND_OF_BOUND[b.quantity], method=b.method or method, **kwargs)
                if b.quantity == "epsilon"
                else ledger.total_in(KIND_OF_BOUND[b.quantity])
            )
            figure = conv.result.params()[b.quantity]
            words += f", converted by {conv.method}"
        holds = figure is not None and _holds(b.op, figure, b.value)
        bounds.append(
            {
                "bound": b.describe(),
                "achieved": None if figure is None else json_number(figure),
                "holds": holds,
                "currency": words,
                **({"achieved_exact": exact_text(figure)} if figure is not None and needs_exact(figure) else {}),
            }
        )
    return {
        "program": program_spec.program.title,
        "releases": [
            {
                "spec": m.path,
                "title": m.spec.title,
                "parallel_group": m.group,
                "budget": m.statement.actual.to_json(),
                # additive: the member's own unit and budget, and each step to the program's unit
                "unit": {"table": m.spec.unit.table, "relation": m.spec.unit.relation},
                "own_budget": (m.own_budget or m.statement.actual).to_json(),
                "unit_steps": [s.to_json() for s in m.unit_steps],
                "invariants": [q.describe() for q in m.spec.invariants],
            }
            for m in members
        ],
        "unit": _unit_json(program_spec, members),
        "ledger": ledger.to_json(),
        "total": ledger.total.to_json(),
        "method": ledger.method,
        "total_stated": bool(program_spec.budgets),
        "bounds": bounds,
        "bounds_hold": all(b["holds"] for b in bounds),
    }


def _unit_json(program_spec, members) -> dict | None:
    if program_spec.unit is None or not members:
        return None

    u = program_spec.unit
    return {
        "table": u.table,
        "relation": u.relation,
        "holds": {"k": u.bound.k, "table": u.bound.finer} if u.bound else None,
        "description": describe_unit(u, program_domain(program_spec, members)),
    }


def program_domain(program_spec, members) -> ir.Domain:
    """The domain the program's unit is read in: its own, else its first member's."""
    return program_spec.domain if program_spec.domain is not None else members[0].spec.domain


def program_text(summary: dict) -> str:
    lines = [f"program: {summary['program']}"]
    if summary.get("unit"):
        lines.append(f"unit: {summary['unit']['description']}")
        union = list(dict.fromkeys(q for r in summary["releases"] for q in r.get("invariants", ())))
        lines.append("multiverse (the union of the members' invariants): " + ("; ".join(union) or "none"))
    for r in summary["releases"]:
        group = f"  [parallel: {r['parallel_group']}]" if r["parallel_group"] else ""
        if r.get("unit_steps"):
            lines.append(
                f"  {r['spec']}: {budget_line(r['own_budget'])} on {r['unit']['table']} ({r['unit']['relation']}){group}"
            )
            for st in r["unit_steps"]:
                lines.append(f"    {st['what']}: {st['from']} -> {st['to']}  [{st['method']}]")
            lines.append(f"    for the program's unit: {budget_line(r['budget'])}")
            continue
        lines.append(f"  {r['spec']}: {budget_line(r['budget'])}{group}")
    lines.append(f"total: {budget_line(summary['total'])}")
    lines.append(f"  by {summary['method']}")
    for note in summary["ledger"]["notes"]:
        lines.append(f"  note: {note}")
    if not summary["total_stated"]:
        lines.append("warning: the program states no total budget bound (uncomposed releases)")
    for b in summary["bounds"]:
        state = "holds" if b["holds"] else "EXCEEDED"
        fig = b["achieved"]
        shown = f"{fig:.4f}" if isinstance(fig, float) and math.isfinite(fig) else str(fig)
        lines.append(f"declared {b['bound']}: {state} (achieved {shown}; {b['currency']})")
    return "\n".join(lines)


# ---- what the reports lay out: computed here, where the program is composed ---------------


def budget_words(budget_json: dict) -> str:
    """A budget's JSON form (as `program_summary` gives it) in words; the JSON itself when it is not one."""

    params = {k: v for k, v in budget_json.items() if k != "premetric"}
    try:
        b = budget_from_params({"premetric": budget_json["premetric"], **params})
    except (ValueError, TypeError, KeyError):
        return str(budget_json)
    return str(b) if b.is_finite else "infinite (no finite guarantee)"


def epsilon_words(budget_json) -> str | None:
    """A member's zCDP figure as epsilon at delta = 1e-10 by cks20 (the certificates' conversion), or None."""

    try:
        b = budget_from_params(dict(budget_json))
        if b.kind != "zcdp" or not b.is_finite:
            return None
        return f"epsilon = {float(convert(b, 'approx', delta=1e-10, method='cks20').result.epsilon):.2f} at delta = 1e-10 (cks20)"
    except (DpspecError, ValueError, TypeError, KeyError):
        return None


def summary_words(summary: dict) -> dict:
    """Every budget of a `program_summary` in words, for the reports: {"total": text, "members":
    [{"budget", "own_budget", "epsilon"}], one per release}; the summary itself is unchanged
    (it is `dpspec budget --json`'s)."""

    def words(value):
        return budget_words(value) if isinstance(value, dict) else str(value)

    return {
        "total": budget_words(summary["total"]),
        "members": [
            {
                "budget": words(r["budget"]),
                "own_budget": words(r.get("own_budget") or r["budget"]),
                "epsilon": epsilon_words(r["budget"]),
            }
            for r in summary["releases"]
        ],
    }


def composed_invariants(program_spec: ir.Spec) -> tuple | None:
    """The composed guarantee's multiverse: every member's invariants, each once, in order; None
    when the program's members do not load."""

    try:
        members = load_program(program_spec)
    except DpspecError:
        return None
    invariants, seen = [], set()
    for m in members:
        for q in m.spec.invariants:
            if q.describe() not in seen:
                seen.add(q.describe())
                invariants.append(q)
    return tuple(invariants)
