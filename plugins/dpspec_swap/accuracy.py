"""What swapping costs the tables analysts use: MAPE against the confidential data.

Computed per run (internal figures of the release, never published) and summarized over
repeated runs, as in the seed paper's figure of the 1940 county x tenure table by swap rate.
Tables that are functions of the invariants come out exact; listing them too shows that.
"""

from __future__ import annotations

import math

import numpy as np

from dpspec.api import implied_by, ir
from dpspec_swap.utility import count_table, mape


def table_name(query: ir.CountQuery) -> str:
    """The name the compiler gives a released count table."""
    return "count_" + "_".join([query.table, *query.columns])


def queries(spec: ir.Spec, default: ir.CountQuery) -> list[ir.CountQuery]:
    """The count tables the spec releases, or `default` when it releases none."""
    found = [r.query for r in spec.releases if r.kind == "count" and r.query is not None]
    return found or [default]


def table_errors(tables, invariants, data: dict, outputs: dict) -> dict:
    """{name: {query, invariant, cells, mape_percent}} for one run's outputs."""
    out = {}
    for q in tables:
        if q.table not in data or q.table not in outputs:
            continue
        out[table_name(q)] = table_error(
            q, invariants, count_table(data[q.table], q.columns), count_table(outputs[q.table], q.columns)
        )
    return out


def table_error(query: ir.CountQuery, invariants, truth, released) -> dict:
    """One released table's entry: its query, whether it is invariant, its cells and MAPE."""
    return {
        "query": query.describe(),
        "invariant": implied_by(query, invariants),
        "cells": int((truth != 0).sum()),
        "mape_percent": mape(truth, released),
    }


def _stats(values: list[float]) -> dict:
    arr = np.asarray(values, dtype=float)
    finite = arr[np.isfinite(arr)]
    if finite.size == 0:
        return {"mean": None, "sd": None, "min": None, "max": None, "per_run": [None] * len(values)}
    sd = float(finite.std(ddof=1)) if finite.size > 1 else 0.0
    return {
        "mean": float(finite.mean()),
        "sd": sd,
        "min": float(finite.min()),
        "max": float(finite.max()),
        "per_run": [float(v) if math.isfinite(v) else None for v in arr],
    }


def summarize(rate, internals: list[dict]) -> dict:
    """Mean (and spread) over the runs of each table's MAPE and of the swapped fraction."""
    names = list(dict.fromkeys(name for i in internals for name in i.get("tables", {})))
    tables = {}
    for name in names:
        runs = [i["tables"][name] for i in internals if name in i.get("tables", {})]
        tables[name] = {
            "query": runs[0]["query"],
            "invariant": runs[0]["invariant"],
            "cells": runs[0]["cells"],
            "mape_percent": _stats([r["mape_percent"] for r in runs]),
        }
    return {
        "runs": len(internals),
        "rate": float(rate),
        "swapped_fraction": _stats([i.get("swapped_fraction", math.nan) for i in internals]),
        "tables": tables,
    }
