"""What `check` decides from the spec beyond each setting alone: the sampler's reach, invariants a
split spine cannot keep or that do not nest, and the order the settings' readers run in (each
problem at the path it carries, which the core locates)."""

from __future__ import annotations

import attrs

from dpspec.api import Diagnostic, SpecError, ir, sampler_limit_problem, LazyModule

from ..geography.declared import problems as geography_problems
from ..measurement.allocation import split_allocation
from .equal_to import _equalities
from .joint import _cross_constraints, _joint_names, _joint_tables, _side_tables
from .passes import _passes, pass_level_path, pass_query_problems
from .postprocess import failsafe_problems, postprocess_problems
from .spine import _spine, _split_levels, spine_problems
from .tables import _bound_categories, _invariants, _joint, _levels, _schema, _structural_zeros, _variables

# imported on first use: `dpspec --help` loads this module, not them
_invariant_chain = LazyModule("dpspec_topdown.estimation.invariant_chain", "_invariant_chain", globals())
_constraints = LazyModule("dpspec_topdown.params.constraints", "_constraints", globals())
_joint_passes = LazyModule("dpspec_topdown.estimation.joint_passes", "_joint_passes", globals())
_pass_plans = LazyModule("dpspec_topdown.estimation.pass_plans", "_pass_plans", globals())


def _split_invariant_problems(spec: ir.Spec, params: dict, spine: dict) -> list:
    """Invariants a split spine cannot keep: at a split level below the first (run/steps.py's
    _check_split_invariants, here located at the invariant)."""
    split = _split_levels(spec, spine)
    if not split:
        return []
    geo = list(spec.domain.geography.levels)
    out = []
    for q in spec.invariants:
        if q.table == params["table"] and set(split[1:]) & set(q.columns):
            out.append(
                Diagnostic(
                    f"with a split spine, TopDown keeps '{q.describe()}' only at {split[0]} (on the sum "
                    f"of its parts) or at {geo[-1]}",
                    *((q.loc.line, q.loc.column) if q.loc else (None, None)),
                )
            )
    return out


def _unnested_invariant_problems(spec: ir.Spec, params: dict) -> list:
    """The invariants on `params`' table whose query does not nest with an earlier one's, at the
    later invariant's line (the run's chain rule, estimation/invariant_chain.py, decided here from the spec)."""

    schema = _schema(spec, params)
    written = {}  # canonical query: the first invariant writing it
    for _, query, q in _invariants(spec, params)[0]:
        try:
            written.setdefault(schema.canonical(query), q)
        except SpecError:  # a query it cannot keep is reported where the engine meets it
            continue
    queries = list(written)
    pair = _invariant_chain.unnested(queries)
    if pair is None:
        return []
    earlier, later = queries[pair[0]], queries[pair[1]]
    first, q = written[earlier], written[later]
    line = f" (line {first.loc.line})" if first.loc else ""
    return [
        Diagnostic(
            f"invariants: '{q.describe()}' does not nest with '{first.describe()}'{line}: "
            + _invariant_chain.why(earlier, later, schema),
            *((q.loc.line, q.loc.column) if q.loc else (None, None)),
        )
    ]


def _sampler_problems(spec, params, alloc) -> list[Diagnostic]:
    """The query with the most noise, when its sigma² is beyond what the exact sampler draws: refused
    at `check`, at the rho line, in the sampler's words (sigma² grows as 1/rho)."""

    if not alloc.queries:
        return []
    widest = max(alloc.queries, key=lambda q: q.sigma2)
    problem = sampler_limit_problem("discrete_gaussian", widest.sigma2, ("rho", params["rho"]))
    if problem is None:
        return []
    return [
        Diagnostic(
            f"topdown: the noise of query '{widest.name}' at level '{widest.level}' cannot be drawn: {problem}",
            path=("rho",),
        )
    ]


def column_problems(spec: ir.Spec, params: dict) -> list:
    """The table's columns for the geography levels and the histogram variables, and the levels of
    the shares: what the later checks read (none of them runs if one fails)."""
    problems = []
    table = spec.domain.table(params["table"])
    if spec.domain.geography is None:
        return [Diagnostic("TopDown needs a geography hierarchy in the domain (geography NAME { state > county ... })")]
    for level in spec.domain.geography.levels:
        if table.column(level) is None:
            problems.append(Diagnostic(f"table '{table.name}' has no column for geography level '{level}'"))
    written = list(params["variables"])
    twice = sorted({n for n in written if written.count(n) > 1})
    if twice:  # at its second writing
        second = [i for i, n in enumerate(written) if n == twice[0]][1]
        problems.append(Diagnostic(f"variables: '{twice[0]}' is listed twice", path=("variables", second)))
    for name in params["variables"]:
        col = table.column(name)
        if col is None:
            problems.append(Diagnostic(f"histogram variable '{name}' is not a column of table '{table.name}'"))
        elif col.type.kind == "category":
            problems.append(
                Diagnostic(
                    f"histogram variable '{name}' must have a declared value set (enumerated, bool or int range), not an open category"
                )
            )
        elif name in spec.domain.geography.levels:
            problems.append(Diagnostic(f"'{name}' is a geography level, not a histogram variable"))
    known = set(_levels(spec))
    for level in params["levels"]:
        if level not in known:
            problems.append(
                Diagnostic(
                    f"levels: '{level}' is not a geography level (known: {', '.join(_levels(spec))})",
                    path=("levels", level),
                )
            )
    return problems


