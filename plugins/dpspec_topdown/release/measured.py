"""The rows a TopDown measurements table must hold, from the spec alone (`declared_rows`).

Why: `dpspec infer` reads the measurements back, and a row deleted from them would leave a
posterior built on less evidence than was published without anyone saying so. Which rows a
release holds is public: per measured (level, query), every unit of the level on the spine (the
declared geography, with the AIAN split's parts, less the units the optimized spine bypasses)
times every cell of the query's marginal. The spine is built by the run's own functions from the
declared geography file, so the rows are the run's by construction, never the records'.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..geography.declared import declared_geography
from ..geography.hierarchy import build_hierarchy
from ..geography.spine import BYPASSED, bypass_classes, split_geography
from ..measurement.allocation import _is_joint_key

COLUMNS = ("level", "geocode", "query", "cell")


def declared_rows(spec, design, table: str, alloc, schema, gq_split: bool = False) -> pd.DataFrame | None:
    """One row per published measurement of the person table: level, geocode (the unit's code on
    the spine, as text), query (its published name) and cell (0 .. the marginal's size - 1), in
    the allocation's order. None under `spine: { gq_blockgroups: ... }` (`gq_split`): the level
    it splits takes its parts from the counts of the facilities table, which the spec alone does
    not hold (and the bypass below it follows them); the release check then compares the
    measurements' columns, cells and variances only."""
    if gq_split:
        return None
    flag = design.aian[1] if design.aian else None
    geography = declared_geography(spec, table, flag).reset_index(drop=True)
    labels = {}
    if design.aian:
        geography, labels = split_geography(geography, design.levels, *design.aian)
    hier = build_hierarchy(geography, design.levels, counted=True).with_labels(labels)
    depth = bypass_classes(hier, design.bypass) if design.bypass else {}
    parts = []  # (level, query name, the measured units' codes as text, cells)
    for q in alloc.queries:
        if _is_joint_key(q.query):  # a joint table's queries are its own table's (joint_measurements)
            continue
        k = hier.index(q.level)
        codes = np.asarray([str(c) for c in hier.levels[k].codes], dtype=object)
        if k in depth:
            codes = codes[depth[k] != BYPASSED]
        parts.append((q.level, q.name, codes, schema.marginal_size(q.query)))
    return _frame(parts)


def _frame(parts) -> pd.DataFrame:
    """The rows of every (level, query, units, cells) part, as categorical columns: a production
    release has tens of millions of rows, and only the codes are repeated."""
    levels = pd.Index(list(dict.fromkeys(p[0] for p in parts)), dtype=object)
    queries = pd.Index(list(dict.fromkeys(p[1] for p in parts)), dtype=object)
    geocodes = pd.Index(pd.unique(np.concatenate([p[2] for p in parts]))) if parts else pd.Index([], dtype=object)
    columns = {c: [] for c in COLUMNS}
    for level, query, codes, cells in parts:
        n = codes.size * cells
        columns["level"].append(np.full(n, levels.get_loc(level), dtype=np.int32))
        columns["query"].append(np.full(n, queries.get_loc(query), dtype=np.int32))
        columns["geocode"].append(np.repeat(geocodes.get_indexer(codes).astype(np.int32), cells))
        columns["cell"].append(np.tile(np.arange(cells, dtype=np.int64), codes.size))
    joined = {c: np.concatenate(v) if v else np.zeros(0, dtype=np.int64) for c, v in columns.items()}
    return pd.DataFrame(
        {
            "level": pd.Categorical.from_codes(joined["level"].astype(np.int32), categories=levels),
            "geocode": pd.Categorical.from_codes(joined["geocode"].astype(np.int32), categories=geocodes),
            "query": pd.Categorical.from_codes(joined["query"].astype(np.int32), categories=queries),
            "cell": joined["cell"],
        }
    )
