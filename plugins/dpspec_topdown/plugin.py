"""The `topdown` mechanism: the 2020 Census TopDown algorithm as a dpspec plugin.

The spec names the person table, the histogram variables (enumerated columns), the total rho
and its split over geographic levels (`levels`) and over queries (`queries`: one block for every
level, or one block per level). Geography comes from the domain's hierarchy; the root level may
be given a share under the name `nation`. The spec's declared invariants on the person table
are enforced exactly and are the mechanism's induced invariants: an invariant it cannot keep
(a column that is neither a level nor a histogram variable) is a check error.
"""
from __future__ import annotations

from fractions import Fraction

from dpspec.api import (Diagnostic, Mechanism, MechanismError, NativeFlavor, OutputKeys, ParamSpec, ParameterSchema, Release,
                        SpecError, declared_values, ir, progress)

from .allocation import JOINT_MARK, allocate, query_name, split_allocation
from .declared_geography import check_flags, check_structure, declared_geography, problems as geography_problems
from .locate import at, item_at
from .tables import (ROOT, _block, _entry_settings, _invariant_recodes, _invariants, _joint, _levels, _query_key, _recode_value,
                     _recodes, _schema, _shares_loc, _strategy, _structural_zeros, _variables)
from .wording import counted

__version__ = "1.0.0"


def _bound_categories(spec: ir.Spec, params: dict) -> dict:
    """What a constraint may bound: each histogram variable's categories and each recode's group
    labels (production bounds persons per block on gqlevels, a recode of the detailed GQ types)."""
    variables = _variables(spec, params)
    return {**variables, **{r.name: list(r.labels) for r in _recodes(params, variables, spec)}}


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


def _at_setting(spec: ir.Spec, d: Diagnostic) -> Diagnostic:
    """A diagnostic without a line, placed at the mechanism setting its message starts with
    ("failsafe: ...", "joint: ..."), so a reviewer is sent to the setting, not the mechanism line."""
    if d.line is not None or spec.mechanism is None:
        return d
    name = d.message.split(":", 1)[0].split(" ", 1)[0]
    p = spec.mechanism.params.get(name)
    return Diagnostic(d.message, p.loc.line, p.loc.column) if p is not None and p.loc else d


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


def _equalities(spec: ir.Spec, params: dict) -> list[dict]:
    """``equal_to: { NAME: { table: T  query: "hhgq * votingage" } }``: the release's marginal
    `query` (factors: variables or recodes) must reproduce T, an already released product
    (equality.py). T is a table of the domain with the finest level and one column per factor,
    and it must be declared public (`public { count T by block, hhgq, votingage released "..." }`):
    the guarantee is then stated as conditioned on it. What the spec alone decides about the
    target (its columns, its groups against the invariants') is a SpecError (equality_check.py)."""
    from .equality_check import check_target

    block = _block(params, "equal_to", '{ pl94: { table: pl94_release  query: "hhgq * votingage" } }')
    if block is None:
        return []
    geo = spec.domain.geography.levels if spec.domain.geography else []
    finest = geo[-1] if geo else None
    schema = _schema(spec, params)
    out = []
    for p in block.params:
        loc = (p.loc.line, p.loc.column) if p.loc else (None, None)
        settings, fields = _entry_settings(p)
        if set(fields) != {"table", "query"}:
            extra = sorted(set(fields) - {"table", "query"})
            missing = [f for f in ("table", "query") if f not in fields]
            raise SpecError(Diagnostic(f"equal_to: '{p.name}' needs {{ table: TABLE  query: \"a * b\" }}"
                                       + (f", not '{extra[0]}'" if extra else f", missing {' and '.join(missing)}"),
                                       *(at(settings[extra[0]]) if extra else loc)))
        table_name = str(fields["table"])
        try:
            query = schema.canonical(_query_words(fields["query"], list(schema.names)))
        except SpecError as exc:
            import re

            def where(message):
                unknown = re.search(r"names \['([^']+)'", message)
                return item_at(spec, settings["query"], unknown.group(1) if unknown else None)

            raise SpecError([Diagnostic(f"equal_to: '{p.name}': {d.message}", *where(d.message))
                             for d in exc.diagnostics]) from None
        table = spec.domain.table(table_name)
        need = [finest, *query]
        lacking = [c for c in need if table is not None and table.column(c) is None]
        if table is None or table_name == params["table"] or lacking:
            why = f" ('{table_name}' has no column {', '.join(lacking)})" if lacking and table_name != params["table"] else ""
            raise SpecError(Diagnostic(f"equal_to: '{p.name}' reads '{table_name}', which must be a second table of the "
                                       f"domain with columns {', '.join(need)} (the released product){why}",
                                       *(item_at(spec, settings["query"], lacking[-1]) if why and lacking[-1] != finest
                                         else item_at(spec, settings["table"], table_name))))
        public = any(info.query.table == table_name and set(info.query.columns) == set(need) for info in spec.public)
        if not public:
            declared = [info.query.describe() for info in spec.public if info.query.table == table_name]
            have = (f"; the public statistics of '{table_name}' are {'; '.join(declared)}, none by exactly "
                    f"{', '.join(need)}" if declared else f"; no public statistic of '{table_name}' is declared")
            raise SpecError(Diagnostic(f"equal_to: '{p.name}' holds the release's {' * '.join(query)} at every "
                                       f"{finest} equal to table '{table_name}', which must be a released product"
                                       f"{have}: declare it, public {{ count {table_name} by {', '.join(need)} "
                                       f"released \"...\" }}, or name the query of the one declared",
                                       *item_at(spec, settings["table"], table_name)))
        check_target(spec, p.name, settings, table_name, query, schema, _invariants(spec, params)[0], ROOT)
        out.append({"name": p.name, "table": table_name, "query": query, "finest": finest})
    return out


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
    only from their records would shape the release. Read from the settings as written (their
    own checks report a malformed entry)."""
    def tables_in(name, nested):
        block = params.get(name)
        if not isinstance(block, ir.ParamBlock):
            return []
        entries = [p.value for p in block.params if isinstance(p.value, ir.ParamBlock)] if nested else [block]
        return [str(q.value) for e in entries for q in e.params if q.name == "table"]

    names = [*tables_in("constraints", True), *tables_in("equal_to", True)]
    spine = params.get("spine")
    if isinstance(spine, ir.ParamBlock):
        for p in spine.params:
            if p.name == "gq_blockgroups" and isinstance(p.value, ir.ParamBlock):
                names += [str(q.value) for q in p.value.params if q.name == "table"]
            elif p.name == "geography":
                names.append(str(p.value))
    own = {params["table"], *_joint_tables(spec, params)}
    return [n for n in dict.fromkeys(names) if n not in own and spec.domain.table(n) is not None]


def _cross_constraints(spec: ir.Spec, params: dict, joint: list[dict]) -> list[dict]:
    """``cross_constraints: { NAME: { left: "T: QUERY"  right: "U: QUERY = LABEL" } }``: at every
    unit, the left side's groups equal the right side's (joint.CrossConstraint). Each side names
    the mechanism's table or a joint one; a table not solved jointly is a located SpecError."""
    block = _block(params, "cross_constraints",
                   '{ h1: { left: "households: total"  right: "units: occupancy = occupied" } }')
    if block is None:
        return []
    schemas = {params["table"]: _schema(spec, params), **{j["table"]: j["schema"] for j in joint}}
    out = []
    for p in block.params:
        loc = at(p)
        settings, fields = _entry_settings(p)
        if set(fields) != {"left", "right"}:
            extra = sorted(set(fields) - {"left", "right"})
            missing = [f for f in ("left", "right") if f not in fields]
            raise SpecError(Diagnostic(f"cross_constraints: '{p.name}' needs {{ left: \"TABLE: QUERY\"  "
                                       "right: \"TABLE: QUERY = LABEL\" }"
                                       + (f", not '{extra[0]}'" if extra else f", missing {' and '.join(missing)}"),
                                       *(at(settings[extra[0]]) if extra else loc)))
        sides = {}
        for which in ("left", "right"):
            text = str(fields[which])
            side = settings[which]
            table, sep, rest = text.partition(":")
            table = table.strip()
            if not sep:
                raise SpecError(Diagnostic(f"cross_constraints: '{p.name}': {which} side {text!r} must read "
                                           "\"TABLE: QUERY\" or \"TABLE: QUERY = LABEL\"", *at(side)))
            if table not in schemas:
                raise SpecError(Diagnostic(
                    f"cross_constraints: '{p.name}': {which} side names table '{table}', which is not solved jointly "
                    f"(tables solved together: {', '.join(schemas)}; add it under joint)", *item_at(spec, side, table)))
            schema = schemas[table]
            query_text, eq, label = rest.partition("=")
            try:
                query = schema.canonical(_query_words(query_text.strip(), list(schema.names)))
            except SpecError as exc:
                raise SpecError([Diagnostic(f"cross_constraints: '{p.name}': {d.message}",
                                            *item_at(spec, side, query_text.strip(), after=":"))
                                 for d in exc.diagnostics]) from None
            pick = None
            if eq:
                if len(query) != 1:
                    raise SpecError(Diagnostic(f"cross_constraints: '{p.name}': '= LABEL' picks a group of a query of "
                                               f"one variable or recode, not of {query_name(query)!r}",
                                               *item_at(spec, side, query_text.strip(), after=":")))
                axis, mapping, size = schema._factor(query[0])
                labels = ([str(c) for c in schema.categories[axis]] if mapping is None
                          else [str(lb) for lb in next(r.labels for r in schema.recodes if r.name == query[0])])
                if label.strip() not in labels:
                    raise SpecError(Diagnostic(f"cross_constraints: '{p.name}': {label.strip()!r} is not a group of "
                                               f"{query[0]!r} (groups: {', '.join(labels)})",
                                               *item_at(spec, side, label.strip(), after="=")))
                pick = labels.index(label.strip())
            sides[which] = (table, query, pick, 1 if pick is not None else schema.marginal_size(query))
        right = settings["right"]
        if sides["left"][0] == sides["right"][0]:  # at the right side's table, the one repeating the left's
            raise SpecError(Diagnostic(f"cross_constraints: '{p.name}' ties table '{sides['left'][0]}' to itself; "
                                       "a constraint within one table is an invariant or a constraint",
                                       *item_at(spec, right, sides["right"][0])))
        if sides["left"][3] != sides["right"][3]:  # at the right side's query, the one paired against the left's
            query_text = str(fields["right"]).partition(":")[2].partition("=")[0].strip()
            raise SpecError(Diagnostic(f"cross_constraints: '{p.name}': the left side has {sides['left'][3]} groups "
                                       f"and the right side {sides['right'][3]}; they are paired in order",
                                       *item_at(spec, right, query_text, after=":")))
        out.append({"name": p.name, "left": sides["left"][:3], "right": sides["right"][:3],
                    "n_groups": sides["left"][3], "loc": loc})
    return out


