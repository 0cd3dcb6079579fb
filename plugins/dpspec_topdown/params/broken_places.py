"""Where the spec writes what the data break: a DataError about a structural zero, an invariant,
an equality target, a constraint or a cross constraint cites the construct's file:line; one
about the geography, the spine or a node the failsafe cannot save cites the geography, the
spine's setting, or the level's budget share and the failsafe setting that was applied.

Why: the engine finds the break (a record in a structural-zero cell, a released product that
disagrees with an invariant) far from the spec, and names the geounit and cell; a reviewer then
needs the line to read, the construct the data contradict. The engine raises `locate.Broken`
naming each construct; `located` turns it, at the plugin's boundary, into a DataError whose
places are the constructs' entries in the spec (dpspec.errors.DataError).
"""

from __future__ import annotations

import contextlib

from dpspec.api import DataError, Diagnostic, SpecError, ir
from dpspec.api import located as located_at

from ..broken import Broken
from .tables import _invariants, _joint, _schema


@contextlib.contextmanager
def located(spec: ir.Spec, params: dict):
    """Run the block; a Broken raised in it becomes a DataError citing its constructs' lines."""
    try:
        yield
    except Broken as exc:
        raise DataError(exc.message, places(spec, params, exc.constructs), spec.path, spec.text) from None


def places(spec: ir.Spec, params: dict, constructs) -> list[Diagnostic]:
    """A Diagnostic (what is written, line, column) per construct the spec writes; a construct
    it cannot find (none should be) is left out rather than guessed."""
    out = []
    for kind, *key in constructs:
        found = _place(spec, params, kind, key)
        out.extend(d for d in found if d.line is not None)
    return out


def _place(spec: ir.Spec, params: dict, kind: str, key: list) -> list[Diagnostic]:
    if kind == "structural_zeros":
        table, name = key
        sub, under = _params_of(spec, params, table)
        return _written(spec, sub, under, kind, name, f"the structural zero '{name}'")
    if kind == "equal_to":
        return located_at(spec, [Diagnostic(f"equal_to '{key[0]}'", path=(kind, key[0]))])
    if kind == "constraints":
        return located_at(spec, [Diagnostic(f"the constraint '{key[0]}'", path=(kind, key[0]))])
    if kind == "cross_constraints":
        return located_at(spec, [Diagnostic(f"the cross constraint '{key[0]}'", path=(kind, key[0]))])
    if kind == "level":  # its budget share; a level without one is written in the geography only
        if key[0] not in params["levels"]:
            return _place(spec, params, "geography", [])
        return located_at(spec, [Diagnostic(f"the {key[0]} level's budget share", path=("levels", key[0]))])
    if kind == "spine":
        return located_at(spec, [Diagnostic(f"the spine's {key[0]} setting", path=("spine", key[0]))])
    if kind == "geography":
        geo = spec.domain.geography
        return [Diagnostic(f"the geography '{geo.name}'", *ir.line_column(geo))] if geo is not None else []
    if kind == "setting":
        return located_at(spec, [Diagnostic(f"'{key[0]}'", path=(key[0],))]) if params.get(key[0]) is not None else []
    if kind == "invariant":
        level, query = key
        return [
            _invariant(q)
            for q in _invariants_naming(spec, params, lambda lv, canon: (lv, canon) == (level, tuple(query)))
        ][:1]
    if kind == "recode_column":
        table, column = key
        sub, under = _params_of(spec, params, table)
        naming = _invariants_naming(spec, sub, lambda lv, canon: column in canon)[:1]
        return [*map(_invariant, naming), *_written(spec, sub, under, "recodes", column, f"the recode '{column}'")]
    return []


def _written(spec: ir.Spec, sub: dict, under: tuple, setting: str, name: str, what: str) -> list[Diagnostic]:
    """`what` at the entry `name` of `setting` (of the mechanism's table, or under a joint entry's
    path); none when the spec writes no such entry."""
    if name not in (sub.get(setting) or {}):
        return []
    return located_at(spec, [Diagnostic(what, path=(*under, setting, name))])


def _invariant(q) -> Diagnostic:
    return Diagnostic(f"the invariant '{q.describe()}'", *((q.loc.line, q.loc.column) if q.loc else (None, None)))


def _params_of(spec: ir.Spec, params: dict, table: str | None) -> tuple[dict, tuple]:
    """(settings, the path they are written under) of the mechanism's table (`table` None or its
    name) or of the joint entry or table named `table`; ({}, ()) when there is none."""
    if table is None or table == params["table"]:
        return params, ()
    return next(
        ((j["params"], ("joint", j["name"])) for j in _joint(spec, params) if table in (j["name"], j["table"])),
        ({}, ()),
    )


def _invariants_naming(spec: ir.Spec, params: dict, keep) -> list:
    """The spec's invariants on `params`' table whose (level, canonical query) `keep` accepts."""
    if not params:
        return []
    schema = _schema(spec, params)
    out = []
    for level, query, q in _invariants(spec, params)[0]:
        try:
            canon = tuple(schema.canonical(query))
        except SpecError:  # a factor it cannot keep is check's error; compare it as written
            canon = tuple(query)
        if keep(level, canon):
            out.append(q)
    return out
