"""Build the synthetic six-level P.L. 94-171 person file used by specs/pl94_production_topdown.dps.

Run from the repository root: `python specs/data/pl94_synthetic/build.py` (deterministic).
The generator is the TopDown plugin's own (plugins/dpspec_topdown/synthetic.py); nothing in
the output is a census figure.
"""
from __future__ import annotations

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "plugins"))

from dpspec_topdown.synthetic import aian_blocks, generate_population  # noqa: E402

PERSONS, BLOCKS, SEED = 60_000, 6_000, 2020
AIAN_SEED, AIAN_TRACTS = 2024, 4


def main() -> None:
    frame = generate_population(PERSONS, BLOCKS, seed=SEED)
    frame["aian"] = frame["block"].astype(str).isin(aian_blocks(frame, AIAN_SEED, AIAN_TRACTS)).astype("int64")
    for col in ("state", "county", "tract", "blockgroup", "block"):
        frame[col] = frame[col].astype("category")
    frame.to_parquet(os.path.join(HERE, "pl94_synthetic.parquet"), index=False, compression="zstd")
    print(f"wrote {len(frame)} persons in {frame['block'].nunique()} blocks "
          f"({int(frame['aian'].sum())} persons in {frame.loc[frame['aian'] == 1, 'block'].nunique()} AIAN blocks)")


if __name__ == "__main__":
    main()