def _joint_names(joint: list[dict]) -> dict:
    """{joint name: its variables}: what a pass's "NAME: QUERY" may name."""
    return {j["name"]: list(j["variables"]) for j in joint}


def _is_joint_key(query: tuple) -> bool:
    return bool(query) and str(query[0]).startswith(JOINT_MARK)


def _only_queries(alloc, queries):
    import attrs

    return attrs.evolve(alloc, queries=tuple(queries))


def _postprocess_only(spec: ir.Spec, params: dict) -> dict:
    """{"postprocess_only": names, "postprocess_feasible": levels} from ``postprocess_only: [NAME, ...]``,
    ``postprocess_heuristics: true`` and ``postprocess_require_feasible: [LEVEL, ...]`` (production's
    postprocess_only_constr_names, use_postprocess_heuristics, require_feasible_postproc_dim);
    a located SpecError when one comes without the other or names what is not declared."""
    def loc(name):
        p = spec.mechanism.params.get(name) if spec.mechanism is not None else None
        return (p.loc.line, p.loc.column) if p is not None and p.loc else (None, None)

    def names(name):
        value = params.get(name)
        if value is None:
            return None
        items = value if isinstance(value, tuple) else (value,)
        if not items or not all(isinstance(v, (ir.Name, str)) for v in items):
            example = "[hhgq_total_ub, hhgq_total_lb]" if name == "postprocess_only" else "[state, county]"
            raise SpecError(Diagnostic(f"{name}: expected a list of names, e.g. {example}", *loc(name)))
        return [str(v) for v in items]

    def item(name, value, occurrence=1):
        return item_at(spec, spec.mechanism.params.get(name) if spec.mechanism is not None else None, value,
                       occurrence=occurrence)

    only, feasible = names("postprocess_only"), names("postprocess_require_feasible")
    switch = params.get("postprocess_heuristics")
    if only is None and feasible is None and switch in (None, "false"):
        return {}  # production's default; a list without the switch is refused (geo_optimizers.py:50-51)
    if only is None or switch != "true":
        at = (("postprocess_only" if switch is None else "postprocess_heuristics") if only is not None else
              next(n for n in ("postprocess_heuristics", "postprocess_require_feasible") if params.get(n) is not None))
        raise SpecError(Diagnostic("postprocess_only and postprocess_heuristics: true go together (production applies "
                                   "post-processing-only constraints only with its heuristics on)", *loc(at)))
    if params.get("joint") is not None:  # before the names: a joint spec's cross constraints are not candidates
        raise SpecError(Diagnostic("postprocess_only: not available with joint tables (production's interleaved "
                                   "optimizer, which solves them, has no post-processing-only constraints)",
                                   *loc("postprocess_only")))
    declared = [p.name for p in params["constraints"].params] if isinstance(params.get("constraints"), ir.ParamBlock) else []
    bad = [n for n in only if n not in declared]
    twice = [n for n in only if only.count(n) > 1]
    if bad or twice:
        what = (f"names {', '.join(map(repr, bad))}, which is not a declared constraint" if bad
                else f"names the constraint '{twice[0]}' twice")
        raise SpecError(Diagnostic(f"postprocess_only {what} (declared: {', '.join(declared) or 'none'})",
                                   *item("postprocess_only", (bad or twice)[0], 1 if bad else 2)))
    levels = _levels(spec)
    bad = [lv for lv in feasible or () if lv not in levels]
    if bad:
        raise SpecError(Diagnostic(f"postprocess_require_feasible names {', '.join(map(repr, bad))}, not a geography "
                                   f"level (known: {', '.join(levels)})", *item("postprocess_require_feasible", bad[0])))
    idle = [lv for lv in feasible or () if lv not in params["levels"]]
    if idle:  # no node is solved there, so the requirement would silently do nothing
        raise SpecError(Diagnostic(f"postprocess_require_feasible names {', '.join(map(repr, idle))}, which has no "
                                   f"budget share, so no node is solved there (levels with one: "
                                   f"{', '.join(params['levels'])})", *item("postprocess_require_feasible", idle[0])))
    return {"postprocess_only": only, "postprocess_feasible": feasible or []}


