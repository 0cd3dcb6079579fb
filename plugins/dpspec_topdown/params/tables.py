"""The settings of each table TopDown releases, read from the core's plain values: its histogram
variables, recodes, schema, invariants, query strategy and structural zeros, and the joint
tables solved with it (what the plugin, its checks and `broken_places` all read).

A joint table's own settings are read by the same functions as the mechanism table's; their
`under` is the path of its entry (("joint", NAME)), so an error is located inside it."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # names only the annotations use; the modules themselves load when needed
    from ..measurement.histogram import Recode, Schema

from fractions import Fraction

import attrs

from dpspec.api import Diagnostic, SpecError, ir, LazyModule

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


def _recodes(params: dict, variables: dict, under: tuple = ()) -> list[Recode]:
    """The declared recodes: ``NAME: { of: VARIABLE  LABEL: [values] ... }`` each, a partition of
    the variable; what is wrong is a SpecError at its path."""

    out = []
    for name, body in (params.get("recodes") or {}).items():
        path = (*under, "recodes", name)
        if name in variables or any(r.name == name for r in out):
            raise SpecError(
                Diagnostic(f"recodes: '{name}': the name is already a variable or another recode", path=path)
            )
        variable = body["of"]
        if variable not in variables:
            raise SpecError(
                Diagnostic(
                    f"recodes: '{name}' recodes '{variable}', which is not a histogram "
                    f"variable (known: {', '.join(variables)})",
                    path=(*path, "of"),
                )
            )
        by_text = {str(c): c for c in variables[variable]}  # categories are written as text
        groups = {
            label: [by_text.get(str(v), v) for v in map(_recode_value, values)]
            for label, values in body.items()
            if label != "of"
        }
        try:
            out.append(_histogram.Recode.build(name, variable, variables[variable], groups))
        except SpecError as exc:  # at the group or value it names, else at the recode
            raise SpecError([attrs.evolve(d, path=(*path, *d.path)) for d in exc.diagnostics]) from None
    return out


def _schema(spec: ir.Spec, params: dict, under: tuple = ()) -> Schema:
    """The histogram's variables and recodes (errors at their paths)."""

    variables = _variables(spec, params)
    return _histogram.Schema.from_variables(variables).with_recodes(_recodes(params, variables, under))


def _structural_zeros(params: dict, variables: dict, recodes=(), under: tuple = ()) -> dict:
    """{name: {variable: [categories]}} from ``structural_zeros: { NAME: { VAR: [values] ... } }``.

    VAR is a histogram variable (values: its categories) or a recode (values: its group labels,
    read as the categories in those groups), as production states its zeros on recodes
    (Constraints_DHCH.py: HHAGE_75PLUS, HHELDERLY_PRESENCE_NOT_75PLUS ...); a variable named twice
    keeps the categories both name. A name or value that is neither is a SpecError at its name."""
    by_recode = {r.name: r for r in recodes}
    out = {}
    for name, written in (params.get("structural_zeros") or {}).items():
        path = (*under, "structural_zeros", name)
        if not written:
            raise SpecError(Diagnostic(f"structural_zeros: '{name}' needs a block of VARIABLE: [values]", path=path))
        cells = {}
        for v, raw in written.items():
            values = [_recode_value(x) for x in raw]
            if v in variables:
                variable, by_text = v, {str(c): c for c in variables[v]}
                bad = [x for x in values if str(x) not in by_text]
                picked = [by_text[str(x)] for x in values if str(x) in by_text]
            elif v in by_recode:
                r = by_recode[v]
                variable, labels = r.variable, [str(lb) for lb in r.labels]
                bad = [x for x in values if str(x) not in labels]
                chosen = {labels.index(str(x)) for x in values if str(x) in labels}
                picked = [c for c, g in zip(variables[variable], r.group_of) if g in chosen]
            else:
                raise SpecError(
                    Diagnostic(
                        f"structural_zeros: '{name}' names '{v}', which is not a "
                        f"histogram variable or recode (known: {', '.join([*variables, *by_recode])})",
                        path=(*path, v),
                    )
                )
            if bad or not values:
                what = "categories" if v in variables else "groups"
                known = variables[v] if v in variables else list(by_recode[v].labels)
                raise SpecError(
                    Diagnostic(
                        f"structural_zeros: '{name}': {v} = {bad or '[]'} are not {what} of '{v}' ({listed(known)})",
                        path=(*path, v),
                    )
                )
            cells[variable] = [c for c in cells[variable] if c in picked] if variable in cells else picked
        out[name] = cells
    return out


