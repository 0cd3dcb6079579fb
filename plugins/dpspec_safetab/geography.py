"""The geography units a SafeTab release has: the spec's declared values, never the records'.

Why: a county that appears in the release only when someone lives there tells an attacker that
someone does, whatever the noise. So every geography level below the nation reads its units from
its column's declared values (an enumeration, or `category values from "FILE"` with FILE in
`public { keys ... }`: a published geography file), and every declared unit is measured, an empty
one with its noisy stage-1 totals like any other (its stage-2 detail then follows from those
noisy totals, which the budget pays for). The check refuses a level whose column declares no
values, located at the column.
"""
from __future__ import annotations

import os

from dpspec.api import Diagnostic, declared_values, ir

from .design import NATION_CODE, ROOT


def _declared(column: ir.Column) -> bool:
    ty = column.type
    return ty.kind == "enum" or (ty.kind == "category" and bool(ty.keys_from))


def undeclared_levels(spec: ir.Spec, table: ir.Table, levels) -> list[Diagnostic]:
    """A located error for each geography level whose column does not declare its units."""
    out = []
    for geo in levels:
        col = table.column(geo) if geo != ROOT else None
        if col is None or _declared(col):
            continue
        at = (col.loc.line, col.loc.column) if col.loc else (None, None)
        out.append(Diagnostic(
            f"geography level '{geo}' (column '{geo}' of table '{table.name}') keys SafeTab's release, but its units "
            "are not declared: units found in the records would show which ones are occupied (a person alone in a "
            "tract would be revealed)", *at,
            hint=f"declare them from a public geography file: '{geo} : category values from \"geography.csv\"' with "
                 f"'keys \"geography.csv\" released \"WHO PUBLISHED IT\"' in the public block"))
    return out


def declared_units(spec: ir.Spec, table: str, levels) -> dict[str, tuple[str, ...]]:
    """{geography level: its declared units' codes as text, sorted as text} (the nation: "US")."""
    out = {}
    for geo in levels:
        values = (NATION_CODE,) if geo == ROOT else declared_values(spec, table, geo)
        out[geo] = tuple(sorted(dict.fromkeys(str(v) for v in values)))
    return out


def iteration_file_problems(spec: ir.Spec, path: str, where) -> list[Diagnostic]:
    """The iteration table says which population groups the release has: it must be declared public."""
    def full(p):
        return os.path.normpath(p if os.path.isabs(p) else os.path.join(spec.base_dir, p))

    if any(full(k.path) == full(path) for k in spec.public_keys):
        return []
    at = (where.loc.line, where.loc.column) if where is not None and where.loc else (None, None)
    return [Diagnostic(f"the iteration table {path!r} lists the population groups SafeTab releases, but the public "
                       "block does not declare it: only public information may say which groups a release has", *at,
                       hint=f"add 'keys \"{path}\" released \"WHO PUBLISHED IT\"' to the public block (production's "
                            "iteration files are published with its configuration)")]