def _postprocess_notes(report: dict | None) -> tuple:
    """The run log's lines on the heuristic: the rows it could not repair."""
    if not report:
        return ()
    from .postprocess_only import describe

    broken = report["violations"]
    if not broken:
        return (f"post-processing-only constraints: {counted(sum(report['moves'].values()), 'record')} moved; every row holds",)
    return (f"post-processing-only constraints: {counted(sum(report['moves'].values()), 'record')} moved; {counted(len(broken), 'row')} "
            "left broken in the release (facts: postprocess_only.violations)", *map(describe, broken[:20]))


def _failsafe(params: dict, spec: ir.Spec | None = None) -> list[str] | None:
    """``failsafe: { minimal_schema: [hhgq] }``: the minimal schema's variables (production's
    `minimalSchema`, person_default.ini:81), or None when the spec asks for no failsafe."""
    block = params.get("failsafe")
    if block is None:
        return None
    loc = (None, None)
    fields = {}
    if isinstance(block, ir.ParamBlock):
        fields = {q.name: q for q in block.params}
        first = block.params[0] if block.params else None
        loc = (first.loc.line, first.loc.column) if first is not None and first.loc else loc
    if set(fields) != {"minimal_schema"}:
        extra = [q for q in block.params if q.name != "minimal_schema"] if isinstance(block, ir.ParamBlock) else []
        raise SpecError(Diagnostic("failsafe: expected { minimal_schema: [VARIABLE, ...] }"
                                   + (f", not '{extra[0].name}'" if extra else ""), *(at(extra[0]) if extra else loc)))
    if params.get("joint") is not None:  # refused here, at its line, not only when the run starts
        raise SpecError(Diagnostic("failsafe: not available with a joint table (production's interleaved optimizer, "
                                   "which solves the joint tables, has no failsafe); remove it or the joint block", *loc))
    value = fields["minimal_schema"].value
    names = [str(v) for v in (value if isinstance(value, tuple) else (value,))]
    bad = [n for n in names if n not in params["variables"]]
    if bad or not names:
        raise SpecError(Diagnostic(f"failsafe: minimal_schema names {', '.join(bad) or 'nothing'}; it needs histogram "
                                   f"variables (known: {', '.join(params['variables'])})",
                                   *(item_at(spec, fields["minimal_schema"], bad[0]) if bad else loc)))
    return names


def _guarantee_notes(spec: ir.Spec, params: dict) -> list[str]:
    """What a reviewer needs beside the figure: which records one unit's change covers (a joint
    table's), what the release repeats exactly (equality targets), which cells no dataset of the
    domain may fill (structural zeros) and which constraints are post-processing only."""
    notes = []
    table = params["table"]
    for j in _joint(spec, params):
        notes.append(f"the table '{j['table']}' is measured with the same rho beside '{table}' (its queries are in "
                     f"the allocation): the budget covers a change of one '{table}' record together with one "
                     f"'{j['table']}' record, such as a housing unit and the household living in it")
    for e in _equalities(spec, params):
        notes.append(f"equal_to '{e['name']}': the release's {' * '.join(e['query'])} equals the public table "
                     f"'{e['table']}' at every {e['finest']} (and so above it); that table's own budget, if it "
                     "came from the same people, is not counted here")
    zeros = [(table, list(_structural_zeros(params, _variables(spec, params), _schema(spec, params).recodes)))]
    zeros += [(j["table"], list(j["structural_zeros"])) for j in _joint(spec, params)]
    for name, sets in zeros:
        if sets:
            notes.append(f"structural zeros of '{name}': {len(sets)} cell set{'s' if len(sets) > 1 else ''} "
                         f"({', '.join(sets[:3])}{', ...' if len(sets) > 3 else ''}) held at zero at every level; a "
                         "dataset with a record in one is refused, so the guarantee covers only datasets without such "
                         "records")
    only = _postprocess_only(spec, params).get("postprocess_only")
    if only:
        notes.append(f"constraints {', '.join(only)} are not in the least-squares fits: they are enforced after "
                     "them by moving records (post-processing of the noisy measurements and the invariants: "
                     "no budget)")
    return notes


def _tied_attributes(spec: ir.Spec, params: dict, joint: list[dict]) -> list[tuple]:
    """Pairs of attribute names (the mechanism's table's plain, a joint table's as 'TABLE: name')
    that a cross constraint equates at every unit: the variables under each side's factors."""
    schemas = {params["table"]: _schema(spec, params), **{j["table"]: j["schema"] for j in joint}}

    def names(side):
        table, query, _ = side
        schema = schemas[table]
        prefix = "" if table == params["table"] else f"{table}: "
        return [prefix + schema.names[schema._factor(f)[0]] for f in query]

    return [(a, b) for c in _cross_constraints(spec, params, joint)
            for a in names(c["left"]) for b in names(c["right"])]


def _split_levels(spec: ir.Spec, spine: dict) -> list[str]:
    """The geography levels the spine splits, top first."""
    geo = list(spec.domain.geography.levels)
    split = set(geo[:-1]) if "aian" in spine else set()
    if "gq_blockgroups" in spine:
        split.add(geo[-2])
    return [lv for lv in geo if lv in split]


def _split_invariant_problems(spec: ir.Spec, params: dict, spine: dict) -> list:
    """Invariants a split spine cannot keep: at a split level below the first (engine's
    _check_split_invariants, here located at the invariant)."""
    split = _split_levels(spec, spine)
    if not split:
        return []
    geo = list(spec.domain.geography.levels)
    out = []
    for q in spec.invariants:
        if q.table == params["table"] and set(split[1:]) & set(q.columns):
            out.append(Diagnostic(f"with a split spine, TopDown keeps '{q.describe()}' only at {split[0]} (on the sum "
                                  f"of its parts) or at {geo[-1]}", *((q.loc.line, q.loc.column) if q.loc else (None, None))))
    return out


def _unnested_invariant_problems(spec: ir.Spec, params: dict) -> list:
    """The invariants on `params`' table whose query does not nest with an earlier one's, at the
    later invariant's line (the engine's chain rule, invariant_chain.py, decided here from the spec)."""
    from .invariant_chain import unnested, why

    schema = _schema(spec, params)
    written = {}  # canonical query: the first invariant writing it
    for _, query, q in _invariants(spec, params)[0]:
        try:
            written.setdefault(schema.canonical(query), q)
        except SpecError:  # a query it cannot keep is reported where the engine meets it
            continue
    queries = list(written)
    pair = unnested(queries)
    if pair is None:
        return []
    earlier, later = queries[pair[0]], queries[pair[1]]
    first, q = written[earlier], written[later]
    line = f" (line {first.loc.line})" if first.loc else ""
    return [Diagnostic(f"invariants: '{q.describe()}' does not nest with '{first.describe()}'{line}: "
                       + why(earlier, later, schema), *((q.loc.line, q.loc.column) if q.loc else (None, None)))]


