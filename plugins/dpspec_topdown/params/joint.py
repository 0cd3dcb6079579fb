"""The settings that name further tables: the joint table solved beside the person table, its
cross constraints, and the side tables the run reads by geography."""

from __future__ import annotations

from dpspec.api import Diagnostic, SpecError, ir

from ..measurement.allocation import query_name
from .locate import inside
from .passes import _query_words
from .tables import _joint, _schema


def _joint_tables(spec: ir.Spec, params: dict) -> list[str]:
    """The joint tables' names (none while the joint block is in error: check reports it)."""
    try:
        return [j["table"] for j in _joint(spec, params)]
    except SpecError:
        return []


def _side_tables(spec: ir.Spec, params: dict) -> list[str]:
    """The further tables the run reads by geography: the facilities of `constraints`, the
    group-quarters types of `spine: gq_blockgroups`, the reference geography of `spine:
    geography` and the targets of `equal_to`. Their geography columns must read the declared
    geography file too: their blocks bound, split or fix the release's units, so a block known
    only from their records would shape the release."""
    names = [
        *(c["table"] for c in (params.get("constraints") or {}).values()),
        *(e["table"] for e in (params.get("equal_to") or {}).values()),
    ]
    spine = params.get("spine") or {}
    names += [
        *([spine["gq_blockgroups"]["table"]] if spine.get("gq_blockgroups") else []),
        *([spine["geography"]] if spine.get("geography") else []),
    ]
    own = {params["table"], *_joint_tables(spec, params)}
    return [n for n in dict.fromkeys(names) if n not in own and spec.domain.table(n) is not None]


def _cross_constraints(spec: ir.Spec, params: dict, joint: list[dict]) -> list[dict]:
    """``cross_constraints: { NAME: { left: "T: QUERY"  right: "U: QUERY = LABEL" } }``: at every
    unit, the left side's groups equal the right side's (joint.CrossConstraint). Each side names
    the mechanism's table or a joint one; a table not solved jointly is a located SpecError."""
    block = params.get("cross_constraints")
    if not block:
        return []
    schemas = {params["table"]: _schema(spec, params), **{j["table"]: j["schema"] for j in joint}}
    out = []
    for name, fields in block.items():
        sides = {}
        for which in ("left", "right"):
            text = fields[which]
            side = ("cross_constraints", name, which)
            table, sep, rest = text.partition(":")
            table = table.strip()
            if not sep:
                raise SpecError(
                    Diagnostic(
                        f"cross_constraints: '{name}': {which} side {text!r} must read "
                        '"TABLE: QUERY" or "TABLE: QUERY = LABEL"',
                        *inside(spec, side),
                    )
                )
            if table not in schemas:
                raise SpecError(
                    Diagnostic(
                        f"cross_constraints: '{name}': {which} side names table '{table}', which is not solved jointly "
                        f"(tables solved together: {', '.join(schemas)}; add it under joint)",
                        *inside(spec, side, table),
                    )
                )
            schema = schemas[table]
            query_text, eq, label = rest.partition("=")
            try:
                query = schema.canonical(_query_words(query_text.strip(), list(schema.names)))
            except SpecError as exc:
                raise SpecError(
                    [
                        Diagnostic(
                            f"cross_constraints: '{name}': {d.message}",
                            *inside(spec, side, query_text.strip(), after=":"),
                        )
                        for d in exc.diagnostics
                    ]
                ) from None
            pick = None
            if eq:
                if len(query) != 1:
                    raise SpecError(
                        Diagnostic(
                            f"cross_constraints: '{name}': '= LABEL' picks a group of a query of "
                            f"one variable or recode, not of {query_name(query)!r}",
                            *inside(spec, side, query_text.strip(), after=":"),
                        )
                    )
                axis, mapping, size = schema._factor(query[0])
                labels = (
                    [str(c) for c in schema.categories[axis]]
                    if mapping is None
                    else [str(lb) for lb in next(r.labels for r in schema.recodes if r.name == query[0])]
                )
                if label.strip() not in labels:
                    raise SpecError(
                        Diagnostic(
                            f"cross_constraints: '{name}': {label.strip()!r} is not a group of "
                            f"{query[0]!r} (groups: {', '.join(labels)})",
                            *inside(spec, side, label.strip(), after="="),
                        )
                    )
                pick = labels.index(label.strip())
            sides[which] = (table, query, pick, 1 if pick is not None else schema.marginal_size(query))
        right = ("cross_constraints", name, "right")
        if sides["left"][0] == sides["right"][0]:  # at the right side's table, the one repeating the left's
            raise SpecError(
                Diagnostic(
                    f"cross_constraints: '{name}' ties table '{sides['left'][0]}' to itself; "
                    "a constraint within one table is an invariant or a constraint",
                    *inside(spec, right, sides["right"][0]),
                )
            )
        if sides["left"][3] != sides["right"][3]:  # at the right side's query, the one paired against the left's
            query_text = str(fields["right"]).partition(":")[2].partition("=")[0].strip()
            raise SpecError(
                Diagnostic(
                    f"cross_constraints: '{name}': the left side has {sides['left'][3]} groups "
                    f"and the right side {sides['right'][3]}; they are paired in order",
                    *inside(spec, right, query_text, after=":"),
                )
            )
        out.append({"name": name, "left": sides["left"][:3], "right": sides["right"][:3], "n_groups": sides["left"][3]})
    return out


def _joint_names(joint: list[dict]) -> dict:
    """{joint name: its variables}: what a pass's "NAME: QUERY" may name."""
    return {j["name"]: list(j["variables"]) for j in joint}


def _tied_attributes(spec: ir.Spec, params: dict, joint: list[dict]) -> list[tuple]:
    """Pairs of attribute names (the mechanism's table's plain, a joint table's as 'TABLE: name')
    that a cross constraint equates at every unit: the variables under each side's factors."""
    schemas = {params["table"]: _schema(spec, params), **{j["table"]: j["schema"] for j in joint}}

    def names(side):
        table, query, _ = side
        schema = schemas[table]
        prefix = "" if table == params["table"] else f"{table}: "
        return [prefix + schema.names[schema._factor(f)[0]] for f in query]

    return [
        (a, b) for c in _cross_constraints(spec, params, joint) for a in names(c["left"]) for b in names(c["right"])
    ]
