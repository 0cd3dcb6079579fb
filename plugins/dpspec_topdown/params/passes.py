"""The estimation and rounding passes a spec writes per level (estimation, rounding, constrain_to,
outer_passes), read into query keys, and where in the spec text a pass names a query."""
from __future__ import annotations

from fractions import Fraction

from dpspec.api import Diagnostic, SpecError, ir

from ..measurement.allocation import JOINT_MARK
from .locate import at
from .tables import _query_key


def _query_words(item, variables) -> tuple:
    """A query written as a name (total, detailed, hhgq) or a string ("hhgq * hispanic")."""
    return _query_key(str(item).replace(" ", ""), variables)


def _passes(params: dict, variables, joint: dict | None = None) -> dict:
    """{level: {"estimation": [[query, ...], ...], "rounding": [...], "tolerance": t}}.

    Each of the ``estimation`` and ``rounding`` blocks maps a level to its passes: a block of
    named passes in order (``{ pass1: ["total"]  pass2: ["hhgq", "hhgq * hispanic"] }``) or one
    list (one pass; for estimation the remaining measured queries then form a last pass).
    ``constrain_to`` maps a level to, per estimation pass in order, the queries whose answers
    later passes hold within the tolerance (production's L2_Constrain_to_Ordering; by default
    the queries the pass names). ``joint`` ({name: variables}): a query written "NAME: QUERY"
    is the joint table NAME's, keyed (JOINT_MARK + NAME, *factors)."""
    out: dict = {}
    tolerance = params.get("pass_tolerance")
    if tolerance is None:  # absent (the checker gives it as None): production's slack
        tolerance = Fraction(1, 10)
    tolerance_type = str(params.get("pass_tolerance_type") or "const")
    for what in ("estimation", "rounding", "constrain_to"):
        block = params.get(what)
        if block is None:
            continue
        if not isinstance(block, ir.ParamBlock):
            raise SpecError(f"{what}: expected a block such as {{ county: [\"total\"] }}")
        for p in block.params:
            out.setdefault(p.name, {"tolerance": tolerance, "tolerance_type": tolerance_type})[what] = _pass_lists(
                p.value, variables, joint)
    block = params.get("outer_passes")
    if block is not None:
        if not isinstance(block, ir.ParamBlock):
            raise SpecError("outer_passes: expected a block such as { county: { outer1: { estimation: ... } } }")
        for p in block.params:
            loc = (p.loc.line, p.loc.column) if p.loc else (None, None)
            if not isinstance(p.value, ir.ParamBlock) or not p.value.params:
                raise SpecError(Diagnostic(f"outer_passes: '{p.name}' needs a block of outer passes", *loc))
            outer = []
            for o in p.value.params:
                body = {q.name: q.value for q in o.value.params} if isinstance(o.value, ir.ParamBlock) else {}
                extra = [q for q in o.value.params if q.name not in ("estimation", "rounding", "constrain_to")] if body else []
                if not {"estimation", "rounding"} <= set(body) or extra:
                    raise SpecError(Diagnostic(f"outer_passes: '{p.name}' outer pass '{o.name}' needs estimation and "
                                               "rounding passes (and may have constrain_to)"
                                               + (f", not '{extra[0].name}'" if extra else ""), *at(extra[0] if extra else o)))
                outer.append({"tolerance": tolerance, **{k: _pass_lists(v, variables, joint) for k, v in body.items()}})
            out.setdefault(p.name, {"tolerance": tolerance, "tolerance_type": tolerance_type})["outer"] = outer
    return out


def _pass_query_loc(params: dict, level: str | None, message: str) -> tuple:
    """(line, column) of the pass entry (``estimation: [...]``, ``rounding: [...]``, at any depth
    under the level, or under any level when `level` is None) that an error is about: the one
    writing the query of a "query 'X' names ..." error or the item of a "passes: 'X' names table"
    one, or the ``constrain_to`` entry of a "constrain_to at level" one; (None, None) if none."""
    import re

    query = re.match(r"query '([^']+)' names", message)
    item = re.match(r"passes: '([^']+)' names table", message)
    if query:
        want = " * ".join(w.strip() for w in query.group(1).split("*"))

        def writes(value) -> bool:
            items = value if isinstance(value, tuple) else (value,)
            return any(not isinstance(v, ir.ParamBlock) and
                       " * ".join(w.strip() for w in str(v).rpartition(":")[2].split("*")) == want for v in items)
    elif item:
        def writes(value) -> bool:
            return any(str(v) == item.group(1) for v in (value if isinstance(value, tuple) else (value,)))
    elif message.startswith("constrain_to at level"):
        writes = None
    else:
        return None, None

    def search(block):
        for p in block.params:
            if writes is None and p.name == "constrain_to" and p.loc:
                return p.loc.line, p.loc.column
            if isinstance(p.value, ir.ParamBlock):
                hit = search(p.value)
                if hit:
                    return hit
            elif writes is not None and writes(p.value) and p.loc:
                return p.loc.line, p.loc.column
        return None

    for what in ("outer_passes", "estimation", "rounding", "constrain_to"):
        block = params.get(what)
        for p in block.params if isinstance(block, ir.ParamBlock) else ():
            if level is None or p.name == level:
                if writes is None and what == "constrain_to" and p.loc:
                    return p.loc.line, p.loc.column
                hit = search(p.value) if isinstance(p.value, ir.ParamBlock) else (
                    (p.loc.line, p.loc.column) if writes is not None and writes(p.value) and p.loc else None)
                if hit:
                    return hit
    return None, None


def _pass_level_loc(params: dict, level: str) -> tuple:
    """(line, column) of the level's entry in the spec's pass blocks, (None, None) if none."""
    for what in ("outer_passes", "estimation", "rounding", "constrain_to"):
        block = params.get(what)
        for p in block.params if isinstance(block, ir.ParamBlock) else ():
            if p.name == level and p.loc:
                return p.loc.line, p.loc.column
    return None, None


def _pass_lists(value, variables, joint: dict | None = None) -> list:
    """Passes as lists of query keys: a block of named passes in order, or one list."""
    groups = [g.value for g in value.params] if isinstance(value, ir.ParamBlock) else [value]
    return [[_pass_query(q, variables, joint or {}) for q in (g if isinstance(g, tuple) else (g,))] for g in groups]


def _pass_query(item, variables, joint: dict) -> tuple:
    """A query of a pass: the mechanism table's, or "NAME: QUERY" of the joint table NAME."""
    name, sep, rest = str(item).partition(":")
    if sep and name.strip() in joint:
        return (JOINT_MARK + name.strip(), *_query_words(rest.strip(), joint[name.strip()]))
    if sep:
        raise SpecError(f"passes: {str(item)!r} names table {name.strip()!r}, which is not a joint table "
                        f"({', '.join(joint) or 'none'})")
    return _query_words(item, variables)
