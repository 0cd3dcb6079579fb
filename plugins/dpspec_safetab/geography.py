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

from dpspec.api import Diagnostic, MechanismError, declared_values, ir, DataError, shown, LazyModule

from .design import NATION_CODE, ROOT

# heavy libraries, imported on first use
np = LazyModule("numpy", "np", globals())


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
        out.append(
            Diagnostic(
                f"geography level '{geo}' (column '{geo}' of table '{table.name}') keys SafeTab's release, but its units "
                "are not declared: units found in the records would show which ones are occupied (a person alone in a "
                "tract would be revealed)",
                *at,
                hint=f"declare them from a public geography file: '{geo} : category values from \"geography.csv\"' with "
                f'\'keys "geography.csv" released "WHO PUBLISHED IT"\' in the public block',
            )
        )
    return out


def declared_units(spec: ir.Spec, table: str, levels) -> dict[str, tuple[str, ...]]:
    """{geography level: its declared units' codes as text, sorted as text} (the nation: "US")."""
    out = {}
    for geo in levels:
        values = (NATION_CODE,) if geo == ROOT else declared_values(spec, table, geo)
        out[geo] = tuple(sorted(dict.fromkeys(str(v) for v in values)))
    return out


def iteration_file_problems(spec: ir.Spec, path: str) -> list[Diagnostic]:
    """The iteration table says which population groups the release has: it must be declared public."""

    def full(p):
        return os.path.normpath(p if os.path.isabs(p) else os.path.join(spec.base_dir, p))

    if any(full(k.path) == full(path) for k in spec.public_keys):
        return []
    return [
        Diagnostic(
            f"the iteration table {path!r} lists the population groups SafeTab releases, but the public "
            "block does not declare it: only public information may say which groups a release has",
            path=("iterations",),
            hint=f'add \'keys "{path}" released "WHO PUBLISHED IT"\' to the public block (production\'s '
            "iteration files are published with its configuration)",
        )
    ]


def public_totals_problems(spec: ir.Spec) -> list[Diagnostic]:
    """SafeTab-H's published totals choose its detail, so their keys (geography units and
    population groups) are part of its release's structure: the public block must declare the
    totals (`count T by GEOGRAPHY, group released "..."`), and every column of T they are
    keyed by must declare its values (the geography files, the groups' key file), at the column."""
    stated = [p for p in spec.public if "group" in p.query.columns]
    if not stated:
        return [
            Diagnostic(
                "SafeTab-H chooses each table's detail from the published totals, but the public block does "
                "not declare them: their units and groups would be keys nobody declared",
                path=("public_totals",),
                hint="declare them in the public block, one line per geography level: "
                "'count person_groups by county, group released \"WHO PUBLISHED THEM\"', with "
                "person_groups's columns reading their values from the public geography and group files",
            )
        ]
    out, seen = [], set()
    for info in stated:
        table = spec.domain.table(info.query.table) if spec.domain else None
        if table is None:
            continue
        for name in info.query.columns:
            col = table.column(name)
            try:
                declared = declared_values(spec, table.name, name) is not None
            except MechanismError:  # an unreadable key file: the checker's key-file diagnostics say why
                declared = True
            if col is None or (table.name, name) in seen or declared:
                continue
            seen.add((table.name, name))
            loc = (col.loc.line, col.loc.column) if col.loc else (None, None)
            what = "population group" if name == "group" else "geography unit"
            out.append(
                Diagnostic(
                    f"column '{name}' of table '{table.name}' keys the published totals SafeTab-H chooses its detail from, "
                    f"but its values are not declared: a {what} found only in those totals would shape the release "
                    "unannounced",
                    *loc,
                    hint=f'\'{name} : category values from "FILE"\' with \'keys "FILE" released "SOURCE"\' in the public '
                    "block (the geography file of the level, or the groups of the public iteration table)",
                )
            )
    return out


def check_public_keys(totals, units: dict, groups, full: str) -> None:
    """A DataError at the first published total keyed outside the declared keys: a unit the spec
    does not declare at its level, or a group the public iteration table does not have. Rows at
    levels the design does not tabulate are not read."""
    groups = set(map(str, groups))
    for geo, codes in units.items():
        rows = totals[totals["geography"].astype(str) == geo]
        if not len(rows):
            continue
        bad_unit = ~rows["geocode"].astype(str).isin(set(codes)).to_numpy()
        bad_group = ~rows["group"].astype(str).isin(groups).to_numpy()
        bad = bad_unit | bad_group
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            row = rows.iloc[i]
            n = int(rows.index[i])
            where = f"row {n + 1}" + (f" (line {n + 2})" if not full.endswith(".parquet") else "")
            why = (
                f"{geo} {shown(row['geocode'])} is not a declared unit of that level"
                if bad_unit[i]
                else f"group {shown(row['group'])} is not a group of the public iteration table"
            )
            raise DataError(
                f"{full}: {where}: a published total keyed outside the declared keys: {why}; "
                f"{int(bad.sum())} such row(s) at {geo}"
            )
