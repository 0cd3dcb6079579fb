"""A run's release (`release_of`): its microdata and measurements tables, with the input's codes
(each geography and variable column with the input's categories; jointly solved tables share the
union of theirs), and the facts and notes a reviewer reads."""

from __future__ import annotations

import dpspec
from dpspec.api import Release, LazyModule

from ..geography.declared import check_structure
from ..params.tables import _joint, _recode_columns, _variables
from .report import _postprocess_notes, _spine_facts, accuracy

# heavy libraries, imported on first use
pd = LazyModule("pandas", "pd", globals())


def _categories(spec, table, names) -> dict:
    """The input's categorical dtypes per column, so the release's codes compare exactly."""
    out = {}
    for col in [*spec.domain.geography.levels, *names]:
        dtype = (
            table.dtype(col)
            if isinstance(table, dpspec.api.EngineTable)
            else table[col].dtype
            if col in table.columns
            else None
        )
        if isinstance(dtype, pd.CategoricalDtype):
            out[col] = dtype
    return out


def _geography_categories(spec, tables) -> dict:
    """Jointly solved tables share one geography: a unit of either may hold records of both in
    the release, so each geography column's categories are the union of the tables' (if any)."""
    out = {}
    for col in spec.domain.geography.levels:
        found = [_categories(spec, t, [])[col] for t in tables if col in _categories(spec, t, [])]
        if found:
            values = pd.Index([])
            for dtype in found:
                values = values.union(pd.Index(dtype.categories))
            out[col] = pd.CategoricalDtype(values)
    return out


def release_of(spec, params: dict, data, result, declared) -> Release:
    """The release of a run: the microdata (the person table's and a joint table's, streamed and
    with the input's codes), the measurements, and the facts and notes a reviewer reads; the
    measurements are first checked against the declared geography (check_structure)."""
    variables = _variables(spec, params)
    persons = data[params["table"]]
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
    timings = {
        lv: {k: v for k, v in t.items() if isinstance(v, (int, float, bool))}
        for lv, t in result.timings["levels"].items()
    }
    failsafe = {lv: t["failsafe_nodes"] for lv, t in timings.items() if t.get("failsafe_nodes")}
    outputs = {params["table"]: micro, "measurements": measurements}
    for j in _joint(spec, params):  # a joint table's release: its microdata and its measurements
        other = result.joint[j["name"]]
        jderived = _recode_columns(spec, j["params"])
        outputs[j["table"]] = other.microdata_table(
            {**_categories(spec, data[j["table"]], [*j["variables"], *jderived]), **geo_categories},
            recode_columns=jderived,
        )
        outputs["joint_measurements"] = other.measurements_table()
    return Release(
        outputs=outputs,
        facts={
            "total_rho": float(result.total_rho),
            "rho_spent": float(result.rho_spent),
            "solver_share": result.timings["solver_share"],
            "timings": timings,
            # production's failsafe: nodes whose later pass had no solution, redone in one pass
            "failsafe_nodes": failsafe,
            **_spine_facts(result),
            # production's post-processing-only constraints: records moved per level, rows the
            # heuristic left broken at a node, and what the release still breaks
            **({"postprocess_only": result.timings["postprocess"]} if "postprocess" in result.timings else {}),
        },
        internal={"errors": errors},
        notes=_postprocess_notes(result.timings.get("postprocess")),
    )
