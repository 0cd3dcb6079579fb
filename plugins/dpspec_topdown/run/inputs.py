"""What a run reads from the data (`read_records`): the person records as the columns TopDown
counts, the joint table's, and the public tables counted from the data (facility bounds, released
products, the spine's group-quarters signature and reference geography, the declared geography),
each checked against the spec as it is read."""

from __future__ import annotations

import pandas as pd

from dpspec.api import SpecError, ir, EngineTable

from ..geography.declared import check_flags, declared_geography
from ..measurement.counts import table_counts
from ..params.constraints import facility_bounds_from_counts, facility_constraints
from ..params.equal_to import _equalities
from ..params.joint import _cross_constraints, _joint_tables
from ..params.spine import _spine
from ..params.tables import (
    _bound_categories,
    _invariant_recodes,
    _invariants,
    _joint,
    _levels,
    _recode_columns,
    _variables,
)
from .context import Records, JointTable
from ..geography.spine import gq_signatures
from ..params.recode_invariants import check_recode_column


def _joint_table(spec, params: dict, data, records):
    """The run's JointTable for the spec's joint table (at most one), or None."""

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
    return JointTable(
        j["name"],
        records(data[j["table"]], j["variables"]),
        j["variables"],
        j["strategy"],
        recodes=j["schema"].recodes,
        invariants=[(lv, q) for lv, q, _ in invariants],
        cross=cross,
        structural_zeros=j["structural_zeros"],
    )


def _gq_signature(spine: dict, data, engine):
    """Each finest unit's group-quarters types present (spine.gq_signatures), or None."""
    gq = spine.get("gq_blockgroups")
    if gq is None:
        return None

    counts = table_counts(data[gq["table"]], [gq["finest"], gq["type"]], engine)
    return gq_signatures(counts, gq["finest"], gq["type"], gq["types"])


def _check_recode_invariant_columns(spec: ir.Spec, params: dict, table, engine) -> None:
    """Each invariant factor that is a recode: the data column of its name is the recode of its
    variable in every record (a DataError otherwise)."""

    recodes = _invariant_recodes(spec, params) if params.get("recodes") is not None else {}
    finest = _levels(spec)[-1]
    for c in _recode_columns(spec, params):
        r = recodes[c]
        categories = _variables(spec, {"table": params["table"], "variables": [r.variable]})[r.variable]
        check_recode_column(
            table_counts(table, [finest, r.variable, c], engine), finest, c, r, categories, params["table"]
        )


def read_records(spec, params: dict, data, engine=None) -> Records:
    """What the run reads from `data`: the person records (as the columns TopDown counts), the
    joint table's, and the public tables counted from the data (the facilities' bounds, the
    released products of `equal_to`, the spine's group-quarters signature and its reference
    geography, the declared geography), each checked against the spec as it is read (the recode
    columns the invariants name, every table's AIAN flag against the geography file's)."""
    variables = _variables(spec, params)
    persons = data[params["table"]]
    _check_recode_invariant_columns(spec, params, persons, engine)
    for j in _joint(spec, params):
        _check_recode_invariant_columns(spec, j["params"], data[j["table"]], engine)
    spine = _spine(spec, params)
    bounds = []
    categories = _bound_categories(spec, params)
    for con in facility_constraints(spec, params, categories):
        lower, upper = facility_bounds_from_counts(
            con, table_counts(data[con["table"]], [con["finest"], con["type"]], engine), categories[con["of"]]
        )
        bounds.append((con["name"], (con["of"],), lower, upper))

    def records(table, names):
        if isinstance(table, EngineTable):  # held by the engine: counted there, never collected
            return table
        return pd.DataFrame(
            {
                c: table[c].astype(object) if c in names else table[c]
                for c in [*spec.domain.geography.levels, *names, *([spine["aian"][1]] if "aian" in spine else [])]
            }
        )

    frame = records(persons, variables)
    joint = _joint_table(spec, params, data, records)
    declared = declared_geography(spec, params["table"], spine.get("aian", (None, None))[1])
    if "aian" in spine:  # every table's copy of the flag agrees with the geography file's
        flag = spine["aian"][1]
        for name in dict.fromkeys([params["table"], *_joint_tables(spec, params), spine.get("geography")]):
            if name is not None and name in data and flag in data[name].columns:
                check_flags(name, data[name], declared, spec.domain.geography.levels[-1], flag, engine)
    return Records(
        frame,
        joint=joint,
        bounds=bounds,
        equalities=[
            (e["name"], e["query"], table_counts(data[e["table"]], [e["finest"], *e["query"]], engine))
            for e in _equalities(spec, params)
        ],
        gq_signature=_gq_signature(spine, data, engine),
        reference_geography=(
            table_counts(
                data[spine["geography"]],
                [*spec.domain.geography.levels, *([spine["aian"][1]] if "aian" in spine else [])],
                engine,
            )
            if "geography" in spine
            else None
        ),
        declared_geography=declared,
    )
