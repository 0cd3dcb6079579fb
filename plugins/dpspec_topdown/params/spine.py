"""The `spine` setting read and checked: the AIAN split, the bypassed levels, the block groups split
by group-quarters types and the reference geography."""
from __future__ import annotations

from dpspec.api import Diagnostic, MechanismError, SpecError, declared_values, ir

from .locate import item_at
from .tables import _levels, _recode_value


def _spine(spec: ir.Spec, params: dict) -> dict:
    """{"aian": (split level, flag column), "bypass": [level, ...]} from
    ``spine: { aian: COLUMN  bypass: [county, tract, blockgroup] }`` (either may be absent).

    Production's AIAN spine (spine.py): the first geography level (the state) and every level
    below it but the finest are split into their parts inside and outside AIAN areas, which
    the person column COLUMN marks (0/1 or boolean, constant within each finest unit).
    Production's optimized spine: a unit of a `bypass` level with a single child is measured
    with its own and its child's shares, the child not at all."""
    block = params.get("spine")
    if block is None:
        return {}
    if not isinstance(block, ir.ParamBlock):
        raise SpecError("spine: expected a block such as { aian: aian }")
    table = spec.domain.table(params["table"])
    geo = spec.domain.geography.levels if spec.domain.geography else []
    out = {}
    for p in block.params:
        loc = (p.loc.line, p.loc.column) if p.loc else (None, None)
        if p.name == "bypass":
            out["bypass"] = _bypass_levels(spec, params, p)
            continue
        if p.name == "gq_blockgroups":
            out["gq_blockgroups"] = _gq_blockgroups(spec, params, p.value, loc)
            continue
        if p.name == "geography":
            out["geography"] = (str(p.value), loc)
            continue
        if p.name != "aian":
            raise SpecError(Diagnostic(f"spine: unknown setting '{p.name}' (known: aian, bypass, gq_blockgroups, "
                                       "geography)", *loc))
        column = str(p.value)
        col = table.column(column)
        if col is None:
            raise SpecError(Diagnostic(f"spine: aian names '{column}', which is not a column of table '{table.name}'", *loc))
        if column in geo or column in params["variables"]:
            raise SpecError(Diagnostic(f"spine: aian names '{column}', a geography level or histogram variable, "
                                       "not a flag marking the units inside AIAN areas", *loc))
        ty = col.type
        flag = ty.kind == "bool" or (ty.kind == "enum" and {str(v) for v in ty.values} <= {"0", "1"}) or (
            ty.kind == "int" and 0 <= ty.low and ty.high <= 1) or (
            ty.kind == "category" and ty.keys_from is not None and _flag_values(spec, table.name, column))
        if not flag:
            raise SpecError(Diagnostic(f"spine: aian column '{column}' must be boolean or take the values 0 and 1", *loc))
        if len(geo) < 2:
            raise SpecError(Diagnostic("spine: the AIAN split needs a level to split above the finest one", *loc))
        out["aian"] = (geo[0], column)
    if "geography" in out:
        name, loc = out["geography"]
        ref = spec.domain.table(name)
        need = [*geo, *([out["aian"][1]] if "aian" in out else [])]
        if ref is None or name == params["table"] or any(ref.column(c) is None for c in need):
            raise SpecError(Diagnostic(f"spine: geography names '{name}', which must be a further table of the domain "
                                       f"with the columns {', '.join(need)} (the reference geography: every "
                                       f"{geo[-1] if geo else 'unit'}, populated or not)", *loc))
        out["geography"] = name
    return out


def _flag_values(spec: ir.Spec, table: str, column: str) -> bool:
    """A flag read from a key file takes only the values 0 and 1 there."""
    try:
        return set(map(str, declared_values(spec, table, column) or ())) <= {"0", "1"}
    except MechanismError:  # an unreadable key file: the checker's key-file diagnostics say why
        return True


def _bypass_levels(spec: ir.Spec, params: dict, setting) -> list[str]:
    """The levels whose single-child units the optimized spine bypasses, checked: each a
    geography level with a budget share and a level below it (a bypassed unit's budget moves
    into a geounit that measures it; a level without a share would leave it unspent); errors at
    the level's name in the `setting`."""
    value = setting.value
    levels = _levels(spec)
    names = [str(v) for v in (value if isinstance(value, tuple) else (value,))]
    for name in names:
        where = item_at(spec, setting, name)
        if name not in levels:
            raise SpecError(Diagnostic(f"spine: bypass names '{name}', which is not a geography level "
                                       f"(known: {', '.join(levels)})", *where))
        if name == levels[-1]:
            raise SpecError(Diagnostic(f"spine: bypass names '{name}', the finest level: its units have no "
                                       "child to bypass into", *where))
        if name not in params["levels"]:
            raise SpecError(Diagnostic(f"spine: bypass names '{name}', which has no budget share: its "
                                       "single-child units would take their child's budget and measure nothing, "
                                       "leaving those geounits without budget", *where))
    twice = [n for n in names if names.count(n) > 1]
    if twice:
        raise SpecError(Diagnostic(f"spine: bypass lists '{twice[0]}' twice", *item_at(spec, setting, twice[0], occurrence=2)))
    return names


def _gq_blockgroups(spec: ir.Spec, params: dict, value, loc) -> dict:
    """``gq_blockgroups: { table: T  type: COLUMN  types: [..] }``: split the level above the
    finest by which of `types` each finest unit's rows of T have. The spine must be public, so
    T's counts by finest level and type must be declared invariant."""
    geo = spec.domain.geography.levels if spec.domain.geography else []
    fields = {q.name: q.value for q in value.params} if isinstance(value, ir.ParamBlock) else {}
    if set(fields) != {"table", "type", "types"}:
        raise SpecError(Diagnostic("spine: gq_blockgroups needs { table: TABLE  type: COLUMN  types: [values] }", *loc))
    table_name, type_col = str(fields["table"]), str(fields["type"])
    table = spec.domain.table(table_name)
    if len(geo) < 2:
        raise SpecError(Diagnostic("spine: gq_blockgroups needs a level above the finest to split", *loc))
    finest = geo[-1]
    if table is None or table_name == params["table"] or table.column(finest) is None or table.column(type_col) is None:
        raise SpecError(Diagnostic(f"spine: gq_blockgroups reads '{table_name}', which must be a second table of the "
                                   f"domain with columns '{finest}' and '{type_col}'", *loc))
    if not any(q.table == table_name and set(q.columns) == {finest, type_col} for q in spec.invariants):
        raise SpecError(Diagnostic(f"spine: gq_blockgroups builds the spine from the counts of '{table_name}' by "
                                   f"{finest} and {type_col}, so the spine would leak them; declare them public: "
                                   f"invariants {{ count {table_name} by {finest}, {type_col} }}", *loc))
    raw = fields["types"]
    types = [_recode_value(v) for v in (raw if isinstance(raw, tuple) else (raw,))]
    return {"table": table_name, "type": type_col, "types": types, "finest": finest, "level": geo[-2]}


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
    return geo[geo.index(spine["aian"][0]):-1]
