"""The `spine` setting read and checked: the AIAN split, the bypassed levels, the block groups split
by group-quarters types and the reference geography."""

from __future__ import annotations

from dpspec.api import Diagnostic, MechanismError, declared_values, ir

from .tables import _levels, _recode_value


def _spine(spec: ir.Spec, params: dict) -> dict:
    """{"aian": (split level, flag column), "bypass": [level, ...], "gq_blockgroups": {...},
    "geography": table} from ``spine: { aian: COLUMN  bypass: [county, tract, blockgroup] }``
    (each may be absent), as the core resolved it and `spine_problems` checked it.

    Production's AIAN spine (spine.py): the first geography level (the state) and every level
    below it but the finest are split into their parts inside and outside AIAN areas, which
    the person column COLUMN marks (0/1 or boolean, constant within each finest unit).
    Production's optimized spine: a unit of a `bypass` level with a single child is measured
    with its own and its child's shares, the child not at all."""
    block = params.get("spine") or {}
    geo = spec.domain.geography.levels if spec.domain.geography else []
    out = {}
    if block.get("aian") is not None and geo:
        out["aian"] = (geo[0], block["aian"])
    if block.get("bypass") is not None:
        out["bypass"] = list(block["bypass"])
    if block.get("gq_blockgroups") is not None and len(geo) >= 2:
        gq = block["gq_blockgroups"]
        out["gq_blockgroups"] = {
            "table": gq["table"],
            "type": gq["type"],
            "types": [_recode_value(v) for v in gq["types"]],
            "finest": geo[-1],
            "level": geo[-2],
        }
    if block.get("geography") is not None:
        out["geography"] = block["geography"]
    return out


def spine_problems(spec: ir.Spec, params: dict) -> list[Diagnostic]:
    """What the core cannot check of the spine (the names, types and levels it has), each at its
    path: an AIAN flag that is not a 0/1 column apart from the levels and variables, a bypassed
    level that is the finest, has no budget share or is listed twice, the GQ block groups' table
    and invariant, the reference geography's columns."""
    block = params.get("spine")
    if block is None:
        return []
    table = spec.domain.table(params["table"])
    geo = spec.domain.geography.levels if spec.domain.geography else []
    column = block.get("aian")
    if column is not None:
        if column in geo or column in params["variables"]:
            return [
                Diagnostic(
                    f"spine: aian names '{column}', a geography level or histogram variable, "
                    "not a flag marking the units inside AIAN areas",
                    path=("spine", "aian"),
                )
            ]
        ty = table.column(column).type
        flag = (
            ty.kind == "bool"
            or (ty.kind == "enum" and {str(v) for v in ty.values} <= {"0", "1"})
            or (ty.kind == "int" and 0 <= ty.low and ty.high <= 1)
            or (ty.kind == "category" and ty.keys_from is not None and _flag_values(spec, table.name, column))
        )
        if not flag:
            return [
                Diagnostic(
                    f"spine: aian column '{column}' must be boolean or take the values 0 and 1", path=("spine", "aian")
                )
            ]
        if len(geo) < 2:
            return [
                Diagnostic("spine: the AIAN split needs a level to split above the finest one", path=("spine", "aian"))
            ]
    problems = _bypass_problems(spec, params, block.get("bypass") or ())
    if problems:
        return problems
    if block.get("gq_blockgroups") is not None:
        problems = _gq_blockgroups_problems(spec, params, block["gq_blockgroups"])
        if problems:
            return problems
    name = block.get("geography")
    if name is not None:
        ref = spec.domain.table(name)
        need = [*geo, *([column] if column is not None else [])]
        if name == params["table"] or any(ref.column(c) is None for c in need):
            return [
                Diagnostic(
                    f"spine: geography names '{name}', which must be a further table of the domain "
                    f"with the columns {', '.join(need)} (the reference geography: every "
                    f"{geo[-1] if geo else 'unit'}, populated or not)",
                    path=("spine", "geography"),
                )
            ]
    return []


def _flag_values(spec: ir.Spec, table: str, column: str) -> bool:
    """A flag read from a key file takes only the values 0 and 1 there."""
    try:
        return set(map(str, declared_values(spec, table, column) or ())) <= {"0", "1"}
    except MechanismError:  # an unreadable key file: the checker's key-file diagnostics say why
        return True


def _bypass_problems(spec: ir.Spec, params: dict, names) -> list[Diagnostic]:
    """The levels whose single-child units the optimized spine bypasses, checked: each (a geography
    level, as the core checked) with a budget share and a level below it (a bypassed unit's budget
    moves into a geounit that measures it; a level without a share would leave it unspent), at
    the level's name in the list."""
    levels = _levels(spec)
    for i, name in enumerate(names):
        where = ("spine", "bypass", i)
        if name == levels[-1]:
            return [
                Diagnostic(
                    f"spine: bypass names '{name}', the finest level: its units have no child to bypass into",
                    path=where,
                )
            ]
        if name not in params["levels"]:
            return [
                Diagnostic(
                    f"spine: bypass names '{name}', which has no budget share: its "
                    "single-child units would take their child's budget and measure nothing, "
                    "leaving those geounits without budget",
                    path=where,
                )
            ]
    twice = [i for i, n in enumerate(names) if n in names[:i]]
    if twice:
        return [Diagnostic(f"spine: bypass lists '{names[twice[0]]}' twice", path=("spine", "bypass", twice[0]))]
    return []


def _gq_blockgroups_problems(spec: ir.Spec, params: dict, gq: dict) -> list[Diagnostic]:
    """``gq_blockgroups: { table: T  type: COLUMN  types: [..] }`` splits the level above the
    finest by which of `types` each finest unit's rows of T have. The spine must be public, so
    T's counts by finest level and type must be declared invariant."""
    geo = spec.domain.geography.levels if spec.domain.geography else []
    at = ("spine", "gq_blockgroups")
    table_name, type_col = gq["table"], gq["type"]
    table = spec.domain.table(table_name)
    if len(geo) < 2:
        return [Diagnostic("spine: gq_blockgroups needs a level above the finest to split", path=at)]
    finest = geo[-1]
    if table_name == params["table"] or table.column(finest) is None or table.column(type_col) is None:
        return [
            Diagnostic(
                f"spine: gq_blockgroups reads '{table_name}', which must be a second table of the "
                f"domain with columns '{finest}' and '{type_col}'",
                path=at,
            )
        ]
    if not any(q.table == table_name and set(q.columns) == {finest, type_col} for q in spec.invariants):
        return [
            Diagnostic(
                f"spine: gq_blockgroups builds the spine from the counts of '{table_name}' by "
                f"{finest} and {type_col}, so the spine would leak them; declare them public: "
                f"invariants {{ count {table_name} by {finest}, {type_col} }}",
                path=at,
            )
        ]
    return []


def _split_levels(spec: ir.Spec, spine: dict) -> list[str]:
    """The geography levels the spine splits, top first."""
    geo = list(spec.domain.geography.levels)
    split = set(geo[:-1]) if "aian" in spine else set()
    if "gq_blockgroups" in spine:
        split.add(geo[-2])
    return [lv for lv in geo if lv in split]


def _aian_split_levels(spec: ir.Spec, spine: dict) -> list[str]:
    """The levels the AIAN spine measures as two parts: its split level down to the finest's
    parent (none without the split)."""
    if "aian" not in spine:
        return []
    geo = list(spec.domain.geography.levels)
    return geo[geo.index(spine["aian"][0]) : -1]
