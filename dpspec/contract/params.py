"""A mechanism's declared parameters, nested ones too, and their resolution against a spec.

The core checks a `mechanism` block against the plugin's `ParameterSchema` (types, names, ranges,
the keys of maps, the columns of query expressions) and hands the plugin plain Python values:
Fractions and ints, strings, tuples for lists, dicts for blocks and maps. A problem the plugin
finds in those values carries a *path* into the block (`Diagnostic(message, path=("tables", "t1",
"details", 2))`), and `located` turns it into the line and column where that value is written,
so no plugin re-parses the IR or looks for positions itself.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import attrs

from dpspec import ir
from dpspec.errors import Diagnostic
from dpspec.language.diagnostics import unknown

PARAM_TYPES = (
    "number",
    "int",
    "column",
    "columns",
    "table",
    "string",
    "choice",
    "shares",
    "block",
    "map",
    "list",
    "query",
    "level",
    "either",
)
# what a map's keys name: the geography's levels (ROOT_LEVEL, the hierarchy, the crosscut
# components), the domain's tables, columns (of `table_param`'s table, else of any table), any
# name (checked by the plugin), or one of `choices`
MAP_KEYS = ("levels", "tables", "columns", "names", "choices")
ROOT_LEVEL = "nation"  # the geography's root, as the production mechanisms call it
TOTAL = "total"  # the query expression of the total: no column


_BLOCK_TYPES = ("block", "map", "shares")  # the types written as a { ... } block


def _takes(kind: str, raw) -> bool:
    """Whether a setting of type `kind` reads a value written as `raw` is (not a block)."""
    if isinstance(raw, Fraction):
        return kind in ("number", "int")
    if isinstance(raw, tuple):
        return kind == "list"
    return kind not in ("number", "int", "list")  # a name or a string


def _as_spec(value):
    """A map's values or a list's items, given as a ParamSpec or a bare type name ("number")."""
    if value is None or isinstance(value, ParamSpec):
        return value
    return ParamSpec("", str(value), "")


@attrs.frozen
class ParamSpec:
    """One declared parameter (or, nested, a block's setting, a map's values, a list's items).

    type: number (exact Fraction), int, column (a column of `table_param`'s table, else of any
    table), columns (one or more), table, string, choice (one of `choices`), shares (a block of
    name: number, e.g. budget shares), query (a query expression: "total", or columns joined by
    "*" such as "QSEX * AGE4", resolved to the tuple of its columns, () for the total; a word of
    `choices`, such as "detailed", is kept as written), level (a geography level: ROOT_LEVEL, the
    hierarchy's levels, the crosscut components), block, map, list, either.

    block with `fields`: a nested block of those settings, resolved to a dict (a setting not
    written gets its default). block without `fields`: free-form, the ir.ParamBlock as written,
    checked by the plugin itself (the escape hatch; a new plugin should declare its fields).
    map: a block whose keys are what `keys` names (MAP_KEYS) and whose values are `values`,
    resolved to a dict in written order; a map may also have `fields`, named settings beside its
    keys, resolved as a block's (TopDown's recode: `{ of: VARIABLE  LABEL: [values] ... }`).
    list: `[a, b]` (or one value alone) of `items`, resolved to a tuple. either (API 1.6,
    additive): one of `options`, chosen by how the value is written: a `{ ... }` block is read by
    the first block, map or shares option, anything else by the first other option that takes
    what is written (a number by number or int, a list by list, a name or string by the other
    types), else by the first other option (e.g. a list of queries, or a block of named lists of
    queries; a category, a number or a name).
    """

    name: str
    type: str
    doc: str
    default: Any = None
    required: bool = False
    low: Fraction | None = None
    high: Fraction | None = None
    choices: tuple[str, ...] = ()
    fields: tuple["ParamSpec", ...] = ()
    keys: str = ""
    values: "ParamSpec | None" = attrs.field(default=None, converter=_as_spec)
    items: "ParamSpec | None" = attrs.field(default=None, converter=_as_spec)
    table_param: str = ""
    options: tuple["ParamSpec", ...] = attrs.field(default=(), converter=lambda os: tuple(_as_spec(o) for o in os))

    def option_for(self, raw) -> "ParamSpec | None":
        """The option of an `either` that reads `raw` as written: a block by a block option;
        anything else by the first other option that takes its kind, else the first other one."""
        written_as_block = isinstance(raw, ir.ParamBlock)
        fitting = [o for o in self.options if (o.type in _BLOCK_TYPES) == written_as_block]
        return next((o for o in fitting if _takes(o.type, raw)), fitting[0] if fitting else None)

    def describe_range(self) -> str:
        if self.low is None and self.high is None:
            return ""
        low = ir.format_number(self.low) if self.low is not None else "-inf"
        high = ir.format_number(self.high) if self.high is not None else "inf"
        return f"[{low}, {high}]"

    def field(self, name: str) -> "ParamSpec | None":
        return next((f for f in self.fields if f.name == name), None)

    def describe_type(self) -> str:
        """The type in words, nested ones spelled out: 'map of levels to map of level1, level2 to number'."""
        if self.type == "map":
            keys = ", ".join(self.choices) if self.keys == "choices" else self.keys or "names"
            names = ", ".join(f.name for f in self.fields)
            beside = f", with the setting{'s' if len(self.fields) > 1 else ''} {names}" if self.fields else ""
            return f"map of {keys} to {self.values.describe_type() if self.values else 'any value'}{beside}"
        if self.type == "list":
            return f"list of {self.items.describe_type() if self.items else 'values'}"
        if self.type == "block" and self.fields:
            return "block of " + ", ".join(f.name for f in self.fields)
        if self.type == "either":
            return " or ".join(o.describe_type() for o in self.options)
        return self.type

    def to_json(self) -> dict:
        item: dict = {"name": self.name, "type": self.type, "doc": self.doc, "required": self.required}
        if self.default is not None:
            item["default"] = ir.to_jsonable(self.default)
        if self.low is not None or self.high is not None:
            item["range"] = [ir.to_jsonable(self.low), ir.to_jsonable(self.high)]
        if self.choices:
            item["choices"] = list(self.choices)
        if self.fields:
            item["fields"] = [f.to_json() for f in self.fields]
        if self.keys:
            item["keys"] = self.keys
        if self.values is not None:
            item["values"] = self.values.to_json()
        if self.items is not None:
            item["items"] = self.items.to_json()
        if self.table_param:
            item["table_param"] = self.table_param
        if self.options:
            item["options"] = [o.to_json() for o in self.options]
        return item


@attrs.frozen
class ParameterSchema:
    """A mechanism's declared parameters, checked against a spec's `mechanism` block and shown
    by `dpspec plugins` and the mechanism's documentation page."""

    params: tuple[ParamSpec, ...]

    def get(self, name: str) -> ParamSpec | None:
        return next((p for p in self.params if p.name == name), None)

    def at(self, path) -> ParamSpec | None:
        """The declaration of the setting at `path` (keys and list indices), or None when the
        schema does not reach it (a free-form block, an undeclared name)."""
        ps = self.get(path[0]) if path else None
        for step in path[1:]:
            if ps is not None and ps.type == "either":  # the option that has such a step
                ps = next((o for o in ps.options if (o.type in _BLOCK_TYPES) == isinstance(step, str)), None)
            if ps is None:
                return None
            if ps.type == "block" and ps.fields and isinstance(step, str):
                ps = ps.field(step)
            elif ps.type == "map" and isinstance(step, str):
                ps = ps.field(step) or ps.values
            elif ps.type == "list" and isinstance(step, int):
                ps = ps.items
            else:
                return None
        return ps

    def to_json(self) -> list[dict]:
        return [p.to_json() for p in self.params]


# ---- locating -----------------------------------------------------------------------------


def located(spec: ir.Spec, diagnostics) -> list[Diagnostic]:
    """Each diagnostic without a line at the place its `path` names in the spec's mechanism block
    (the deepest written part of the path; the mechanism's own line when the path is empty)."""
    call = spec.mechanism
    out = []
    for d in diagnostics:
        if d.line is None and call is not None:
            line, column = ir.line_column(None, ir.locate(call.params, d.path, call.loc) if d.path else call.loc)
            d = attrs.evolve(d, line=line, column=column)
        out.append(d)
    return out


def label(path) -> str:
    """A path as a reader writes it: tables.t1.details[2]."""
    text = ""
    for step in path:
        text += f"[{step}]" if isinstance(step, int) else (f".{step}" if text else str(step))
    return text


# ---- resolving a mechanism block against its schema ---------------------------------------


@attrs.define
class _Context:
    spec: ir.Spec
    block: ir.ParamBlock
    fallback: ir.Loc | None
    columns: dict  # column name -> the tables that have it
    tables: list
    levels: tuple
    top: dict  # the top-level parameters as written (for table_param)
    problems: list = attrs.Factory(list)

    def problem(self, path, message, hint=None):
        line, column = ir.line_column(None, ir.locate(self.block, path, self.fallback))
        self.problems.append(Diagnostic(message, line, column, hint=hint, path=tuple(path)))

    def table_columns(self, ps: ParamSpec) -> tuple[str | None, Any]:
        """(table, its columns) a column-like setting must name, or (None, every column)."""
        given = self.top.get(ps.table_param) if ps.table_param else None
        name = given.value.text if given is not None and isinstance(given.value, ir.Name) else None
        table = self.spec.domain.table(name) if name and self.spec.domain else None
        if table is None:
            return None, self.columns
        return table.name, table.column_names


def _levels(spec: ir.Spec) -> tuple[str, ...]:
    geo = spec.domain.geography if spec.domain else None
    if geo is None:
        return (ROOT_LEVEL,)
    return tuple(dict.fromkeys((ROOT_LEVEL, *geo.levels, *(getattr(geo, "components", ()) or ()))))


def _all_columns(spec: ir.Spec) -> dict[str, list[str]]:
    cols: dict[str, list[str]] = {}
    if spec.domain:
        for t in spec.domain.tables:
            for c in t.columns:
                cols.setdefault(c.name, []).append(t.name)
    return cols


def resolve_params(mechanism, call: ir.MechanismCall, spec: ir.Spec) -> tuple[dict, list[Diagnostic]]:
    """Validate a mechanism block against the plugin's schema; returns (values, problems)."""
    schema = mechanism.parameters
    values: dict = {}
    given = {p.name: p for p in call.params.params}
    ctx = _Context(
        spec,
        call.params,
        call.loc,
        _all_columns(spec),
        [t.name for t in spec.domain.tables] if spec.domain else [],
        _levels(spec),
        given,
    )
    ctx.problems.extend(_repeated(call.params, call.loc))
    for p in call.params.params:
        if schema.get(p.name) is None:
            message, hint = unknown(
                "parameter", p.name, [s.name for s in schema.params], f"mechanism '{mechanism.name}'"
            )
            ctx.problem((p.name,), message, hint)
    for ps in schema.params:
        p = given.get(ps.name)
        if p is None:
            if ps.required:
                ctx.problems.append(
                    Diagnostic(
                        f"mechanism '{mechanism.name}' needs the parameter '{ps.name}' ({ps.doc})",
                        *ir.line_column(None, call.loc),
                    )
                )
            values[ps.name] = ps.default
            continue
        values[ps.name] = _resolve(ps, p.value, (ps.name,), ctx)
    return values, ctx.problems


def _resolve(ps: ParamSpec, raw, path: tuple, ctx: _Context):
    """The plain value of one setting, or None after recording its problem at `path`."""
    if ps.type == "either":
        option = ps.option_for(raw)
        if option is None:
            ctx.problem(path, f"parameter '{label(path)}': expected {ps.describe_type()}, got {_type_name(raw)}")
            return None
        return _resolve(option, raw, path, ctx)
    if ps.type == "block" and ps.fields:
        return _block(ps, raw, path, ctx)
    if ps.type == "map":
        return _map(ps, raw, path, ctx)
    if ps.type == "list":
        items = raw if isinstance(raw, tuple) else (raw,)
        if ps.items is None:
            return tuple(items)
        out = tuple(_resolve(ps.items, item, (*path, i), ctx) for i, item in enumerate(items))
        return None if any(v is None for v in out) else out
    if ps.type == "query":
        return _query(ps, raw, path, ctx)
    if ps.type == "level":
        if not isinstance(raw, (str, ir.Name)):
            ctx.problem(path, f"parameter '{label(path)}': expected a geography level, got {_type_name(raw)}")
            return None
        if str(raw) not in ctx.levels:
            ctx.problem(path, *_not_one(path, str(raw), "geography level", ctx.levels))
            return None
        return str(raw)
    if ps.type in ("column", "columns"):
        table, columns = ctx.table_columns(ps)
        value, problem = _coerce(ps, raw, columns, ctx.tables, table)
    else:
        value, problem = _coerce(ps, raw, ctx.columns, ctx.tables)
    if problem:
        message, hint = problem if isinstance(problem, tuple) else (problem, None)
        ctx.problem(path, f"parameter '{label(path)}': {message}", hint)
        return None
    return value


def _block(ps: ParamSpec, raw, path, ctx) -> dict | None:
    if not isinstance(raw, ir.ParamBlock):
        ctx.problem(
            path,
            f"parameter '{label(path)}': expected a block {{ {', '.join(f.name for f in ps.fields)} }}, "
            f"got {_type_name(raw)}",
        )
        return None
    out, ok = {}, True
    for p in raw.params:
        if ps.field(p.name) is None:
            message, hint = unknown("setting", p.name, [f.name for f in ps.fields], f"'{label(path)}'")
            ctx.problem((*path, p.name), message, hint)
            ok = False
    for f in ps.fields:
        p = raw.get(f.name)
        if p is None:
            if f.required:
                ctx.problem(path, f"'{label(path)}' needs the setting '{f.name}' ({f.doc})")
                ok = False
            out[f.name] = f.default
            continue
        out[f.name] = _resolve(f, p.value, (*path, f.name), ctx)
        ok = ok and out[f.name] is not None
    return out if ok else None


def _map(ps: ParamSpec, raw, path, ctx) -> dict | None:
    what = "name" if ps.keys in ("", "names") else ps.keys
    if not isinstance(raw, ir.ParamBlock):
        ctx.problem(path, f"parameter '{label(path)}': expected a block of {what}: value, got {_type_name(raw)}")
        return None
    allowed = _map_keys(ps, ctx)
    kind = {"levels": "geography level", "tables": "table", "columns": "column"}.get(ps.keys, "key")
    if ps.keys == "columns" and ctx.table_columns(ps)[0]:
        kind = f"column of table '{ctx.table_columns(ps)[0]}'"
    out, ok = {}, True
    for p in raw.params:
        field = ps.field(p.name)  # a map's own setting, beside its keys
        if field is None and allowed is not None and p.name not in allowed:
            ctx.problem((*path, p.name), *_not_one(path, p.name, kind, allowed))
            ok = False
            continue
        declared = field if field is not None else ps.values
        out[p.name] = p.value if declared is None else _resolve(declared, p.value, (*path, p.name), ctx)
        ok = ok and out[p.name] is not None
    for f in ps.fields:
        if f.name not in out:
            if f.required:
                ctx.problem(path, f"'{label(path)}' needs the setting '{f.name}' ({f.doc})")
                ok = False
            out[f.name] = f.default
    return out if ok else None


def _not_one(path, name: str, kind: str, allowed) -> tuple[str, str | None]:
    """ "parameter 'tables.t1.rho': 'tribal' is not a geography level (known: ...)", and a did-you-mean."""
    _, hint = unknown(kind, name, allowed)
    known = f" (known: {', '.join(allowed)})" if len(allowed) <= 12 else ""
    return f"parameter '{label(path)}': '{name}' is not a {kind}{known}", hint


def _map_keys(ps: ParamSpec, ctx: _Context):
    if ps.keys == "levels":
        return ctx.levels
    if ps.keys == "tables":
        return tuple(ctx.tables)
    if ps.keys == "columns":
        return tuple(ctx.table_columns(ps)[1])
    if ps.keys == "choices":
        return tuple(ps.choices)
    return None


def _query(ps: ParamSpec, raw, path, ctx):
    """A query expression: the total (), a word of `choices`, or the tuple of its columns."""
    if not isinstance(raw, (str, ir.Name)):
        ctx.problem(
            path, f'parameter \'{label(path)}\': expected a query such as "{TOTAL}" or "a * b", got {_type_name(raw)}'
        )
        return None
    text = str(raw).strip()
    if text == TOTAL:
        return ()
    if text in ps.choices:
        return text
    table, columns = ctx.table_columns(ps)
    names = tuple(n.strip() for n in text.split("*"))
    for n in names:
        if n not in columns:
            message, hint = unknown("column", n, columns, f"table '{table}'" if table else None)
            ctx.problem(path, f"parameter '{label(path)}': {message}", hint)
            return None
    if len(set(names)) != len(names):
        ctx.problem(path, f"parameter '{label(path)}': the query '{text}' names a column twice")
        return None
    return names


def _repeated(block: ir.ParamBlock, fallback, where: str = "") -> list[Diagnostic]:
    """A setting written twice in one block, at any depth (the later one would silently win),
    located at its second occurrence."""
    out, first = [], {}
    for p in block.params:
        if p.name in first:
            line = first[p.name].loc.line if first[p.name].loc else None
            out.append(
                Diagnostic(
                    f"{where}'{p.name}' is given twice in one block" + (f" (first at line {line})" if line else ""),
                    *ir.line_column(p, fallback),
                )
            )
        first.setdefault(p.name, p)
        if isinstance(p.value, ir.ParamBlock):
            out.extend(_repeated(p.value, fallback, f"{where}{p.name}: "))
    return out


def _type_name(value) -> str:
    if isinstance(value, Fraction):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, ir.Name):
        return f"the name '{value.text}'"
    if isinstance(value, tuple):
        return "a list"
    if isinstance(value, ir.ParamBlock):
        return "a block"
    return type(value).__name__


