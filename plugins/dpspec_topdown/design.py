"""The TopDown design a spec declares, parsed once from the mechanism's parameters.

`Design` is what `run_topdown` measures and how it estimates: the geography levels, the
histogram variables, the allocation of rho over levels and queries, the invariants, the passes
and the constraints the fits keep. `design_from_spec` builds it from the plain values the core
resolved against the schema, through the readers of `params/` (params/tables.py: the variables,
queries, recodes, structural zeros and joint tables); `check` has reported every problem of them;
everything read from the data (records and the public tables counted from them) comes to the run
separately, as `run.context.Records`, and the run-time things (random source, engine, progress)
as `run.context.RunContext`.
"""

from __future__ import annotations

from typing import Mapping, Sequence

import attrs

from dpspec.api import ir

from .params.joint import _joint_names
from .params.passes import _passes
from .params.spine import _spine
from .params.tables import _invariants, _joint, _levels, _relation, _schema, _strategy, _structural_zeros, _variables


@attrs.frozen
class Design:
    """What a TopDown run measures and how it estimates.

    ``levels`` lists the geography columns top first (a leading name that is not a column is
    the implicit root, e.g. "nation"); ``variables`` maps each histogram variable to its
    categories; ``strategy`` maps each measured level to ``[(query, share), ...]`` where a query
    is a tuple of variable names (``()`` is the total); ``level_shares`` splits ``rho`` (zCDP)
    over levels; ``relation`` is "symdiff" (add/remove one person) or "hamming" (change one);
    ``invariants`` are ``(level, query)`` pairs released exactly; ``recodes`` (histogram.Recode)
    are further query factors. ``passes`` maps a level to its pass structure:
    ``{"estimation": [[query, ...], ...], "rounding": [[query, ...], ...], "tolerance": t}``
    (multipass.PassPlan; measured queries left out of the estimation passes form a last pass).
    ``structural_zeros`` maps a name to ``{variable: [categories]}``: the cells matching every
    listed variable are 0 at every unit (production's nurse_nva_0: no person under 18 in a
    nursing facility); records in such a cell are a DataError naming the block and cell.
    ``aian`` = (level, flag column): production's AIAN spine (spine.py): that level and every
    level below it but the finest are split into the parts inside (flag 1) and outside AIAN
    areas; an invariant at a split level holds on the sum of each unit's parts only.
    ``bypass`` names levels whose single-child units are bypassed (production's optimized spine,
    spine.py): such a unit is measured with its own and its child's shares, the child not at all.
    ``failsafe`` names the minimal schema's variables: a node without a solution is solved again
    with its children sums relaxed (postprocess.solve_relaxed, production's backup_feas), and
    the levels above it are then re-added from its children; a node without a solution even
    then is a DataError naming the level and the parent unit.
    ``postprocess_only`` names bounds left out of every solve and repaired after each node's
    rounding by production's heuristic (postprocess_only.py); at the levels in
    ``postprocess_feasible`` (production's require_feasible_postproc_dim) a move may also change
    the structural zeros' other variable, and a row left broken stops the run (a DataError);
    elsewhere it is reported (a warning and the result's ``postprocess``), never silent.
    """

    levels: Sequence[str]
    variables: Mapping[str, Sequence]
    strategy: Mapping[str, Sequence]
    rho: object
    level_shares: Mapping[str, object]
    relation: str
    invariants: Sequence[tuple]
    recodes: Sequence = ()
    passes: Mapping[str, dict] | None = None
    structural_zeros: Mapping[str, Mapping[str, Sequence]] | None = None
    aian: tuple[str, str] | None = None
    bypass: Sequence[str] = ()
    failsafe: Sequence[str] | None = None
    postprocess_only: Sequence[str] = ()
    postprocess_feasible: Sequence[str] = ()


def design_from_spec(spec: ir.Spec, params: dict) -> Design:
    """The spec's design from the core's plain values and the readers of `params/` (`check` has
    reported every problem before a run)."""
    variables = _variables(spec, params)
    invariants, _ = _invariants(spec, params)
    levels = _levels(spec)
    schema = _schema(spec, params)
    spine = _spine(spec, params)
    return Design(
        levels,
        variables,
        _strategy(params, levels, list(variables)),
        params["rho"],
        params["levels"],
        _relation(spec, params),
        [(lv, q) for lv, q, _ in invariants],
        recodes=schema.recodes,
        passes=_passes(params, list(variables), _joint_names(_joint(spec, params))),
        structural_zeros=_structural_zeros(params, variables, schema.recodes),
        aian=spine.get("aian"),
        bypass=spine.get("bypass", ()),
        failsafe=list(params["failsafe"]["minimal_schema"]) if params.get("failsafe") else None,
        postprocess_only=list(params.get("postprocess_only") or ()),
        postprocess_feasible=list(params.get("postprocess_require_feasible") or ()),
    )
