"""Build the synthetic housing-unit file used by specs/pl94_units_topdown.dps.

Run from the repository root after build.py: `python specs/data/pl94_synthetic/build_units.py`
(deterministic). Derived from the synthetic person file, block by block: occupied housing units
are the household persons divided among households of about 2.5 persons (at least one unit
where anyone lives in a household), vacant units a further 11% on average. h1 is 0 for an
occupied unit and 1 for a vacant one (our encoding of production's two-valued h1 attribute);
aian is the block's AIAN flag from the person file.
Nothing in the output is a census figure.
"""

from __future__ import annotations

import os

import numpy as np
import pandas as pd

HERE = os.path.dirname(os.path.abspath(__file__))
SEED = 2021
GEO = ["state", "county", "tract", "blockgroup", "block"]


def main() -> None:
    persons = pd.read_parquet(os.path.join(HERE, "pl94_synthetic.parquet"))
    rng = np.random.default_rng(SEED)
    hh = persons[persons["hhgq"].astype(int) == 0].groupby(GEO, observed=True).size()
    occupied = np.ceil(hh.to_numpy() / 2.5).astype(np.int64)
    vacant = rng.binomial(occupied + 1, 0.11)
    blocks = hh.index.to_frame(index=False)
    rows = np.repeat(np.arange(len(blocks)), occupied + vacant)
    h1 = np.concatenate([np.r_[np.zeros(o, np.int64), np.ones(v, np.int64)] for o, v in zip(occupied, vacant)])
    units = blocks.iloc[rows].reset_index(drop=True)
    for col in GEO:
        units[col] = units[col].astype(str).astype("category")
    units["h1"] = h1
    # the AIAN flag of each unit's block (the person file's), for the AIAN spine
    flag = persons.groupby(persons["block"].astype(str), observed=True)["aian"].max()
    units["aian"] = units["block"].astype(str).map(flag).astype("int64")
    units.to_parquet(os.path.join(HERE, "pl94_synthetic_units.parquet"), index=False, compression="zstd")
    print(f"wrote {len(units)} housing units ({int(occupied.sum())} occupied) in {len(blocks)} blocks")


if __name__ == "__main__":
    main()