def _aian_split_levels(spec: ir.Spec, spine: dict) -> list[str]:
    """The levels the AIAN spine measures as two parts: its split level down to the finest's
    parent (none without the split)."""
    if "aian" not in spine:
        return []
    geo = list(spec.domain.geography.levels)
    return geo[geo.index(spine["aian"][0]):-1]


def _query_labels(spec: ir.Spec, params: dict, alloc=None) -> dict:
    """{(level, canonical query): the query as the spec writes it}: a joint table's queries as
    'table: query' (any of ``alloc``'s not written so, by their factors)."""
    schema = _schema(spec, params)
    variables = list(schema.names)
    labels = {(lv, schema.canonical(_query_key(p.name, variables))): " * ".join(p.name.split("*"))
              for lv, block in _query_blocks(params) for p in block.params}
    for j in _joint(spec, params):  # a joint table's queries as its own queries block writes them
        names = list(j["schema"].names)
        blocks = _query_blocks({"queries": j["params"]["queries"], "levels": params["levels"]})
        for lv, block in blocks:
            for p in block.params:
                key = (JOINT_MARK + j["name"], *j["schema"].canonical(_query_key(p.name, names)))
                labels[(lv, key)] = f"{j['name']}: " + " * ".join(w.strip() for w in p.name.split("*"))
    for qb in (alloc.queries if alloc is not None else ()):
        if qb.query[:1] and str(qb.query[0]).startswith(JOINT_MARK) and (qb.level, qb.query) not in labels:
            labels[(qb.level, qb.query)] = f"{qb.query[0][1:]}: {query_name(qb.query[1:])}"
    return labels


def _relation(spec: ir.Spec, params: dict) -> str:
    """Sensitivity is computed for the spec's relation when the unit is the person table."""
    return spec.unit.relation if spec.unit and spec.unit.table == params["table"] else "symdiff"


def _recode_columns(spec: ir.Spec, params: dict) -> list:
    """The recodes the invariants name as table columns (each is released as a column too)."""
    recodes = _invariant_recodes(spec, params) if params.get("recodes") is not None else {}
    return list(dict.fromkeys(c for _, query, _ in _invariants(spec, params)[0] for c in query
                              if c in recodes and c not in params["variables"]))


def _check_recode_invariant_columns(spec: ir.Spec, params: dict, table, engine) -> None:
    """Each invariant factor that is a recode: the data column of its name is the recode of its
    variable in every record (a DataError otherwise)."""
    from .engine import table_counts
    from .recode_invariants import check_recode_column

    recodes = _invariant_recodes(spec, params) if params.get("recodes") is not None else {}
    finest = _levels(spec)[-1]
    for c in _recode_columns(spec, params):
        r = recodes[c]
        categories = _variables(spec, {"table": params["table"], "variables": [r.variable]})[r.variable]
        check_recode_column(table_counts(table, [finest, r.variable, c], engine), finest, c, r, categories,
                            params["table"])


