"""Convert the Census Bureau's published characteristic-iteration files into the three
Parquet tables the `safetab` mechanism reads, and the groups as a key file (run once; the output
is checked in).

Input: a directory holding the four pipe-separated files of the 2020 production
configuration (DAS_2020_DDHCA_Production_Code, configs/safetab-p/NMFv7-2020/; the same
content ships with DAS_2020_DDHCB_Production_Code, configs/safetab-h/NMFv5/):
race-and-ethnicity-codes.txt, race-characteristic-iterations.txt,
ethnicity-characteristic-iterations.txt, race-and-ethnicity-code-to-iteration.txt.

    python specs/data/safetab/import_iterations.py DIR specs/data/safetab

Only the layout changes (one iteration table with a `kind` column, booleans as booleans,
"Null" flags of level-0 iterations as missing); no row is added or dropped.
"""

from __future__ import annotations

import os
import sys

import pandas as pd


def _flag(series: pd.Series) -> pd.Series:
    return series.map({"True": True, "False": False}).astype("boolean")


def convert(src: str, dst: str) -> None:
    read = lambda name: pd.read_csv(os.path.join(src, name), sep="|", dtype=str, keep_default_na=False)  # noqa: E731
    codes = read("race-and-ethnicity-codes.txt").rename(columns={"RACE_ETH_CODE": "code", "RACE_ETH_NAME": "name"})
    race = read("race-characteristic-iterations.txt").assign(kind="race")
    eth = read("ethnicity-characteristic-iterations.txt").assign(kind="ethnicity", ALONE="Null")
    it = pd.concat([race, eth], ignore_index=True)
    iterations = pd.DataFrame(
        {
            "iteration": it["ITERATION_CODE"],
            "name": it["ITERATION_NAME"],
            "kind": it["kind"],
            "level": it["LEVEL"].astype(int),
            "alone": _flag(it["ALONE"]),
            "detailed_only": _flag(it["DETAILED_ONLY"]),
            "coarse_only": _flag(it["COARSE_ONLY"]),
        }
    )
    mapping = read("race-and-ethnicity-code-to-iteration.txt").rename(
        columns={"ITERATION_CODE": "iteration", "RACE_ETH_CODE": "code"}
    )[["code", "iteration"]]
    os.makedirs(dst, exist_ok=True)
    codes[["code", "name"]].to_parquet(os.path.join(dst, "codes.parquet"), index=False)
    iterations.to_parquet(os.path.join(dst, "iterations.parquet"), index=False)
    mapping.to_parquet(os.path.join(dst, "code_to_iteration.parquet"), index=False)
    # the population groups as a key file (`group : category values from "groups.csv"`): the keys
    # of SafeTab-H's published totals, declared as the geography files declare the units
    iterations[["iteration"]].rename(columns={"iteration": "group"}).to_csv(
        os.path.join(dst, "groups.csv"), index=False
    )


if __name__ == "__main__":
    convert(sys.argv[1], sys.argv[2])
