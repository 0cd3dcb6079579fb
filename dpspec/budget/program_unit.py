"""A program's composed unit: every member's budget restated for one unit of one census domain.

A program may include releases of different tables of ONE domain (persons, households, housing
units of one census). It states the unit it protects at the top level of the program file, e.g.
`unit persons : hamming holds at most 1 units`: one person, together with the housing-unit
record they live in. Each member's budget (already in the member's own flavor) is converted to
that unit by its relation to it, each step a ledger line:

- the member protects the program's table: only the relation (change-one, add/remove) may differ;
- the member's table is finer (its rows link into the unit's table, persons in households):
  group privacy with the declared bound (`holds at most K` or the table's `at most K`);
- the member's table is coarser (the unit's rows link into it): a change of one unit changes one
  of its records, so its guarantee holds as is;
- the member's table is named by the composed unit's `holds at most K T` without a link (a
  person's housing unit, on a separate table): group privacy for K records (K = 1: as is).

Anything else has no unit relation and is an error naming the member; so is a member of another
domain (a different census, or not a census at all): composition is about releases of the same
data.

A program may also state its own domain (the whole census: persons, households, housing units)
with `same as D1, D2` naming the member domains that are its data under another name (each
production spec runs on its own synthetic stand-in). A member then composes when its domain is
named there, its stage is the program's, and its table's unit (person, household, housing unit)
is the unit of one of the program's tables: that table is where the member stands.
"""

from __future__ import annotations

import attrs

from dpspec import ir
from dpspec.budget import group
from dpspec.errors import ConversionError, Diagnostic, SpecError
from dpspec.budget.ledger import to_spec_flavor
from dpspec.contract.mechanism import NativeFlavor


@attrs.frozen
class UnitStep:
    what: str  # "unit", "relation", "premetric"
    source: object
    result: object
    method: str

    def to_json(self) -> dict:
        return {"what": self.what, "from": str(self.source), "to": str(self.result), "method": self.method}


def describe_unit(unit: ir.Unit, domain: ir.Domain) -> str:
    """'one person (change one), with at most 1 housing_unit record of table units'."""
    table = domain.table(unit.table)
    who = table.unit if table is not None else unit.table
    how = "change one" if unit.relation == "hamming" else "add or remove one"
    text = f"one {who} ({how})"
    linked = [t for t in domain.tables if t.parent == unit.table or t.name == (table.parent if table else None)]
    parts = [f"their {t.unit} (table {t.name})" for t in linked]
    if unit.bound is not None:
        finer = domain.table(unit.bound.finer)
        parts.append(
            f"at most {unit.bound.k} {finer.unit if finer else unit.bound.finer} record(s) of table {unit.bound.finer}"
        )
    return text + (", with " + ", ".join(parts) if parts else "")


def check_domains(program_spec: ir.Spec, members) -> ir.Domain:
    """The one domain every member must share: the program's own (`same as` its members'), else
    the first member's; an error names every member that is not of it and why."""
    first = members[0]
    declared = program_spec.domain
    domain = declared if declared is not None else first.spec.domain
    origin = "the program's own" if declared is not None else f"from '{first.path}'"
    problems = []
    for m in members if declared is not None else members[1:]:
        d = m.spec.domain
        if declared is not None and d.name != domain.name and d.name not in domain.same_as:
            problems.append(
                Diagnostic(
                    f"'{m.path}' protects domain '{d.name}', which the program's domain '{domain.name}' does not name "
                    f"('same as {', '.join(domain.same_as) or '...'}'): it is not this census, and a program composes "
                    "releases of one domain only"
                )
            )
        elif declared is None and d.name != domain.name:
            problems.append(
                Diagnostic(
                    f"'{m.path}' protects domain '{d.name}' ({d.stage}), not the program's '{domain.name}' "
                    f"({domain.stage}, {origin}): a program composes releases of one domain only"
                )
            )
        elif d.stage != domain.stage:
            problems.append(
                Diagnostic(
                    f"'{m.path}' protects domain '{d.name}' at stage {d.stage}, not the program's stage {domain.stage} "
                    f"({origin}): data at another stage of its life cycle is another domain"
                )
            )
        elif declared is not None and member_table(domain, m.spec) is None:
            own = m.spec.domain.table(m.spec.unit.table)
            problems.append(
                Diagnostic(
                    f"'{m.path}' protects {own.unit if own else m.spec.unit.table} records (table {m.spec.unit.table}), "
                    f"and no table of the program's domain '{domain.name}' has that unit "
                    f"(units: {', '.join(t.unit for t in domain.tables)}): it has no unit relation to the program's unit"
                )
            )
    unit = program_spec.unit
    if domain.table(unit.table) is None:
        problems.append(
            Diagnostic(
                f"the program's unit '{unit.table}' is not a table of domain '{domain.name}' "
                f"(tables: {', '.join(t.name for t in domain.tables)})",
                *((unit.loc.line, unit.loc.column) if unit.loc else ()),
            )
        )
    if unit.bound is not None and domain.table(unit.bound.finer) is None:
        problems.append(
            Diagnostic(f"the program's unit holds '{unit.bound.finer}', which is not a table of domain '{domain.name}'")
        )
    if problems:
        raise SpecError(problems, program_spec.path, program_spec.text)
    return domain