class TopDown(Mechanism):
    name = "topdown"
    version = __version__
    description = ("The 2020 Census TopDown algorithm: integer noise from a discrete Gaussian (bell-shaped) "
                   "distribution on every count of every geographic unit, then, from the nation down, the "
                   "nonnegative whole-number counts closest to the noisy ones (least squares) that keep the invariants.")
    proof = 'Abowd et al. (2022), The 2020 Census Disclosure Avoidance System TopDown Algorithm, Harvard Data Science Review: zCDP of the discrete Gaussian measurements (Canonne, Kamath & Steinke 2020) composed over levels and queries (Bun & Steinke 2016); estimation and rounding are post-processing'
    sampling = "exact: integer noise from Canonne, Kamath & Steinke's (2020) discrete Gaussian rejection sampler on integers and rationals (dpspec.api.discrete_gaussian), no floating point"
    parameters = ParameterSchema((
        ParamSpec("table", "table", "the person table", required=True),
        ParamSpec("variables", "columns", "the histogram variables (enumerated, boolean or integer-range columns)", required=True),
        ParamSpec("rho", "number", "the total zCDP budget", required=True, low=Fraction(0)),
        ParamSpec("levels", "shares", "share of rho per geographic level ('nation' is the root); must sum to 1", required=True),
        ParamSpec("queries", "block", "share of each level's rho per query (total, detailed, or var*var); "
                  "one block for all levels or one per level; must sum to 1", required=True),
        ParamSpec("recodes", "block", "query factors that group one variable's categories: "
                  "NAME: { of: VARIABLE  LABEL: [values] ... }, a partition of the variable"),
        ParamSpec("estimation", "block", "least-squares passes per level: { county: [total] } fits the total "
                  "first and then the other queries, keeping earlier answers within pass_tolerance"),
        ParamSpec("rounding", "block", "rounding passes per level: { county: { pass1: [\"total\"]  pass2: [\"hhgq\", \"hhgq * hispanic\"] } } "
                  "keeps each pass's margins within floor/ceil of the fit, then fixes them"),
        ParamSpec("outer_passes", "block", "interleaved outer passes per level: { county: { outer1: { estimation: "
                  "{ pass1: [\"total\"] }  rounding: { pass1: [\"total\"] } }  outer2: { ... } } }: each outer pass fits "
                  "and rounds its queries, then its last rounding pass's answers are fixed exactly for the next; with a joint table a "
                  "pass names its queries as \"NAME: QUERY\""),
        ParamSpec("constrain_to", "block", "per level and estimation pass, the queries later passes hold within "
                  "pass_tolerance: { county: { pass1: [\"total\", \"hhgq\"] } } (default: the queries the pass names)"),
        ParamSpec("pass_tolerance", "number", "how far a later estimation pass may move earlier passes' answers "
                  "(production: 1/10); with pass_tolerance_type: opt_tol, the slack added to the LP-optimal tolerance",
                  low=Fraction(0)),
        ParamSpec("pass_tolerance_type", "choice", "const: later passes hold earlier answers within pass_tolerance; "
                  "opt_tol: within the LP-optimal tolerance plus pass_tolerance (production's opt_tol, opt_tol_slack)",
                  choices=("const", "opt_tol")),
        ParamSpec("structural_zeros", "block", "cells that must be 0 everywhere, e.g. { nurse_nva_0: { hhgq: [3]  "
                  "votingage: [0] } } (a recode may stand for its variable, its group labels for the categories in them); "
                  "data with a record there is rejected"),
        ParamSpec("constraints", "block", "bounds on persons per block from a second table, e.g. { hhgq_total_lb_ub: "
                  "{ of: hhgq  table: facilities  type: gqtype  occupied: [1, 2] } }: none of a type the block "
                  "lacks, at least one per occupied facility (sense: upper or lower keeps one side); its counts "
                  "by block and type must be invariants"),
        ParamSpec("spine", "block", "the geographic spine, as production ran it: { aian: COLUMN } splits the state "
                  "(the first level) and the levels below it but the finest into their parts inside and outside "
                  "AIAN areas (COLUMN: 1 inside), measured separately; the state invariant holds on the parts' sum"),
        ParamSpec("equal_to", "block", "hold the release to a product already released: { pl94: { table: T  query: "
                  "\"hhgq * votingage\" } } keeps that marginal equal to T's at every finest unit (T declared public; T's columns "
                  "take exactly the factors' groups, and the marginal's groups nest with every invariant's below the root)"),
        ParamSpec("joint", "block", "further tables solved with this one in one problem per node: { units: { table: units  "
                  "variables: vacs  queries: { total: 1/4 } } }; their query shares and this table's sum to 1 per level; a joint "
                  "table may have its own recodes and structural_zeros"),
        ParamSpec("cross_constraints", "block", "equalities across jointly solved tables at every unit: { h1: { left: "
                  "\"households: total\"  right: \"units: occupancy = occupied\" } }"),
        ParamSpec("failsafe", "block", "production's failsafe: { minimal_schema: [hhgq] } re-solves a node that has no "
                  "solution with its children sums relaxed, the sums over the other variables kept exact"),
        ParamSpec("postprocess_only", "block", "constraints left out of every solve and repaired after each node's "
                  "rounding (production's postprocess_only_constr_names): [hhgq_total_ub, hhgq_total_lb]; needs "
                  "postprocess_heuristics: true"),
        ParamSpec("postprocess_heuristics", "choice", "production's use_postprocess_heuristics: true repairs the "
                  "postprocess_only constraints by moving records within a child", choices=("true", "false")),
        ParamSpec("postprocess_require_feasible", "block", "levels where a record may also change the structural "
                  "zeros' other variable and a row left broken stops the run (production's "
                  "require_feasible_postproc_dim): [state, county]"),
        ParamSpec("workers", "int", "solver processes (default: all cores)", low=Fraction(1), high=Fraction(256)),
    ))
    outputs = {
        "microdata": "privacy-protected person records (geography and histogram variables); named after the table",
        "measurements": "the noisy measurements: level, geocode, query, cell, value, variance",
        "joint_measurements": "with a joint table (joint: {...}): its noisy measurements, as measurements "
                              "(its microdata is named after its table)",
    }
    engine_tables = True  # a Parquet person table stays on the engine: TopDown only counts it

    def check(self, spec, params):
        problems = []
        table = spec.domain.table(params["table"])
        if spec.domain.geography is None:
            return [Diagnostic("TopDown needs a geography hierarchy in the domain (geography NAME { state > county ... })")]
        for level in spec.domain.geography.levels:
            if table.column(level) is None:
                problems.append(Diagnostic(f"table '{table.name}' has no column for geography level '{level}'"))
        variables_at = spec.mechanism.params.get("variables") if spec.mechanism is not None else None
        twice = sorted({n for n in params["variables"] if list(params["variables"]).count(n) > 1})
        if twice:
            problems.append(Diagnostic(f"variables: '{twice[0]}' is listed twice",
                                       *item_at(spec, variables_at, twice[0], occurrence=2)))
        for name in params["variables"]:
            col = table.column(name)
            if col is None:
                problems.append(Diagnostic(f"histogram variable '{name}' is not a column of table '{table.name}'"))
            elif col.type.kind == "category":
                problems.append(Diagnostic(f"histogram variable '{name}' must have a declared value set (enumerated, bool or int range), not an open category"))
            elif name in spec.domain.geography.levels:
                problems.append(Diagnostic(f"'{name}' is a geography level, not a histogram variable"))
        known = set(_levels(spec))
        levels_at = spec.mechanism.params.get("levels") if spec.mechanism is not None else None
        for level in params["levels"]:
            if level not in known:
                entry = levels_at.value.get(level) if levels_at is not None and isinstance(levels_at.value, ir.ParamBlock) else None
                problems.append(Diagnostic(f"levels: '{level}' is not a geography level (known: {', '.join(_levels(spec))})",
                                           *at(entry or levels_at)))
        if not isinstance(params["queries"], ir.ParamBlock):
            problems.append(Diagnostic("queries: expected a block such as { total: 1/2  detailed: 1/2 }"))
        if problems:
            return problems
        try:
            flag = _spine(spec, params).get("aian", (None, None))[1]
        except SpecError:  # reported below, at the spine's setting
            flag = None
        # A spec that reads no records for a table (a description, such as one imported from a
        # production configuration) cannot leak its units through them: it cannot be run until its
        # data are declared, and then the declared geography is required (the run refuses too).
        tables = [params["table"], *_joint_tables(spec, params), *_side_tables(spec, params)]
        read = [t for t in tables if any(d.table == t for d in spec.data)]
        problems.extend(geography_problems(spec, read, flag))
        _, inv_problems = _invariants(spec, params)
        problems.extend(inv_problems)
        try:
            _spine(spec, params)  # first: a bad flag column is the spine's error, not the joint table's
            try:
                alloc = self._allocation(spec, params)
            except SpecError as exc:  # shares that do not sum to 1: at the level's line of the shares
                raise SpecError([d if d.line is not None else Diagnostic(d.message, *_shares_loc(spec, params, d.message))
                                 for d in exc.diagnostics]) from None
            problems.extend(_sampler_problems(spec, params, alloc))
            from .multipass import pass_plan

            schema = _schema(spec, params)
            _structural_zeros(params, _variables(spec, params), schema.recodes)
            from .constraints import facility_constraints

            facility_constraints(spec, params, _bound_categories(spec, params))
            problems.extend(_split_invariant_problems(spec, params, _spine(spec, params)))
            for table_params in [params, *(j["params"] for j in _joint(spec, params))]:
                problems.extend(_unnested_invariant_problems(spec, table_params))
            _equalities(spec, params)
            _failsafe(params, spec)
            _postprocess_only(spec, params)
            _cross_constraints(spec, params, _joint(spec, params))
            joint = _joint(spec, params)
            try:
                passes = _passes(params, list(schema.names), _joint_names(joint))
            except SpecError as exc:  # a pass naming a table that is not joint: at the entry writing it
                raise SpecError([d if d.line is not None else Diagnostic(d.message, *_pass_query_loc(params, None, d.message))
                                 for d in exc.diagnostics]) from None
            for level, plan in passes.items():
                if level not in params["levels"]:
                    what = "outer_passes" if params.get("outer_passes") is not None else "estimation/rounding passes"
                    why = (f"level '{level}', which has no budget share (levels with one: {', '.join(params['levels'])})"
                           if level in _levels(spec) else
                           f"'{level}', which is not a geography level (known: {', '.join(_levels(spec))})")
                    raise SpecError(Diagnostic(f"{what} name {why}", *_pass_level_loc(params, level)))
                try:
                    if joint:  # outer passes over both tables (joint_passes.py)
                        from .joint_passes import joint_pass_plan

                        main, other = split_allocation(alloc, joint[0]["name"])
                        joint_pass_plan(level, plan, schema, main, joint[0]["schema"], other, joint[0]["name"],
                                        groups=False)
                    else:
                        pass_plan(level, plan, schema, alloc, groups=False)  # names checked; arrays at run time
                except SpecError as exc:  # at the pass naming the query, else the level's line of its passes
                    level_at = _pass_level_loc(params, level)
                    raise SpecError([d if d.line is not None else Diagnostic(
                        d.message, *next((x for x in [_pass_query_loc(params, level, d.message)] if x[0] is not None), level_at))
                        for d in exc.diagnostics]) from None
        except SpecError as exc:
            problems.extend(_at_setting(spec, d) for d in exc.diagnostics)
        return problems

    def _allocation(self, spec, params):
        """The allocation over every measured query; a joint table's queries are keyed
        ("@NAME", *factors) and share each level's budget with the mechanism's table's."""
        variables = _variables(spec, params)
        schema = _schema(spec, params)
        strategy = {lv: [(schema.canonical(q), s) for q, s in entries]
                    for lv, entries in _strategy(params, _levels(spec), list(variables)).items()}
        for j in _joint(spec, params):
            for lv, entries in j["strategy"].items():
                strategy[lv] = strategy[lv] + [((JOINT_MARK + j["name"], *q), s) for q, s in entries]
        return allocate(params["rho"], params["levels"], strategy, _relation(spec, params),
                        names=_query_labels(spec, params))

    def flavor(self, spec, params):
        return NativeFlavor(params["table"], _relation(spec, params), "zcdp")

    def output_keys(self, spec, params):
        """The microdata (the person table's and any joint table's) are records; their geography
        columns, and the release tables counted from them, range over the declared geography.
        The measurements' level and geocode are not domain columns: `run` checks them against
        the declared hierarchy itself (declared_geography.check_structure)."""
        return {name: OutputKeys(name, records=True) for name in [params["table"], *_joint_tables(spec, params)]}

    def induced_invariants(self, spec, params):
        invariants, problems = _invariants(spec, params)
        for j in _joint(spec, params):  # a joint table's invariants are kept on its release too
            more, extra = _invariants(spec, j["params"])
            invariants, problems = invariants + more, problems + extra
        return [] if problems else [q for _, _, q in invariants]

    def budget(self, spec, params, facts):
        from dpspec.api import BudgetStatement, ZCDP

        alloc = self._allocation(spec, params)
        notes = [f"rho = {ir.format_number(alloc.rho)} split over geographic levels in shares "
                 + ", ".join(f"{lv} {ir.format_number(s)}" for lv, s in alloc.level_shares.items()),
                 f"L2 sensitivity squared s^2 = {alloc.queries[0].sensitivity2} per query under {alloc.relation} "
                 "(the sum of the squared changes one record can make to a query's counts); each query's noise "
                 "variance is s^2 / (2 rho_q), rho_q being that query's share of rho"]
        spine = _spine(spec, params)
        if "aian" in spine:
            notes.append(f"spine: each {spine['aian'][0]} and the levels below it are measured as their AIAN and "
                         f"non-AIAN parts (flag '{spine['aian'][1]}'), each part with its level's share")
        if "bypass" in spine:
            notes.append(f"spine: single-child units of {', '.join(spine['bypass'])} are measured once with their "
                         "child's share added (the child not at all); every block's geounits still spend rho")
        notes.extend(_guarantee_notes(spec, params))
        if alloc.rho_spent != alloc.total_rho:
            notes.append(f"noise variances were rounded up to exact rationals: the noise costs rho = "
                         f"{float(alloc.rho_spent):.12g}, within the stated {float(alloc.total_rho):.12g}")
        return BudgetStatement.fixed(ZCDP(alloc.total_rho), *notes)  # exact

    def budget_breakdown(self, spec, params):
        """The allocation an auditor re-derives: one row per (level, query)."""
        alloc = self._allocation(spec, params)
        labels = _query_labels(spec, params, alloc)
        out = {"allocation": allocation_rows(alloc, labels)}
        spine = _spine(spec, params)
        if "bypass" in spine:
            out.setdefault("spine", {})["bypass"] = bypass_rows(alloc, _levels(spec), spine["bypass"], labels)
        if "aian" in spine:
            level, column = spine["aian"]
            split = _aian_split_levels(spec, spine)
            out.setdefault("spine", {})["aian"] = {
                "column": column, "split_levels": split,
                "geounit_classes": [{"class": f"{part} part", "levels": split,
                                     "budget": "the level's share (the allocation rows of the level)"}
                                    for part in ("AIAN", "non-AIAN")],
                "invariants": f"held at {level} on the sum of each unit's two parts, never on a part"}
        return out

    def expected_error(self, spec, params, facts):
        """Per (level, query): the variance of each noisy measurement, from the allocation alone
        (the discrete Gaussian's exact variance at its sigma²); post-processing is not included."""
        return [{"table": f"{row['level']}: {row['query']}", "level": row["level"], "query": row["query"],
                 "variance": float(row["noise_variance"]), "of": "noisy measurement, before post-processing"}
                for row in self.budget_breakdown(spec, params)["allocation"]]

    def semantics(self, spec, params):
        """Per-attribute and per-geography rho, as the P.L. 94-171 certificates account them."""
        from .allocation import split_allocation
        from .semantics import across_split_rho, attribute_rhos, geography_rhos, tied_attribute_rhos

        alloc = self._allocation(spec, params)
        # per attribute of each table (a joint table's as 'TABLE: attribute'): a table's queries
        # read only its own attributes, but a cross constraint ties attributes across tables; per
        # geography every query counts (a record moved between blocks moves its joint records too)
        own = _only_queries(alloc, [q for q in alloc.queries if not _is_joint_key(q.query)])
        labels = _query_labels(spec, params, alloc)  # queries named as the allocation names them
        joint = _joint(spec, params)
        if joint:
            parts = [("", own, _schema(spec, params), labels)]
            for j in joint:
                mark = JOINT_MARK + j["name"]
                _, theirs = split_allocation(alloc, j["name"])
                stripped = {(lv, q[1:]): name for (lv, q), name in labels.items() if q[:1] == (mark,)}
                parts.append((f"{j['table']}: ", theirs, j["schema"], stripped))
            attributes = tied_attribute_rhos(parts, _tied_attributes(spec, params, joint))
        else:
            attributes = attribute_rhos(own, _schema(spec, params), labels)
        out = {"attributes": attributes, "geographies": geography_rhos(alloc, _levels(spec))}
        across = across_split_rho(alloc, _levels(spec), _aian_split_levels(spec, _spine(spec, params)))
        if across is not None:  # additive: the AIAN spine's parts are measured apart
            out["across_split"] = across
        return out

    def run(self, spec, params, data, rng, engine=None):
        from .broken_places import located

        with located(spec, params):  # data that break a construct: the DataError cites its line
            return self._run(spec, params, data, rng, engine)

    def _run(self, spec, params, data, rng, engine=None):
        import pandas as pd  # lazily, with the engine: `dpspec check` needs neither

        from .engine import run_topdown, table_counts

        from dpspec.api import EngineTable

        variables = _variables(spec, params)
        invariants, _ = _invariants(spec, params)
        persons = data[params["table"]]
        _check_recode_invariant_columns(spec, params, persons, engine)
        for j in _joint(spec, params):
            _check_recode_invariant_columns(spec, j["params"], data[j["table"]], engine)
        from .constraints import facility_bounds_from_counts, facility_constraints

        spine = _spine(spec, params)
        bounds = []
        categories = _bound_categories(spec, params)
        for con in facility_constraints(spec, params, categories):
            lower, upper = facility_bounds_from_counts(con, table_counts(data[con["table"]], [con["finest"], con["type"]], engine),
                                           categories[con["of"]])
            bounds.append((con["name"], (con["of"],), lower, upper))
        def records(table, names):
            if isinstance(table, EngineTable):  # held by the engine: counted there, never collected
                return table
            return pd.DataFrame({c: table[c].astype(object) if c in names else table[c]
                                 for c in [*spec.domain.geography.levels, *names, *(
                                     [spine["aian"][1]] if "aian" in spine else [])]})

        frame = records(persons, variables)
        joint = _joint_table(spec, params, data, records)
        declared = declared_geography(spec, params["table"], spine.get("aian", (None, None))[1])
        if "aian" in spine:  # every table's copy of the flag agrees with the geography file's
            flag = spine["aian"][1]
            for name in dict.fromkeys([params["table"], *_joint_tables(spec, params), spine.get("geography")]):
                if name is not None and name in data and flag in data[name].columns:
                    check_flags(name, data[name], declared, spec.domain.geography.levels[-1], flag, engine)
        result = run_topdown(
            frame, _levels(spec), variables,
            _strategy(params, _levels(spec), list(variables)), params["rho"], params["levels"],
            _relation(spec, params), [(lv, q) for lv, q, _ in invariants], rng,
            recodes=_schema(spec, params).recodes, passes=_passes(params, list(variables), _joint_names(_joint(spec, params))),
            structural_zeros=_structural_zeros(params, variables, _schema(spec, params).recodes), bounds=bounds,
            progress=lambda stage, done, total: progress.report(f"{stage} level", done, total),
            workers=params.get("workers"), engine=engine, aian=spine.get("aian"),
            bypass=spine.get("bypass", ()), gq_signature=_gq_signature(spine, data, engine),
            equalities=[(e["name"], e["query"], table_counts(data[e["table"]], [e["finest"], *e["query"]], engine))
                        for e in _equalities(spec, params)],
            failsafe=_failsafe(params), joint=joint, **_postprocess_only(spec, params),
            reference_geography=(table_counts(data[spine["geography"]], [*spec.domain.geography.levels, *(
                [spine["aian"][1]] if "aian" in spine else [])], engine) if "geography" in spine else None),
            declared_geography=declared,
        )
        measurements = result.measurements_table()
        check_structure(result.hierarchy, declared, measurements, result.budget_classes)
        derived = _recode_columns(spec, params)  # recodes the input carries as columns are released too
        categories = _categories(spec, persons, [*variables, *derived])  # the input's codes: invariants compare exactly
        tables = [persons] + [data[j["table"]] for j in _joint(spec, params)]
        geo_categories = _geography_categories(spec, tables) if len(tables) > 1 else {}
        categories.update(geo_categories)
        # both tables are streamed: written chunk by chunk, counted from the protected histograms
        micro = result.microdata_table(categories, recode_columns=derived)
        errors = accuracy(spec, params, result)
        timings = {lv: {k: v for k, v in t.items() if isinstance(v, (int, float, bool))} for lv, t in result.timings["levels"].items()}
        failsafe = {lv: t["failsafe_nodes"] for lv, t in timings.items() if t.get("failsafe_nodes")}
        outputs = {params["table"]: micro, "measurements": measurements}
        for j in _joint(spec, params):  # a joint table's release: its microdata and its measurements
            other = result.joint[j["name"]]
            jderived = _recode_columns(spec, j["params"])
            outputs[j["table"]] = other.microdata_table({**_categories(spec, data[j["table"]], [*j["variables"], *jderived]),
                                                         **geo_categories}, recode_columns=jderived)
            outputs["joint_measurements"] = other.measurements_table()
        return Release(
            outputs=outputs,
            facts={"total_rho": float(result.total_rho), "rho_spent": float(result.rho_spent),
                   "solver_share": result.timings["solver_share"], "timings": timings,
                   # production's failsafe: nodes whose later pass had no solution, redone in one pass
                   "failsafe_nodes": failsafe, **_spine_facts(result),
                   # production's post-processing-only constraints: records moved per level, rows the
                   # heuristic left broken at a node, and what the release still breaks
                   **({"postprocess_only": result.timings["postprocess"]} if "postprocess" in result.timings else {})},
            internal={"errors": errors},
            notes=_postprocess_notes(result.timings.get("postprocess")),
        )

    def release_columns(self, spec, params):
        """The measurements `likelihood` reads: one row per (level, geocode, query, cell), and each
        row's variance the one its (level, query) gets from the allocation (or a bypass class's)."""
        from dpspec.api import ReleaseColumns, discrete_gaussian_variance

        alloc = self._allocation(spec, params)
        allowed = {}
        for q in alloc.queries:
            allowed.setdefault((q.level, q.name), set()).add(discrete_gaussian_variance(q.sigma2))
        spine = _spine(spec, params)
        if "bypass" in spine:
            for row in bypass_rows(alloc, _levels(spec), spine["bypass"], {})["classes"]:
                allowed.setdefault((row["level"], row["query"]), set()).add(row["noise_variance"])

        def implied(frame):
            from .likelihood import variances_agree

            return {"variance": variances_agree(frame, allowed)}

        return {"measurements": ReleaseColumns(("level", "geocode", "query", "cell", "value", "variance"),
                                               key=("level", "geocode", "query", "cell"),
                                               numbers=("cell", "value", "variance"), implied=implied)}

    def likelihood(self, spec, params, outputs):
        from .likelihood import measurement_likelihoods

        return measurement_likelihoods(spec, params, outputs)

    def utility(self, spec, params, data, releases):
        import pandas as pd

        runs = [r.internal["errors"] for r in releases]
        table = pd.concat([pd.DataFrame(r) for r in runs])
        summary = table.groupby(["level", "query"], sort=False)["mean_absolute_error"].agg(["mean", "std"]).reset_index()
        return {
            "runs": len(releases),
            "error_by_level_and_query": [
                {"level": row.level, "query": row.query, "mean_absolute_error": float(row["mean"]),
                 "sd_over_runs": float(row["std"]) if len(releases) > 1 else None}
                for _, row in summary.iterrows()
            ],
        }

    def neighbours(self, spec, params):
        """Miniature neighbours and batched noisy measurements for `dpspec verify`."""
        from .neighbours import topdown_pairs

        return topdown_pairs(self, spec, params, _variables, ROOT, recodes=_schema(spec, params).recodes)


