"""Build the synthetic facilities file used by specs/pl94_production_topdown.dps.

Run from the repository root after build.py and build_units.py:
`python specs/data/pl94_synthetic/build_facilities.py` (deterministic). One row per housing unit
(``gqtype`` 0, occupied or vacant, from the units file) and per occupied group-quarters
facility (``gqtype`` 1-7, the person file's hhgq codes): in every block where persons live in
group quarters of a type there is at least one facility of that type, and never more
facilities than residents (1 + Binomial(residents - 1, 0.05)). This is the table production
reads its Block invariants (housing units, occupied facilities by type) and its
hhgq_total_lb/ub constraints from. Nothing in the output is a census figure.
"""

from __future__ import annotations

import os

import numpy as np
import pandas as pd

HERE = os.path.dirname(os.path.abspath(__file__))
SEED = 2022
GEO = ["state", "county", "tract", "blockgroup", "block"]


def main() -> None:
    persons = pd.read_parquet(os.path.join(HERE, "pl94_synthetic.parquet"))
    units = pd.read_parquet(os.path.join(HERE, "pl94_synthetic_units.parquet"))
    rng = np.random.default_rng(SEED)
    gq = persons[persons["hhgq"].astype(int) > 0]
    residents = gq.groupby(GEO + ["hhgq"], observed=True).size()
    n = residents.to_numpy()
    facilities = 1 + rng.binomial(n - 1, 0.05)
    keys = residents.index.to_frame(index=False).iloc[np.repeat(np.arange(n.size), facilities)]
    gq_rows = keys.rename(columns={"hhgq": "gqtype"}).reset_index(drop=True)
    hu_rows = units[GEO].assign(gqtype=0)
    out = pd.concat([hu_rows.astype({c: str for c in GEO}), gq_rows.astype({c: str for c in GEO})], ignore_index=True)
    out = out.sort_values(GEO + ["gqtype"], kind="stable").reset_index(drop=True)
    for col in GEO:
        out[col] = out[col].astype("category")
    out["gqtype"] = out["gqtype"].astype(np.int64)
    out.to_parquet(os.path.join(HERE, "pl94_synthetic_facilities.parquet"), index=False, compression="zstd")
    print(
        f"wrote {len(out)} facilities: {len(hu_rows)} housing units, {len(gq_rows)} occupied "
        f"group-quarters facilities in {len(residents)} (block, type) pairs"
    )


if __name__ == "__main__":
    main()