def _joint(spec: ir.Spec, params: dict) -> list[dict]:
    """``joint: { NAME: { table: T  variables: a, b  queries: {...}  recodes: {...} } }``: further
    tables solved with the mechanism's table in one problem per node (joint.py). Each entry:
    name, table, variables {name: categories}, schema, strategy {level: [(key, share)]},
    structural_zeros {name: {variable: [categories]}} (cells 0 in its release), path (of its
    entry in the spec) and params (its own settings, read as the mechanism's table's are). What
    is wrong is a SpecError at its path: a table or a variable at the value itself."""
    geo = spec.domain.geography.levels if spec.domain.geography else []
    out, seen = [], {params["table"]}
    for name, fields in (params.get("joint") or {}).items():
        entry = ("joint", name)
        table_name = fields["table"]
        table = spec.domain.table(table_name)
        written = (*entry, "table", 0)  # the table's name itself (one value, read as a one-item list)
        if table is None or table_name in seen:
            raise SpecError(
                Diagnostic(
                    f"joint: '{name}' names table '{table_name}', which must be a further table of "
                    "the domain (not the mechanism's table, nor one already joint)",
                    path=written,
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
                    path=written,
                )
            )
        names = list(fields["variables"])
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:  # at its second writing
            raise SpecError(
                Diagnostic(
                    f"joint: '{name}': variables: '{twice[0]}' is listed twice",
                    path=(*entry, "variables", [i for i, n in enumerate(names) if n == twice[0]][1]),
                )
            )
        for i, variable in enumerate(names):
            col = table.column(variable)
            if col is None or col.type.kind not in ("enum", "bool", "int") or variable in geo:
                raise SpecError(
                    Diagnostic(
                        f"joint: '{name}': '{variable}' must be a column of '{table_name}' with a "
                        "declared value set (enumerated, bool or int range)",
                        path=(*entry, "variables", i),
                    )
                )
        sub = {**fields, "variables": names}  # its settings, read as the mechanism table's are
        try:
            variables = _variables(spec, sub)
            schema = _schema(spec, sub, under=entry)
            strategy = _canonical_strategy(sub, schema, params["levels"], under=entry)
            zeros = _structural_zeros(sub, variables, schema.recodes, under=entry)
        except SpecError as exc:
            raise SpecError(
                [
                    attrs.evolve(d, message=f"joint: '{name}': {d.message}", path=d.path or entry)
                    for d in exc.diagnostics
                ]
            ) from None
        out.append(
            {
                "name": name,
                "table": table_name,
                "variables": variables,
                "schema": schema,
                "strategy": strategy,
                "structural_zeros": zeros,
                "path": entry,
                "params": sub,
            }
        )
    if len(out) > 1:
        raise SpecError(
            Diagnostic(
                "joint: TopDown solves one further table with its own (two histograms per "
                "node, as production's households and units)",
                path=out[1]["path"],
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


def _per_level(queries: dict) -> bool:
    """Whether ``queries`` gives each level a block of its own (every entry a block) rather than
    one block of query shares for every level."""
    return bool(queries) and all(isinstance(v, dict) for v in queries.values())


def _query_shares(params: dict, measured_levels=None, under: tuple = ()) -> dict:
    """{level: {query as written: share}} for every measured level (``params["levels"]``', or
    ``measured_levels``), from ``queries``: one block for every level, or one per level. A level
    without its block, or the two ways mixed, is a SpecError at the queries."""
    queries = params["queries"]
    per_level = _per_level(queries)
    mixed = [name for name, v in queries.items() if isinstance(v, dict)] if not per_level else []
    if mixed:
        raise SpecError(
            Diagnostic(
                f"queries: '{mixed[0]}' is a block of query shares beside shares of queries: write one "
                "block of query shares for every level, or one block per level",
                path=(*under, "queries", mixed[0]),
            )
        )
    out = {}
    for level in measured_levels if measured_levels is not None else params["levels"]:
        if per_level and level not in queries:
            raise SpecError(Diagnostic(f"queries: no query shares for level '{level}'", path=(*under, "queries")))
        out[level] = queries[level] if per_level else queries
    return out


def _strategy(params: dict, levels: list[str], variables, measured_levels=None) -> dict:
    """{level: [(query, share), ...]} for every level that has a budget share."""
    return {
        level: [(_query_key(name, variables), share) for name, share in shares.items()]
        for level, shares in _query_shares(params, measured_levels).items()
    }


def _canonical_strategy(params: dict, schema, measured_levels=None, under: tuple = ()) -> dict:
    """{level: [(canonical query, share), ...]}: a query naming what is neither a variable nor a
    recode of `schema` is a SpecError at its entry."""
    per_level = _per_level(params["queries"])
    variables = list(schema.names)
    out = {}
    for level, shares in _query_shares(params, measured_levels, under).items():
        entries = []
        for name, share in shares.items():
            try:
                entries.append((schema.canonical(_query_key(name, variables)), share))
            except SpecError as exc:
                entry = (*under, "queries", *((level,) if per_level else ()), name)
                raise SpecError([attrs.evolve(d, path=entry) for d in exc.diagnostics]) from None
        out[level] = entries
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
    return {**variables, **{r.name: list(r.labels) for r in _recodes(params, variables)}}


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