def _joint_table(spec, params: dict, data, records):
    """The engine's JointTable for the spec's joint table (at most one), or None."""
    from .engine import JointTable

    joint = _joint(spec, params)
    if not joint:
        return None
    (j,) = joint
    invariants, problems = _invariants(spec, j["params"])
    if problems:
        raise SpecError(problems)
    cross = []
    for c in _cross_constraints(spec, params, joint):
        left, right = (c["left"], c["right"]) if c["left"][0] == params["table"] else (c["right"], c["left"])
        cross.append((c["name"], left[1], left[2], right[1], right[2], c["n_groups"]))
    return JointTable(j["name"], records(data[j["table"]], j["variables"]), j["variables"], j["strategy"],
                      recodes=j["schema"].recodes, invariants=[(lv, q) for lv, q, _ in invariants], cross=cross,
                      structural_zeros=j["structural_zeros"])


def _categories(spec, table, names) -> dict:
    """The input's categorical dtypes per column, so the release's codes compare exactly."""
    import pandas as pd

    from dpspec.api import EngineTable

    out = {}
    for col in [*spec.domain.geography.levels, *names]:
        dtype = table.dtype(col) if isinstance(table, EngineTable) else table[col].dtype if col in table.columns else None
        if isinstance(dtype, pd.CategoricalDtype):
            out[col] = dtype
    return out


