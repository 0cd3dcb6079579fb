"""The protected change a Tumult Session needs for the spec's unit, and whether a stated one covers it."""

from __future__ import annotations

import re

import attrs

_FORMS = (
    (re.compile(r"^AddOneRow\(\s*\)$"), lambda m: Change("add_one_row", k=1)),
    (re.compile(r"^AddMaxRows\(\s*(?:max_rows\s*=\s*)?(\d+)\s*\)$"), lambda m: Change("add_max_rows", k=int(m[1]))),
    (
        re.compile(r"^AddRowsWithID\(\s*(?:id_column\s*=\s*)?['\"]?([A-Za-z_][A-Za-z0-9_]*)['\"]?\s*\)$"),
        lambda m: Change("add_rows_with_id", column=m[1]),
    ),
)


@attrs.frozen
class Change:
    """A Tumult protected change: add or remove up to k rows, or every row of one ID."""

    kind: str  # "add_one_row", "add_max_rows" or "add_rows_with_id"
    k: int | None = None
    column: str | None = None

    def __str__(self) -> str:
        if self.kind == "add_one_row":
            return "AddOneRow()"
        if self.kind == "add_max_rows":
            return f"AddMaxRows({self.k})"
        return f"AddRowsWithID({self.column})"

    def request(self) -> dict:
        """The runner's form of it."""
        return {"kind": self.kind, "k": self.k, "column": self.column}


def parse(text: str) -> Change | None:
    """'AddOneRow()', 'AddMaxRows(2)' or 'AddRowsWithID(hh_id)' (Tumult's own names); None otherwise."""
    for pattern, make in _FORMS:
        if m := pattern.match(text.strip()):
            return make(m)
    return None


@attrs.frozen
class Needed:
    """What the unit's neighbours are in the mechanism's table: up to `rows` rows added or removed,
    or (for a parent unit) all rows sharing one value of `id_column`; `why` says it in words."""

    rows: int | None
    id_column: str | None
    why: str


def needed(spec, table_name: str) -> Needed | str:
    """The unit's neighbours seen from `table_name`, or a sentence saying Tumult has no protected change for them."""
    unit = spec.unit
    table = spec.domain.table(table_name)
    if unit is None:
        return "the spec states no unit"
    if unit.table == table_name:
        if unit.relation == "symdiff":
            return Needed(1, None, f"unit {unit.table} : symdiff adds or removes one row of '{table_name}'")
        return Needed(
            2, None, f"unit {unit.table} : hamming changes one row of '{table_name}' (one removed, one added)"
        )
    if table.parent == unit.table and table.link:
        k = table.link_bound
        factor = 1 if unit.relation == "symdiff" else 2
        rows = k * factor if k else None
        if unit.relation == "symdiff":
            return Needed(
                rows,
                table.link,
                f"unit {unit.table} : symdiff adds or removes every row of '{table_name}' "
                f"with one {table.link}" + (f" (at most {k})" if k else ""),
            )
        if rows is None:
            return (
                f"unit {unit.table} : hamming changes every row of '{table_name}' with one {table.link}; Tumult's "
                f"AddRowsWithID hides one ID's rows, not a change of two: declare 'at most K' on the link"
            )
        return Needed(
            rows,
            None,
            f"unit {unit.table} : hamming changes the rows of one {table.link} (at most {k} removed and {k} added)",
        )
    return f"the unit is on table '{unit.table}', which does not contain the rows of '{table_name}'"


def default(need: Needed) -> Change:
    """The protected change that says the unit exactly: AddOneRow, AddMaxRows(k) or AddRowsWithID(id)."""
    if need.id_column is not None:
        return Change("add_rows_with_id", column=need.id_column)
    return Change("add_one_row", k=1) if need.rows == 1 else Change("add_max_rows", k=need.rows)


def covers(change: Change, need: Needed) -> bool:
    """Whether the Session's protected change hides at least the unit's neighbours."""
    if change.kind == "add_rows_with_id":
        return need.id_column is not None and change.column == need.id_column
    return need.rows is not None and change.k >= need.rows
