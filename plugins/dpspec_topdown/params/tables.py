"""The settings of each table TopDown releases, read from the mechanism block: its histogram
variables, recodes, schema, invariants, query strategy and structural zeros, and the joint
tables solved with it (what the plugin, its checks and `broken_places` all read)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # names only the annotations use; the modules themselves load when needed
    from ..measurement.histogram import Recode, Schema

from fractions import Fraction
import re

from dpspec.api import Diagnostic, SpecError, ir, LazyModule

from .locate import at, item_at
from ..wording import listed

# imported on first use: `dpspec --help` loads this module, not them
_histogram = LazyModule("dpspec_topdown.measurement.histogram", "_histogram", globals())
_recode_invariants = LazyModule("dpspec_topdown.params.recode_invariants", "_recode_invariants", globals())

ROOT = "nation"


def _variables(spec: ir.Spec, params: dict) -> dict:
    table = spec.domain.table(params["table"])
    out = {}
    for name in params["variables"]:
        col = table.column(name)
        ty = col.type
        if ty.kind == "enum":
            out[name] = list(ty.values)
        elif ty.kind == "bool":
            out[name] = [False, True]
        elif ty.kind == "int":
            out[name] = list(range(ty.low, ty.high + 1))
    return out


def _recode_value(raw):
    """A category as written in a recode group: a whole number, a name or a string."""
    if isinstance(raw, Fraction):
        return int(raw) if raw.denominator == 1 else raw
    return str(raw)


def _entry_settings(p) -> tuple[dict, dict]:
    """(settings, values) of an entry written as a block (`pl94 { table: ...  query: ... }`), by
    name: the settings keep their locations for errors; ({}, {}) when the entry is not a block."""
    settings = {q.name: q for q in p.value.params} if isinstance(p.value, ir.ParamBlock) else {}
    return settings, {name: q.value for name, q in settings.items()}


def _recodes(params: dict, variables: dict, spec: ir.Spec | None = None) -> list[Recode]:
    """The declared recodes: ``NAME: { of: VARIABLE  LABEL: [values]  ... }`` each."""

    block = params.get("recodes")
    if block is None:
        return []
    if not isinstance(block, ir.ParamBlock):
        raise SpecError("recodes: expected a block such as { hhinstlevels: { of: hhgq  gq: [1, 2] ... } }")
    out = []
    for p in block.params:
        loc = (p.loc.line, p.loc.column) if p.loc else (None, None)
        body = p.value
        of = body.get("of") if isinstance(body, ir.ParamBlock) else None
        if of is None:
            raise SpecError(Diagnostic(f"recodes: '{p.name}' needs a block with 'of: VARIABLE' and its groups", *loc))
        if p.name in variables or any(r.name == p.name for r in out):
            raise SpecError(Diagnostic(f"recodes: '{p.name}': the name is already a variable or another recode", *loc))
        variable = str(of.value)
        if variable not in variables:
            raise SpecError(
                Diagnostic(
                    f"recodes: '{p.name}' recodes '{variable}', which is not a histogram "
                    f"variable (known: {', '.join(variables)})",
                    *at(of),
                )
            )
        groups = {}
        for g in body.params:
            if g.name == "of":
                continue
            values = g.value if isinstance(g.value, tuple) else (g.value,)
            by_text = {str(c): c for c in variables[variable]}  # categories are written as text
            groups[g.name] = [by_text.get(str(v), v) for v in map(_recode_value, values)]
        try:
            out.append(_histogram.Recode.build(p.name, variable, variables[variable], groups))
        except SpecError as exc:
            raise SpecError(
                [Diagnostic(d.message, *_recode_group_loc(spec, body, d.message, loc)) for d in exc.diagnostics]
            ) from None
    return out


def _recode_group_loc(spec, body: ir.ParamBlock, message: str, loc: tuple) -> tuple:
    """(line, column) of what a recode error is about: the value a group lists that is not a
    category or is in an earlier group too, or the empty group; the recode's `loc` otherwise
    (categories in no group)."""
    found = (
        re.search(r"group '([^']+)' lists (\S+?), which", message)
        or re.search(r"(\S+) is in both '[^']+' and '([^']+)'", message)
        or re.search(r"group '([^']+)' is empty", message)
    )
    if not found:
        return loc
    if "is in both" in message:
        value, label = found.group(1), found.group(2)
    else:
        label, value = found.group(1), (found.group(2) if found.re.groups > 1 else None)
    group = body.get(label)
    return item_at(spec, group, value.strip("'") if value else None) if group is not None else loc


def _schema(spec: ir.Spec, params: dict) -> Schema:

    variables = _variables(spec, params)
    return _histogram.Schema.from_variables(variables).with_recodes(_recodes(params, variables, spec))


def _shares_loc(spec: ir.Spec | None, params: dict, message: str) -> tuple:
    """(line, column) of what an allocation error is about: the level's entry under ``queries`` for
    "query shares at level 'X'", the query's own entry for "query 'X' names ...", the ``levels``
    setting for the level shares (the mechanism's, unless ``spec`` is None); (None, None) otherwise."""
    block = params.get("queries")
    entries = block.params if isinstance(block, ir.ParamBlock) else ()
    level = re.match(r"query shares at level '([^']+)'", message)
    query = re.match(r"query '([^']+)' names", message)
    for p in entries:
        if level and p.name == level.group(1) and p.loc:
            return p.loc.line, p.loc.column
        inner = p.value.params if isinstance(p.value, ir.ParamBlock) else (p,)
        for q in inner if query else ():
            if " * ".join(w.strip() for w in q.name.split("*")) == query.group(1) and q.loc:
                return q.loc.line, q.loc.column
    name = "queries" if level or query else "levels" if message.startswith("level budget shares") else None
    p = spec.mechanism.params.get(name) if name and spec is not None and spec.mechanism is not None else None
    return (p.loc.line, p.loc.column) if p is not None and p.loc else (None, None)


def _structural_zeros(params: dict, variables: dict, recodes=()) -> dict:
    """{name: {variable: [categories]}} from ``structural_zeros: { NAME: { VAR: [values] ... } }``.

    VAR is a histogram variable (values: its categories) or a recode (values: its group labels,
    read as the categories in those groups), as production states its zeros on recodes
    (Constraints_DHCH.py: HHAGE_75PLUS, HHELDERLY_PRESENCE_NOT_75PLUS ...); a variable named twice
    keeps the categories both name. A name or value that is neither is a SpecError at its line."""
    block = params.get("structural_zeros")
    if block is None:
        return {}
    if not isinstance(block, ir.ParamBlock):
        raise SpecError("structural_zeros: expected a block such as { nurse_nva_0: { hhgq: [3]  votingage: [0] } }")
    by_recode = {r.name: r for r in recodes}
    out = {}
    for p in block.params:
        loc = (p.loc.line, p.loc.column) if p.loc else (None, None)
        if not isinstance(p.value, ir.ParamBlock) or not p.value.params:
            raise SpecError(Diagnostic(f"structural_zeros: '{p.name}' needs a block of VARIABLE: [values]", *loc))
        cells = {}
        for v in p.value.params:
            vloc = (v.loc.line, v.loc.column) if v.loc else loc
            values = [_recode_value(x) for x in (v.value if isinstance(v.value, tuple) else (v.value,))]
            if v.name in variables:
                variable, by_text = v.name, {str(c): c for c in variables[v.name]}
                bad = [x for x in values if str(x) not in by_text]
                picked = [by_text[str(x)] for x in values if str(x) in by_text]
            elif v.name in by_recode:
                r = by_recode[v.name]
                variable, labels = r.variable, [str(lb) for lb in r.labels]
                bad = [x for x in values if str(x) not in labels]
                chosen = {labels.index(str(x)) for x in values if str(x) in labels}
                picked = [c for c, g in zip(variables[variable], r.group_of) if g in chosen]
            else:
                raise SpecError(
                    Diagnostic(
                        f"structural_zeros: '{p.name}' names '{v.name}', which is not a "
                        f"histogram variable or recode (known: {', '.join([*variables, *by_recode])})",
                        *vloc,
                    )
                )
            if bad or not values:
                what = "categories" if v.name in variables else "groups"
                known = variables[v.name] if v.name in variables else list(by_recode[v.name].labels)
                raise SpecError(
                    Diagnostic(
                        f"structural_zeros: '{p.name}': {v.name} = {bad or '[]'} are not "
                        f"{what} of '{v.name}' ({listed(known)})",
                        *vloc,
                    )
                )
            cells[variable] = [c for c in cells[variable] if c in picked] if variable in cells else picked
        out[p.name] = cells
    return out


def _block(params: dict, name: str, example: str):
    """The parameter `name` as a block, None when absent; a SpecError showing `example` if not a block."""
    block = params.get(name)
    if block is not None and not isinstance(block, ir.ParamBlock):
        raise SpecError(f"{name}: expected a block such as {example}")
    return block


def _joint(spec: ir.Spec, params: dict) -> list[dict]:
    """``joint: { NAME: { table: T  variables: a, b  queries: {...}  recodes: {...} } }``: further
    tables solved with the mechanism's table in one problem per node (joint.py). Each entry:
    name, table, variables {name: categories}, schema, strategy {level: [(key, share)]},
    structural_zeros {name: {variable: [categories]}} (cells 0 in its release), loc."""
    block = _block(params, "joint", "{ units: { table: units  variables: vacs  queries: { total: 1/4 } } }")
    if block is None:
        return []
    geo = spec.domain.geography.levels if spec.domain.geography else []
    out, seen = [], {params["table"]}
    for p in block.params:
        loc = at(p)
        settings, fields = _entry_settings(p)
        missing = [f for f in ("table", "variables", "queries") if f not in fields]
        unknown = sorted(set(fields) - {"table", "variables", "queries", "recodes", "structural_zeros"})
        if missing or unknown:
            what = f"missing {', '.join(missing)}" if missing else f"unknown field(s) {', '.join(unknown)}"
            raise SpecError(
                Diagnostic(
                    f"joint: '{p.name}': {what} (fields: table, variables, queries, recodes, structural_zeros)",
                    *(at(settings[unknown[0]]) if not missing else loc),
                )
            )
        table_name = str(fields["table"])
        table = spec.domain.table(table_name)
        if table is None or table_name in seen:
            raise SpecError(
                Diagnostic(
                    f"joint: '{p.name}' names table '{table_name}', which must be a further table of "
                    "the domain (not the mechanism's table, nor one already joint)",
                    *item_at(spec, settings["table"], table_name),
                )
            )
        seen.add(table_name)
        flag = (params.get("spine") or {}).get("aian")
        lacking = [lv for lv in [*geo, *([flag] if flag is not None else [])] if table.column(lv) is None]
        if lacking:
            raise SpecError(
                Diagnostic(
                    f"joint: table '{table_name}' has no column {', '.join(lacking)}: a joint "
                    "table lives on the same geography (and spine flag)",
                    *item_at(spec, settings["table"], table_name),
                )
            )
        raw = fields["variables"]
        names = [str(v) for v in (raw if isinstance(raw, tuple) else (raw,))]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise SpecError(
                Diagnostic(
                    f"joint: '{p.name}': variables: '{twice[0]}' is listed twice",
                    *item_at(spec, settings["variables"], twice[0], occurrence=2),
                )
            )
        sub = {
            "table": table_name,
            "variables": names,
            "recodes": fields.get("recodes"),
            "queries": fields["queries"],
            "structural_zeros": fields.get("structural_zeros"),
        }
        for name in names:
            col = table.column(name)
            if col is None or col.type.kind not in ("enum", "bool", "int") or name in geo:
                raise SpecError(
                    Diagnostic(
                        f"joint: '{p.name}': '{name}' must be a column of '{table_name}' with a "
                        "declared value set (enumerated, bool or int range)",
                        *item_at(spec, settings["variables"], name),
                    )
                )
        try:
            variables = _variables(spec, sub)
            schema = _schema(spec, sub)
            if not isinstance(sub["queries"], ir.ParamBlock):
                raise SpecError(
                    Diagnostic("queries: expected a block such as { total: 1/4 }", *at(settings["queries"]))
                )
            strategy = {
                lv: [(schema.canonical(q), sh) for q, sh in entries]
                for lv, entries in _strategy(sub, _levels(spec), names, params["levels"]).items()
            }
            zeros = _structural_zeros(sub, variables, schema.recodes)
        except SpecError as exc:
            raise SpecError(
                [
                    Diagnostic(
                        f"joint: '{p.name}': {d.message}",
                        *(
                            (d.line, d.column)
                            if d.line is not None
                            else next((at for at in [_shares_loc(None, sub, d.message)] if at[0] is not None), loc)
                        ),
                    )
                    for d in exc.diagnostics
                ]
            ) from None
        out.append(
            {
                "name": p.name,
                "table": table_name,
                "variables": variables,
                "schema": schema,
                "strategy": strategy,
                "structural_zeros": zeros,
                "loc": loc,
                "params": sub,
            }
        )
    if len(out) > 1:
        raise SpecError(
            Diagnostic(
                "joint: TopDown solves one further table with its own (two histograms per "
                "node, as production's households and units)",
                *out[1]["loc"],
            )
        )
    return out


def _levels(spec: ir.Spec) -> list[str]:
    geo = spec.domain.geography
    return [ROOT, *geo.levels] if geo else [ROOT]


def _query_key(name: str, variables) -> tuple:
    if name == "total":
        return ()
    if name == "detailed":
        return tuple(variables)
    return tuple(name.split("*"))


def _strategy(params: dict, levels: list[str], variables, measured_levels=None) -> dict:
    """{level: [(query, share), ...]} for every level that has a budget share."""
    block = params["queries"]
    measured = list(measured_levels if measured_levels is not None else params["levels"])
    per_level = all(isinstance(p.value, ir.ParamBlock) for p in block.params) and block.params
    out = {}
    for level in measured:
        source = block.get(level).value if per_level and block.get(level) else (None if per_level else block)
        if source is None:
            raise SpecError(f"queries: no query shares for level '{level}'")
        out[level] = [(_query_key(p.name, variables), p.value) for p in source.params]
    return out


def _invariant_recodes(spec: ir.Spec, params: dict) -> dict:
    """The recodes an invariant may name (a table column of the recode's name): {name: Recode}."""
    try:
        return {r.name: r for r in _recodes(params, _variables(spec, params))}
    except SpecError:  # a bad recode is reported at the recode, not at every invariant
        return {}


def _invariants(spec: ir.Spec, params: dict):
    """(level, query) pairs for the declared invariants on the person table; and problems. A
    factor may be a recode of a histogram variable, carried by the table as a column of its name
    (recode_invariants.py: production's gqhh_vect)."""

    levels = _levels(spec)
    variables = set(params["variables"])
    recodes = _invariant_recodes(spec, params) if params.get("recodes") is not None else {}
    out, problems = [], []
    for q in spec.invariants:
        if q.table != params["table"]:
            continue
        geo = [c for c in q.columns if c in levels]
        rest = [c for c in q.columns if c not in levels]
        bad = [c for c in rest if c not in variables and c not in recodes]
        if bad or len(geo) > 1:
            what = (
                f"columns {', '.join(bad)} are neither geography levels nor histogram variables nor recodes"
                if bad
                else "it names two geography levels"
            )
            problems.append(
                Diagnostic(
                    f"TopDown cannot keep the invariant '{q.describe()}' exact: {what}",
                    *((q.loc.line, q.loc.column) if q.loc else (None, None)),
                )
            )
            continue
        table = spec.domain.table(params["table"])
        for c in rest:
            if (
                c in recodes and c not in variables and table.column(c) is not None
            ):  # a missing column: the checker's error
                column = _variables(spec, {"table": params["table"], "variables": [c]}).get(c, [])
                problems.extend(_recode_invariants.recode_invariant_problems(q, c, column, recodes[c]))
        out.append(((geo[0] if geo else ROOT), tuple(rest), q))
    return out, problems


def _bound_categories(spec: ir.Spec, params: dict) -> dict:
    """What a constraint may bound: each histogram variable's categories and each recode's group
    labels (production bounds persons per block on gqlevels, a recode of the detailed GQ types)."""
    variables = _variables(spec, params)
    return {**variables, **{r.name: list(r.labels) for r in _recodes(params, variables, spec)}}


def _relation(spec: ir.Spec, params: dict) -> str:
    """Sensitivity is computed for the spec's relation when the unit is the person table."""
    return spec.unit.relation if spec.unit and spec.unit.table == params["table"] else "symdiff"


def _recode_columns(spec: ir.Spec, params: dict) -> list:
    """The recodes the invariants name as table columns (each is released as a column too)."""
    recodes = _invariant_recodes(spec, params) if params.get("recodes") is not None else {}
    return list(
        dict.fromkeys(
            c
            for _, query, _ in _invariants(spec, params)[0]
            for c in query
            if c in recodes and c not in params["variables"]
        )
    )