def _geography_categories(spec, tables) -> dict:
    """Jointly solved tables share one geography: a unit of either may hold records of both in
    the release, so each geography column's categories are the union of the tables' (if any)."""
    import pandas as pd

    out = {}
    for col in spec.domain.geography.levels:
        found = [_categories(spec, t, [])[col] for t in tables if col in _categories(spec, t, [])]
        if found:
            values = pd.Index([])
            for dtype in found:
                values = values.union(pd.Index(dtype.categories))
            out[col] = pd.CategoricalDtype(values)
    return out


def _gq_signature(spine: dict, data, engine):
    """Each finest unit's group-quarters types present (spine.gq_signatures), or None."""
    gq = spine.get("gq_blockgroups")
    if gq is None:
        return None
    from .engine import table_counts
    from .spine import gq_signatures

    counts = table_counts(data[gq["table"]], [gq["finest"], gq["type"]], engine)
    return gq_signatures(counts, gq["finest"], gq["type"], gq["types"])


def _spine_facts(result) -> dict:
    import numpy as np

    """The spine the run measured on: per split level, its units and how many were split."""
    split = {lv.name: {"parts": lv.n_units, "units": len(set(lv.labels)),
                       "split_units": lv.n_units - len(set(lv.labels))}
             for lv in result.hierarchy.levels if lv.labels is not None}
    out = {"split_spine": split} if split else {}
    if result.budget_classes:  # units per budget class: "0" spends the level's share, "bypassed" nothing
        out["bypass_spine"] = {
            level: {("bypassed" if c < 0 else str(int(c))): int(n) for c, n in zip(*np.unique(cls, return_counts=True))}
            for level, (cls, _, _) in result.budget_classes.items()}
    return out


