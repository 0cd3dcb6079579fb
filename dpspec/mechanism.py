"""What a mechanism plugin provides: typed parameters, native flavor, invariants, budget, run.

A plugin subclasses `Mechanism` and returns instances from the `dpspec_mechanisms` hook. The
core validates a spec's `mechanism` block against `parameters`, then calls the methods below
with the resolved parameter values (a plain dict), so plugins never re-parse the IR.
"""
from __future__ import annotations

from fractions import Fraction
from typing import Any

import attrs

from dpspec import ir
from dpspec.diagnostics import unknown
from dpspec.errors import Diagnostic

PARAM_TYPES = ("number", "int", "column", "columns", "table", "string", "choice", "shares", "block")


@attrs.frozen
class ParamSpec:
    """One declared parameter.

    type: number (exact Fraction), int, column (a column of `table_param`'s table or of any
    table), columns (one or more), table, string, choice (one of `choices`), shares (a block of
    name: number, e.g. budget shares), block (free-form, checked by the plugin itself).
    """

    name: str
    type: str
    doc: str
    default: Any = None
    required: bool = False
    low: Fraction | None = None
    high: Fraction | None = None
    choices: tuple[str, ...] = ()

    def describe_range(self) -> str:
        if self.low is None and self.high is None:
            return ""
        low = ir.format_number(self.low) if self.low is not None else "-inf"
        high = ir.format_number(self.high) if self.high is not None else "inf"
        return f"[{low}, {high}]"


@attrs.frozen
class ParameterSchema:
    params: tuple[ParamSpec, ...]

    def get(self, name: str) -> ParamSpec | None:
        return next((p for p in self.params if p.name == name), None)

    def to_json(self) -> list[dict]:
        out = []
        for p in self.params:
            item = {"name": p.name, "type": p.type, "doc": p.doc, "required": p.required}
            if p.default is not None:
                item["default"] = ir.to_jsonable(p.default)
            if p.low is not None or p.high is not None:
                item["range"] = [ir.to_jsonable(p.low), ir.to_jsonable(p.high)]
            if p.choices:
                item["choices"] = list(p.choices)
            out.append(item)
        return out


@attrs.frozen
class NativeFlavor:
    """The flavor a mechanism satisfies by construction: a relation on one table's units and a
    premetric. The compiler converts its budget to the spec's declared flavor (and says how)."""

    table: str
    relation: str  # "hamming" or "symdiff"
    premetric: str  # "pure", "approx", "zcdp", "renyi", "gdp"


@attrs.frozen
class Release:
    """What a run produced.

    outputs: the published frames by name (microdata tables use their table's name).
    facts: public facts the report may show (functions of the invariants, parameters).
    internal: figures computed against the confidential data (utility); never in the public
    report.
    """

    outputs: dict[str, Any]
    facts: dict[str, Any] = attrs.Factory(dict)
    internal: dict[str, Any] = attrs.Factory(dict)
    notes: tuple[str, ...] = ()


class Mechanism:
    """Base class for mechanism plugins; override the methods, keep the signatures."""

    name: str = ""
    version: str = "0"
    description: str = ""
    parameters: ParameterSchema = ParameterSchema(())
    outputs: dict[str, str] = {}

    def check(self, spec: ir.Spec, params: dict) -> list[Diagnostic]:
        """Extra semantic checks beyond the schema (e.g. columns disjoint). Return problems."""
        return []

    def flavor(self, spec: ir.Spec, params: dict) -> NativeFlavor:
        raise NotImplementedError

    def induced_invariants(self, spec: ir.Spec, params: dict) -> list[ir.CountQuery]:
        """Statistics this mechanism publishes exactly for these parameters."""
        return []

    def public_facts(self, spec: ir.Spec, params: dict, data: dict) -> dict:
        """Facts the budget depends on; must be functions of the invariants (or public)."""
        return {}

    def budget(self, spec: ir.Spec, params: dict, facts: dict):
        """A `dpspec.budget.BudgetStatement` under `flavor()`."""
        raise NotImplementedError

    def run(self, spec: ir.Spec, params: dict, data: dict, rng) -> Release:
        """Produce the release. A plugin may add a keyword parameter `engine=None`: it then
        receives a `dpspec.engine.EngineRun` (map over units of work with keyed streams, count,
        read Parquet) and runs on whichever engine the user chose; without it, `run` is called
        as before and runs in this process."""
        raise NotImplementedError

    def utility(self, spec: ir.Spec, params: dict, data: dict, releases: list) -> dict:
        """Optional: figures over repeated runs against the confidential data (internal only)."""
        return {}


# ---- resolving a mechanism block against its schema ---------------------------------------


def _loc_of(param: ir.Param | None, fallback: ir.Loc | None) -> tuple[int | None, int | None]:
    loc = (param.loc if param is not None else None) or fallback
    return (loc.line, loc.column) if loc else (None, None)


def _all_columns(spec: ir.Spec) -> dict[str, list[str]]:
    cols: dict[str, list[str]] = {}
    if spec.domain:
        for t in spec.domain.tables:
            for c in t.columns:
                cols.setdefault(c.name, []).append(t.name)
    return cols


def resolve_params(mechanism: Mechanism, call: ir.MechanismCall, spec: ir.Spec) -> tuple[dict, list[Diagnostic]]:
    """Validate a mechanism block against the plugin's schema; returns (values, problems)."""
    schema = mechanism.parameters
    values: dict = {}
    problems: list[Diagnostic] = []
    given = {p.name: p for p in call.params.params}
    for p in call.params.params:
        if schema.get(p.name) is None:
            message, hint = unknown("parameter", p.name, [s.name for s in schema.params], f"mechanism '{mechanism.name}'")
            problems.append(Diagnostic(message, *_loc_of(p, call.loc), hint=hint))
    columns = _all_columns(spec)
    tables = [t.name for t in spec.domain.tables] if spec.domain else []
    for ps in schema.params:
        p = given.get(ps.name)
        if p is None:
            if ps.required:
                problems.append(Diagnostic(f"mechanism '{mechanism.name}' needs the parameter '{ps.name}' ({ps.doc})", *_loc_of(None, call.loc)))
            values[ps.name] = ps.default
            continue
        value, problem = _coerce(ps, p.value, columns, tables)
        if problem:
            message, hint = problem if isinstance(problem, tuple) else (problem, None)
            problems.append(Diagnostic(f"parameter '{ps.name}': {message}", *_loc_of(p, call.loc), hint=hint))
        values[ps.name] = value
    return values, problems


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


def _coerce(ps: ParamSpec, raw, columns: dict, tables: list):
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
                return None, unknown("column", n.text, columns)
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
