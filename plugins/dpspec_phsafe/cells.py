"""The cells a PHSafe release has: the design's tables, iteration codes and data cells, in the
declared states, never the states the records live in.

Why: a state released only when some unit lies in it tells that one does. The states are
production's `state_filter` (the `states` parameter), else the declared values of the unit
table's `state` column (a value list, or `category values from "FILE"` with FILE in the public
block); the check refuses a spec that declares neither. Every declared state is measured, an
empty one with its noisy counts like any other. Iteration codes and data cells are production's
constants (`tabulate.ITERATION_CODES`, `tabulate.CELLS`), so the whole grid is known before the
run, and the run checks that it released exactly that grid.
"""

from __future__ import annotations

from dpspec.api import Diagnostic, MechanismError, declared_values, ir, LazyModule

# imported on first use: at import they would load numpy, pandas, pyarrow with this module
_tabulate = LazyModule("dpspec_phsafe.tabulate", "_tabulate", globals())


def state_problems(spec: ir.Spec, params: dict) -> list[Diagnostic]:
    """A located error when neither `states` nor the state column declares the states."""
    if params.get("states") is not None:
        return []
    col = spec.domain.table(params["units"]).column("state")
    if col is None or col.type.kind == "enum" or (col.type.kind == "category" and col.type.keys_from):
        return []
    at = (col.loc.line, col.loc.column) if col.loc else (None, None)
    return [
        Diagnostic(
            f"column 'state' of table '{params['units']}' keys PHSafe's release (its state rows), but its "
            "values are not declared and no 'states' parameter lists them: states found in the records "
            "would show which ones hold a unit",
            *at,
            hint='list them in the mechanism (\'states: ["09", "23"]\', production\'s state_filter), or '
            "declare the column: 'state : category values from \"states.csv\"' with 'keys "
            '"states.csv" released "WHO PUBLISHED IT"\' in the public block',
        )
    ]


def released_states(spec: ir.Spec, params: dict, design) -> tuple[str, ...]:
    """The states tabulated: the `states` parameter in its order, else the declared values."""
    if design.states:
        return tuple(design.states)
    values = declared_values(spec, params["units"], "state")
    if values is None:
        raise MechanismError("phsafe: the states are not declared (give 'states' or declare the state column)")
    return tuple(dict.fromkeys(str(v) for v in values))


def declared_cells(design, states) -> set:
    """Every (table, region_type, region_id, iteration_code, data_cell) the release must hold."""
    out = set()
    for m in design.measured():
        regions = ("US",) if m.geography == "usa" else tuple(states)
        for table in (m.table, *_tabulate.POSTPROCESSED.get(m.table, {})):
            cells = _tabulate.CELLS[m.table] if table == m.table else _tabulate.POSTPROCESSED[m.table][table]
            out |= {
                (table, m.geography.upper(), r, code, str(cell))
                for r in regions
                for code in _tabulate.ITERATION_CODES[m.level]
                for cell in cells
            }
    return out


def check_cells(counts, design, states) -> None:
    """MechanismError unless the release holds exactly the declared grid (nothing published)."""
    columns = ["table", "region_type", "region_id", "iteration_code", "data_cell"]
    held = {tuple(str(v) for v in row) for row in counts[columns].itertuples(index=False, name=None)}
    expected = declared_cells(design, states)
    for what, rows in (("holds the undeclared", held - expected), ("lacks the declared", expected - held)):
        if rows:
            row = sorted(rows)[0]
            raise MechanismError(
                f"phsafe's release {what} cell {dict(zip(columns, row))} ({len(rows)} in all): its "
                "cells are the declared states' full grid, empty ones with their noisy counts; "
                "nothing was published"
            )