def _query_blocks(params: dict):
    """(level, block of query shares) for every measured level."""
    block = params["queries"]
    per_level = all(isinstance(p.value, ir.ParamBlock) for p in block.params) and block.params
    for level in params["levels"]:
        inner = block.get(level) if per_level else None
        yield level, (inner.value if inner is not None else block)


def bypass_rows(alloc, levels: list[str], bypass: list[str], labels: dict) -> dict:
    """The optimized spine's budget classes: for every bypass level, a unit whose single-child
    chain reaches `through` spends the shares of its level down to that one (spine.py), each
    query at its own level's query share; its chain's units spend nothing. One row per (class,
    query) with exact fractions; the rows of class 0 are the allocation's own."""
    from dpspec.api import discrete_gaussian_variance, effective_sigma2

    from .spine import class_share

    shares = [alloc.level_shares.get(lv, Fraction(0)) for lv in levels]
    rows = []
    for level in bypass:
        k = levels.index(level)
        depth = 0
        while k + depth + 1 < len(levels) and (depth == 0 or levels[k + depth] in bypass):
            depth += 1
            share = class_share(shares, k, depth)
            for q in alloc.for_level(level):
                rho_q = alloc.rho * share * q.share
                sigma2 = effective_sigma2(Fraction(q.sensitivity2) / (2 * rho_q))
                rows.append({"level": level, "through": levels[k + depth], "class": depth,
                             "query": labels.get((q.level, q.query), q.name), "level_share": str(share),
                             "rho": float(rho_q), "rho_exact": str(rho_q), "sigma2_exact": str(sigma2),
                             "variance": float(sigma2), "noise_variance": discrete_gaussian_variance(sigma2)})
    return {"levels": list(bypass), "classes": rows,
            "note": "a bypassed unit (the single child) spends nothing; every block's geounits still spend rho"}


def _sampler_problems(spec, params, alloc) -> list[Diagnostic]:
    """The query with the most noise, when its sigma² is beyond what the exact sampler draws: refused
    at `check`, at the rho line, in the sampler's words (sigma² grows as 1/rho)."""
    from dpspec.api import sampler_limit_problem

    if not alloc.queries:
        return []
    widest = max(alloc.queries, key=lambda q: q.sigma2)
    problem = sampler_limit_problem("discrete_gaussian", widest.sigma2, ("rho", params["rho"]))
    if problem is None:
        return []
    return [Diagnostic(f"topdown: the noise of query '{widest.name}' at level '{widest.level}' cannot be drawn: {problem}",
                       *at(spec.mechanism.params.get("rho")))]


def allocation_rows(alloc, labels: dict | None = None) -> list[dict]:
    """level, query (as written, factors joined by ' * '), rho, variance (sigma², the noise
    parameter) and the exact fractions behind them, in level then declaration order."""
    from dpspec.api import discrete_gaussian_variance

    labels = labels or {}
    return [{"level": q.level, "query": labels.get((q.level, q.query), q.name), "rho": float(q.rho), "variance": float(q.sigma2),
             "share": str(q.share), "rho_exact": str(q.rho), "sigma2_exact": str(q.sigma2),
             "noise_variance": discrete_gaussian_variance(q.sigma2)}
            for q in alloc.queries]


def accuracy(spec, params, result) -> list[dict]:
    """Mean absolute error of every (level, query) table against the confidential data: over
    the cells either side has persons in, |confidential - protected| on average.

    From the run's confidential and protected histograms (sparse), so no person table is
    needed. Computed against the confidential data: internal report only."""
    schema = result.schema
    variables = list(params["variables"])
    queries = {"total": (), "detailed": tuple(variables)}
    block = params["queries"]
    for p in block.params:
        if isinstance(p.value, ir.ParamBlock):
            for inner in p.value.params:
                queries[inner.name] = _query_key(inner.name, variables)
        else:
            queries[p.name] = _query_key(p.name, variables)
    out = []
    for level in _levels(spec):
        for name, query in queries.items():
            indicator = schema.indicator(query)
            a = (result.confidential[level] @ indicator).tocsr()
            b = (result.histograms[level] @ indicator).tocsr()
            either = a + b  # counts are nonnegative: a + b is nonzero where either side is
            either.eliminate_zeros()
            cells = either.nnz
            diff = float(abs(a - b).sum())
            mae = diff / cells if cells else 0.0
            out.append({"level": level, "query": name, "mean_absolute_error": mae})
    return out
