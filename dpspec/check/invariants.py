"""What a set of declared invariants fixes exactly.

A count by some columns determines a count by fewer columns of the same table; a nested column
(`county : category in state`, or a geography `state > county`) determines its parent, so a
count by county also fixes the count by state. The checker (undeclared invariants), the audit
(refinement of multiverses) and plugins (what-if tables) all ask these questions.
"""

from __future__ import annotations

from dpspec import ir


def implied_by(query: ir.CountQuery, declared) -> bool:
    """A count is determined by a declared count of the same table over a superset of columns."""
    cols = set(query.columns)
    return any(d.table == query.table and cols <= set(d.columns) for d in declared)


def parents(domain: ir.Domain | None) -> dict[tuple[str, str], set[str]]:
    """(table, column) -> the columns it determines directly (its nesting parents)."""
    out: dict[tuple[str, str], set[str]] = {}
    if domain is None:
        return out
    levels = domain.geography.levels if domain.geography else ()
    for table in domain.tables:
        names = set(table.column_names)
        for col in table.columns:
            up = out.setdefault((table.name, col.name), set())
            if col.type.kind == "category" and col.type.parent:
                up.add(col.type.parent)
            if col.name in levels:
                # A geography hierarchy nests each level in the ones above it.
                up.update(lvl for lvl in levels[: levels.index(col.name)] if lvl in names)
    return out


def closure(query: ir.CountQuery, domain: ir.Domain | None) -> ir.CountQuery:
    """The same count with every column its columns determine added (what it really fixes)."""
    up = parents(domain)
    cols = list(query.columns)
    seen = set(cols)
    i = 0
    while i < len(cols):
        for parent in sorted(up.get((query.table, cols[i]), ())):
            if parent not in seen:
                seen.add(parent)
                cols.append(parent)
        i += 1
    return ir.CountQuery(query.table, tuple(cols))


def determines(declared, query: ir.CountQuery, domain: ir.Domain | None) -> bool:
    """Do the declared counts fix `query` exactly (directly or through nesting)?"""
    expanded = [closure(q, domain) for q in declared]
    return implied_by(query, expanded)


def undetermined(queries, declared, domain: ir.Domain | None) -> list[ir.CountQuery]:
    """The queries the declared counts do not fix."""
    return [q for q in queries if not determines(declared, q, domain)]
