"""The estimation and rounding passes a spec writes per level (estimation, rounding, constrain_to,
outer_passes), read from the core's plain values into query keys, and the path of the entry
that writes each pass (for the errors about its queries)."""

from __future__ import annotations

from fractions import Fraction

import attrs

from dpspec.api import Diagnostic, SpecError

from ..measurement.allocation import JOINT_MARK
from .tables import _query_key


def _query_words(item, variables) -> tuple:
    """A query written as a name (total, detailed, hhgq) or a string ("hhgq * hispanic")."""
    return _query_key(str(item).replace(" ", ""), variables)


def _passes(params: dict, variables, joint: dict | None = None) -> dict:
    """{level: {"estimation": [[query, ...], ...], "rounding": [...], "tolerance": t}}.

    Each of the ``estimation`` and ``rounding`` maps gives a level its passes: a block of
    named passes in order (``{ pass1: ["total"]  pass2: ["hhgq", "hhgq * hispanic"] }``) or one
    list (one pass; for estimation the remaining measured queries then form a last pass).
    ``constrain_to`` gives a level, per estimation pass in order, the queries whose answers
    later passes hold within the tolerance (production's L2_Constrain_to_Ordering; by default
    the queries the pass names). ``joint`` ({name: variables}): a query written "NAME: QUERY"
    is the joint table NAME's, keyed (JOINT_MARK + NAME, *factors). The values are the core's
    (maps, tuples); a query naming what is not a table's is `pass_query_problems`' error."""
    out: dict = {}
    tolerance = params.get("pass_tolerance")
    if tolerance is None:  # absent (the checker gives it as None): production's slack
        tolerance = Fraction(1, 10)
    tolerance_type = str(params.get("pass_tolerance_type") or "const")
    for what in ("estimation", "rounding", "constrain_to"):
        for level, value in (params.get(what) or {}).items():
            out.setdefault(level, {"tolerance": tolerance, "tolerance_type": tolerance_type})[what] = _pass_lists(
                value, variables, joint
            )
    for level, outers in (params.get("outer_passes") or {}).items():
        outer = [
            {"tolerance": tolerance, **{k: _pass_lists(v, variables, joint) for k, v in body.items() if v is not None}}
            for body in outers.values()
        ]
        out.setdefault(level, {"tolerance": tolerance, "tolerance_type": tolerance_type})["outer"] = outer
    return out


def pass_entries(params: dict):
    """(path, level, queries) of every pass the spec writes: the path of the entry writing it (a
    level's list, or a named pass of a level or of an outer pass), in the order written."""

    def entries(base, level, value):
        if isinstance(value, dict):
            for name, queries in value.items():
                yield (*base, name), level, queries
        else:
            yield base, level, value

    for what in ("outer_passes", "estimation", "rounding", "constrain_to"):
        for level, value in (params.get(what) or {}).items():
            if what != "outer_passes":
                yield from entries((what, level), level, value)
                continue
            for name, body in value.items():
                for part in ("estimation", "rounding", "constrain_to"):
                    if body.get(part) is not None:
                        yield from entries((what, level, name, part), level, body[part])


def pass_query_problems(params: dict, schema, joint: list[dict]) -> list[Diagnostic]:
    """The first query of a pass that names a table not solved jointly, or factors that are not
    its table's variables or recodes, at the pass entry writing it; a level's outer passes
    that are empty, at the level."""
    for level, outers in (params.get("outer_passes") or {}).items():
        if not outers:
            return [Diagnostic(f"outer_passes: '{level}' needs a block of outer passes", path=("outer_passes", level))]
    names = {j["name"]: list(j["variables"]) for j in joint}
    schemas = {JOINT_MARK + j["name"]: j["schema"] for j in joint}
    for path, _, queries in pass_entries(params):
        for q in queries:
            try:
                key = _pass_query(q, list(schema.names), names)
                if key[:1] and key[0] in schemas:
                    schemas[key[0]].canonical(key[1:])
                else:
                    schema.canonical(key)
            except SpecError as exc:
                return [attrs.evolve(d, path=path) for d in exc.diagnostics]
    return []


def pass_level_path(params: dict, level: str) -> tuple:
    """The path of the level's first entry in the spec's pass settings."""
    return next(
        (
            (what, level)
            for what in ("outer_passes", "estimation", "rounding", "constrain_to")
            if level in (params.get(what) or {})
        ),
        (),
    )


def _pass_lists(value, variables, joint: dict | None = None) -> list:
    """Passes as lists of query keys: a map of named passes in order, or one list."""
    groups = list(value.values()) if isinstance(value, dict) else [value]
    return [[_pass_query(q, variables, joint or {}) for q in g] for g in groups]


def _pass_query(item, variables, joint: dict) -> tuple:
    """A query of a pass: the mechanism table's, or "NAME: QUERY" of the joint table NAME."""
    name, sep, rest = str(item).partition(":")
    if sep and name.strip() in joint:
        return (JOINT_MARK + name.strip(), *_query_words(rest.strip(), joint[name.strip()]))
    if sep:
        raise SpecError(
            f"passes: {str(item)!r} names table {name.strip()!r}, which is not a joint table "
            f"({', '.join(joint) or 'none'})"
        )
    return _query_words(item, variables)
