"""Build the synthetic six-level P.L. 94-171 person file used by specs/pl94_production_topdown.dps.

Run from the repository root: `python specs/data/pl94_synthetic/build.py` (deterministic).
The generator is the TopDown plugin's own (plugins/dpspec_topdown/synthetic.py); nothing in
the output is a census figure. It also writes `geography.csv`, the synthetic state's public
geography file (one row per block: every level's code and the AIAN flag), which the specs
declare public: the builder defines the geography, so it is public by construction.
`--geography` writes only that file, from the person file already built.
"""

from __future__ import annotations

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "plugins"))

from dpspec_topdown.synthetic import aian_blocks, generate_population  # noqa: E402

PERSONS, BLOCKS, SEED = 60_000, 6_000, 2020
AIAN_SEED, AIAN_TRACTS = 2024, 4
LEVELS = ["state", "county", "tract", "blockgroup", "block"]


def write_geography(frame) -> None:
    """geography.csv: the blocks of the synthetic state with their levels' codes and AIAN flag,
    sorted by code (the blocks the generator placed persons in, so the releases keep their units)."""
    geo = frame[LEVELS + ["aian"]].astype(str).drop_duplicates().sort_values(LEVELS)
    if geo["block"].duplicated().any():
        raise SystemExit("a block lies on both sides of the AIAN area or in two block groups")
    geo.to_csv(os.path.join(HERE, "geography.csv"), index=False)
    print(f"wrote geography.csv: {len(geo)} blocks")


def main() -> None:
    if "--geography" in sys.argv[1:]:
        import pandas as pd

        write_geography(pd.read_parquet(os.path.join(HERE, "pl94_synthetic.parquet")))
        return
    frame = generate_population(PERSONS, BLOCKS, seed=SEED)
    frame["aian"] = frame["block"].astype(str).isin(aian_blocks(frame, AIAN_SEED, AIAN_TRACTS)).astype("int64")
    for col in ("state", "county", "tract", "blockgroup", "block"):
        frame[col] = frame[col].astype("category")
    frame.to_parquet(os.path.join(HERE, "pl94_synthetic.parquet"), index=False, compression="zstd")
    print(
        f"wrote {len(frame)} persons in {frame['block'].nunique()} blocks "
        f"({int(frame['aian'].sum())} persons in {frame.loc[frame['aian'] == 1, 'block'].nunique()} AIAN blocks)"
    )
    write_geography(frame)


if __name__ == "__main__":
    main()