def member_table(domain: ir.Domain, spec: ir.Spec) -> str | None:
    """The table of `domain` a member's unit stands on: its own name in its own domain, else the
    program domain's table with the same unit (person, household, housing_unit)."""
    if spec.domain.name == domain.name:
        return spec.unit.table
    own = spec.domain.table(spec.unit.table)
    if own is None:
        return None
    return next((t.name for t in domain.tables if t.unit == own.unit), None)


def to_program_unit(program_spec: ir.Spec, domain: ir.Domain, member, budget):
    """(budget for the program's unit, [UnitStep]) of one member's budget (in its own flavor)."""

    if budget is None:
        return None, []
    unit = program_spec.unit
    own = member.spec.unit
    steps: list[UnitStep] = []
    table = member_table(domain, member.spec) or own.table
    if table != own.table:
        steps.append(
            UnitStep(
                "unit",
                budget,
                budget,
                f"the member's table {own.table} is the census's table {table} "
                f"(one {domain.table(table).unit} record): as is",
            )
        )
    if unit.bound is not None and unit.bound.finer == table and not _linked(domain, table, unit.table):
        conv = group(budget, unit.bound.k)
        method = f"the composed unit holds at most {unit.bound.k} {table} record(s): " + (
            "the same record, as is" if unit.bound.k == 1 else conv.method
        )
        steps.append(UnitStep("unit", budget, conv.result, method))
        budget, table = conv.result, unit.table
    elif table != unit.table and not _linked(domain, table, unit.table):
        raise SpecError(
            [
                Diagnostic(
                    f"'{member.path}' protects {table} records, which have no unit relation to the program's unit "
                    f"'{unit.table}': link the tables in the domain ('in {unit.table} by ID at most K') or state "
                    f"'unit {unit.table} : {unit.relation} holds at most K {table}' in the program"
                )
            ],
            program_spec.path,
            program_spec.text,
        )
    # the ledger's own conversions, with the program's unit (and domain) in place of the member's
    as_program = attrs.evolve(member.spec, unit=unit, domain=domain)
    try:
        value, ledger_steps = to_spec_flavor(as_program, NativeFlavor(table, own.relation, budget.kind), budget)
    except ConversionError as exc:
        raise SpecError(
            [Diagnostic(f"'{member.path}': cannot restate its budget for the program's unit: {exc}")],
            program_spec.path,
            program_spec.text,
        ) from None
    steps += [UnitStep(s.what, s.source, s.result, s.method) for s in ledger_steps]
    if not steps:
        steps.append(UnitStep("unit", budget, value, "the program's unit itself: as is"))
    return value, steps


def _linked(domain: ir.Domain, a: str, b: str) -> bool:
    """One table's rows link into the other's (persons in households), either way."""
    ta, tb = domain.table(a), domain.table(b)
    return a == b or (ta is not None and ta.parent == b) or (tb is not None and tb.parent == a)
