"""What a run reads from the data besides the person records: the joint table, the group-quarters
signature of the spine, and the checks of recode columns the invariants name."""
from __future__ import annotations


from dpspec.api import SpecError, ir
from ..params.joint import _cross_constraints
from ..params.tables import _invariant_recodes, _invariants, _joint, _levels, _recode_columns, _variables


def _joint_table(spec, params: dict, data, records):
    """The engine's JointTable for the spec's joint table (at most one), or None."""
    from .topdown import JointTable

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


def _gq_signature(spine: dict, data, engine):
    """Each finest unit's group-quarters types present (spine.gq_signatures), or None."""
    gq = spine.get("gq_blockgroups")
    if gq is None:
        return None
    from .topdown import table_counts
    from ..geography.spine import gq_signatures

    counts = table_counts(data[gq["table"]], [gq["finest"], gq["type"]], engine)
    return gq_signatures(counts, gq["finest"], gq["type"], gq["types"])


def _check_recode_invariant_columns(spec: ir.Spec, params: dict, table, engine) -> None:
    """Each invariant factor that is a recode: the data column of its name is the recode of its
    variable in every record (a DataError otherwise)."""
    from .topdown import table_counts
    from ..params.recode_invariants import check_recode_column

    recodes = _invariant_recodes(spec, params) if params.get("recodes") is not None else {}
    finest = _levels(spec)[-1]
    for c in _recode_columns(spec, params):
        r = recodes[c]
        categories = _variables(spec, {"table": params["table"], "variables": [r.variable]})[r.variable]
        check_recode_column(table_counts(table, [finest, r.variable, c], engine), finest, c, r, categories,
                            params["table"])