def _coerce(ps: ParamSpec, raw, columns, tables: list, table: str | None = None):
    kind = ps.type
    if kind in ("number", "int"):
        if not isinstance(raw, Fraction):
            return None, f"expected a number, got {_type_name(raw)}"
        if kind == "int" and raw.denominator != 1:
            return None, f"expected a whole number, got {ir.format_number(raw)}"
        if (ps.low is not None and raw < ps.low) or (ps.high is not None and raw > ps.high):
            return None, f"{ir.format_number(raw)} is outside the allowed range {ps.describe_range()}"
        return (int(raw) if kind == "int" else raw), None
    if kind in ("column", "columns"):
        names = raw if isinstance(raw, tuple) else (raw,)
        if not all(isinstance(n, ir.Name) for n in names):
            return None, f"expected column names, got {_type_name(raw)}"
        if kind == "column" and len(names) != 1:
            return None, "expected one column, got a list"
        out = []
        for n in names:
            if n.text not in columns:
                return None, unknown("column", n.text, columns, f"table '{table}'" if table else None)
            out.append(n.text)
        return (out[0] if kind == "column" else tuple(out)), None
    if kind == "table":
        if not isinstance(raw, ir.Name):
            return None, f"expected a table name, got {_type_name(raw)}"
        if raw.text not in tables:
            return None, unknown("table", raw.text, tables)
        return raw.text, None
    if kind == "string":
        if isinstance(raw, (str, ir.Name)):
            return str(raw), None
        return None, f"expected a string, got {_type_name(raw)}"
    if kind == "choice":
        text = str(raw) if isinstance(raw, (str, ir.Name)) else None
        if text not in ps.choices:
            if text is None:
                return None, f"expected one of {', '.join(ps.choices)}"
            return None, unknown("value", text, ps.choices)
        return text, None
    if kind == "shares":
        if not isinstance(raw, ir.ParamBlock):
            return None, f"expected a block of name: number pairs, got {_type_name(raw)}"
        out = {}
        for p in raw.params:
            if not isinstance(p.value, Fraction):
                return None, f"'{p.name}' must be a number, got {_type_name(p.value)}"
            if p.value < 0:
                return None, f"'{p.name}' must not be negative"
            out[p.name] = p.value
        return out, None
    return raw, None