def setting_problems(spec: ir.Spec, params: dict, allocation) -> list:
    """Every setting read by its parser, in the order a reviewer fixes them (the spine, the
    geography file, invariants, the allocation by `allocation(spec, params)`, constraints,
    equalities, the failsafe, post-processing, cross constraints, then the passes), each
    problem located at its setting."""
    problems = []
    spine_wrong = spine_problems(spec, params)  # reported below, at the spine's setting
    flag = None if spine_wrong else _spine(spec, params).get("aian", (None, None))[1]
    # A spec that reads no records for a table (a description, such as one imported from a
    # production configuration) cannot leak its units through them: it cannot be run until its
    # data are declared, and then the declared geography is required (the run refuses too).
    tables = [params["table"], *_joint_tables(spec, params), *_side_tables(spec, params)]
    read = [t for t in tables if any(d.table == t for d in spec.data)]
    problems.extend(geography_problems(spec, read, flag))
    _, inv_problems = _invariants(spec, params)
    problems.extend(inv_problems)
    try:
        if spine_wrong:  # first: a bad flag column is the spine's error, not the joint table's
            raise SpecError(spine_wrong)
        alloc = allocation(spec, params)  # shares that do not sum to 1: at the level's entry of the shares
        problems.extend(_sampler_problems(spec, params, alloc))
        schema = _schema(spec, params)
        _structural_zeros(params, _variables(spec, params), schema.recodes)

        _constraints.facility_constraints(spec, params, _bound_categories(spec, params))
        problems.extend(_split_invariant_problems(spec, params, _spine(spec, params)))
        for table_params in [params, *(j["params"] for j in _joint(spec, params))]:
            problems.extend(_unnested_invariant_problems(spec, table_params))
        _equalities(spec, params)
        if failsafe_problems(params):
            raise SpecError(failsafe_problems(params))
        if postprocess_problems(params):
            raise SpecError(postprocess_problems(params))
        _cross_constraints(spec, params, _joint(spec, params))
        joint = _joint(spec, params)
        if pass_query_problems(params, schema, joint):  # at the pass entry writing the query
            raise SpecError(pass_query_problems(params, schema, joint))
        passes = _passes(params, list(schema.names), _joint_names(joint))
        _check_pass_plans(spec, params, passes, schema, alloc, joint)
    except SpecError as exc:  # each at the path it carries (the core locates it), or its line
        problems.extend(exc.diagnostics)
    return problems


def _check_pass_plans(spec: ir.Spec, params: dict, passes: dict, schema, alloc, joint) -> None:
    """Each level's passes planned from the names alone (arrays come at run time): a level
    without a budget share is a SpecError at the level's entry of its passes, and what the plan
    refuses is at the entry its path names (a constrain_to, of the level or of an outer pass),
    else at the level's entry."""

    for level, plan in passes.items():
        level_at = pass_level_path(params, level)
        if level not in params["levels"]:
            what = "outer_passes" if params.get("outer_passes") is not None else "estimation/rounding passes"
            raise SpecError(
                Diagnostic(
                    f"{what} name level '{level}', which has no budget share (levels with one: "
                    f"{', '.join(params['levels'])})",
                    path=level_at,
                )
            )
        try:
            if joint:  # outer passes over both tables (joint_passes.py)
                main, other = split_allocation(alloc, joint[0]["name"])
                _joint_passes.joint_pass_plan(
                    level, plan, schema, main, joint[0]["schema"], other, joint[0]["name"], groups=False
                )
            else:
                _pass_plans.pass_plan(level, plan, schema, alloc, groups=False)  # names checked; arrays at run time
        except SpecError as exc:
            raise SpecError(
                [attrs.evolve(d, path=_plan_path(params, level, d.path) or level_at) for d in exc.diagnostics]
            ) from None


def _plan_path(params: dict, level: str, relative: tuple) -> tuple:
    """The spec's path of what a pass plan's error names, relative to the level: ("constrain_to",)
    or ("outer", n, "constrain_to"), the level's n-th outer pass's; () when it names nothing."""
    if relative[:1] == ("outer",):
        names = list((params.get("outer_passes") or {}).get(level) or ())
        return ("outer_passes", level, names[relative[1]], *relative[2:]) if relative[1] < len(names) else ()
    if relative == ("constrain_to",):
        return ("constrain_to", level)
    return ()
