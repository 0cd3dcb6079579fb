"""Which columns of the swapped table match, swap and hold, and how they nest.

Shared by the mechanism, the what-if table and the report, so that all three read a spec's
`swap` block the same way.
"""

from __future__ import annotations

from dpspec.api import ir


def swap_table(spec: ir.Spec, params: dict) -> ir.Table | None:
    """The table whose records are swapped: `table`, else the spec's unit table."""
    name = params.get("table") or (spec.unit.table if spec.unit else None)
    return spec.domain.table(name) if (spec.domain and name) else None


def roles(spec: ir.Spec, params: dict) -> tuple[list[str], list[str], list[str]]:
    """(match, swap, hold): hold is every other column of the swap table, in declared order."""
    table = swap_table(spec, params)
    match, swap = list(params["match"]), list(params["swap"])
    hold = [c for c in table.column_names if c not in match and c not in swap]
    return match, swap, hold


def nesting_parents(table: ir.Table, column: str) -> list[str]:
    """The chain of `category in PARENT` ancestors of a column (nearest first)."""
    out, seen = [], {column}
    col = table.column(column)
    while col is not None and col.type.kind == "category" and col.type.parent and col.type.parent not in seen:
        out.append(col.type.parent)
        seen.add(col.type.parent)
        col = table.column(col.type.parent)
    return out


def without_implied(table: ir.Table, columns) -> tuple[str, ...]:
    """Drop columns determined by another column of the same query through nesting.

    `county : category in state` is validated on load, so a count by (state, size, county)
    is the count by (size, county): the shorter form is the one the spec must declare.
    """
    columns = list(dict.fromkeys(columns))
    implied = {p for c in columns for p in nesting_parents(table, c)}
    return tuple(c for c in columns if c not in implied)


def carried_tables(spec: ir.Spec, table: ir.Table) -> list[ir.Table]:
    """Tables of units inside the swap unit (persons in households) that have data."""
    with_data = {d.table for d in spec.data}
    return [t for t in spec.domain.tables if t.parent == table.name and t.link and t.name in with_data]
