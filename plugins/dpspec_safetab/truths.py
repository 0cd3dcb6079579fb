"""The first units of a SafeTab run: a partition of the records counted per (block, geography
unit, group, stage-2 cell).

Why: every count SafeTab measures is a sum over records, so a partition of them (a county's
records, on the executor that holds them) can count its share of every block, and the engine
adds the shares up (`Engine.total`) where they live. The driver never sees a record nor a count
per record combination. One partition (`Plan.marker_owner`) also emits a marker row (group -1)
for every (block, bucket) that holds declared geography units, so every bucket is measured and
every declared unit in it, an empty one included: which units the release has never depends on
where the records are.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .engine import cell_codes
from .iterations import flatten
from .plan import Plan, buckets_of, empty_frame
from .records import Inputs, read_records, region_codes

MARKER = -1  # the group (and cell) of a geography unit's marker row
TRUTH_SCHEMA = {
    "block": "int64",
    "bucket": "int64",
    "geocode": "str",
    "group": "int64",
    "cell": "int64",
    "count": "int64",
}


def partition_truths(key, rows: pd.DataFrame, rng, plan: Plan) -> pd.DataFrame:
    """One partition's counts of every block (a `map_groups` unit; draws nothing from `rng`)."""
    inputs = Inputs(rows, plan.race_columns, plan.eth_column, plan.variables, plan.source)
    read = read_records(inputs, list(plan.columns), plan.table, plan.design.max_race_codes)
    weight = read.origin.weight
    cell = (
        cell_codes([read.variables[v].astype(np.int64) for v in plan.variables], plan.sizes)
        if plan.variables
        else np.zeros(len(read.frame), dtype=np.int64)
    )
    flat, regions, parts = {}, {}, []
    for block, (geo, level) in enumerate(plan.blocks):
        sel_key = (level, plan.design.granularity(geo))
        if sel_key not in flat:
            flat[sel_key] = flatten(
                read.codes, plan.table, plan.selection(level, geo), plan.fanout(level, geo), plan.source
            )
        if geo not in regions:
            regions[geo] = region_codes(read.frame, geo)
        parts.append(
            block_truths(block, *regions[geo], *flat[sel_key], cell, weight, len(plan.selection(level, geo)), plan)
        )
    if plan.marker_owner is not None and tuple(key) == tuple(plan.marker_owner):
        parts.append(markers(plan))
    if not parts:
        return empty_frame(TRUTH_SCHEMA)
    return pd.concat(parts, ignore_index=True)


def markers(plan: Plan) -> pd.DataFrame:
    """One marker row per (block, bucket) holding declared units (its first unit's code; count 0)."""
    block, bucket, geocode = [], [], []
    for b, (geo, _) in enumerate(plan.blocks):
        codes, buckets = plan.units[geo]
        held, first = np.unique(buckets, return_index=True)
        block += [b] * len(held)
        bucket += held.tolist()
        geocode += codes[first].tolist()
    n = len(block)
    return pd.DataFrame(
        {
            "block": np.asarray(block, dtype=np.int64),
            "bucket": np.asarray(bucket, dtype=np.int64),
            "geocode": np.asarray(geocode, dtype=object),
            "group": np.full(n, MARKER, dtype=np.int64),
            "cell": np.full(n, MARKER, dtype=np.int64),
            "count": np.zeros(n, dtype=np.int64),
        }
    )


def block_truths(
    block: int, region_of_row, labels, rows, groups, cell, weight, n_groups: int, plan: Plan
) -> pd.DataFrame:
    """The (geography unit, group, cell) sums of one block over this partition."""
    n_cells = plan.n_cells
    region = region_of_row[rows]
    ok = region >= 0
    key = (region[ok] * n_groups + groups[ok]) * n_cells + cell[rows[ok]]
    inverse, uniq = pd.factorize(key)  # hashed, not sorted: the engine orders the sums if it must
    sums = np.bincount(inverse, weights=weight[rows[ok]], minlength=len(uniq)).astype(np.int64)
    unit_of = uniq // (n_groups * n_cells)
    bucket = buckets_of(labels, plan.buckets)
    return pd.DataFrame(
        {
            "block": np.full(len(unit_of), block, dtype=np.int64),
            "bucket": bucket[unit_of],
            "geocode": pd.Categorical.from_codes(unit_of, categories=pd.Index(labels, dtype=object))
            if len(labels)
            else np.asarray(labels, dtype=object)[unit_of],  # a label per unit, not a string per row
            "group": ((uniq // n_cells) % n_groups).astype(np.int64),
            "cell": (uniq % n_cells).astype(np.int64),
            "count": sums,
        }
    )
