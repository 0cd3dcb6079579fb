"""Derive a P.L. 94-like person file from the NIST ACS national excerpt (see README.md).

Run from the repository root:  python specs/data/acs_national/build.py [path/to/national2019.csv]
Deterministic: the same input gives byte-identical output. It also writes `pumas.csv`, the
public list of the excerpt's PUMAs with their states (the spec's geography file);
`--pumas` writes only that file, from the person file already built.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
DEFAULT_SOURCE = HERE.parents[3] / "shared" / "data" / "nist-acs-excerpts" / "national2019.csv"
OUTPUT = HERE / "acs_national_pl94.csv"
PUMAS = HERE / "pumas.csv"

# RAC1P (ACS recode of race) -> a 7-category cenrace; RAC1P 3, 4 and 5 are all American
# Indian / Alaska Native. The excerpt has no multi-race detail: RAC1P 9 ("two or more
# races") becomes one category instead of P.L. 94's 57 combinations.
CENRACE = {"1": 0, "2": 1, "3": 2, "4": 2, "5": 2, "6": 3, "7": 4, "8": 5, "9": 6}
CENRACE_LABELS = [
    "white alone",
    "black alone",
    "american indian or alaska native alone",
    "asian alone",
    "native hawaiian or other pacific islander alone",
    "some other race alone",
    "two or more races",
]
# HOUSING_TYPE -> hhgq: 0 household, 1 institutional group quarters, 2 non-institutional.
HHGQ = {"1": 0, "2": 1, "3": 2}


def derive(source: pd.DataFrame) -> pd.DataFrame:
    """The derived columns, one row per source person, in source order."""
    puma = source["PUMA"].astype(str)
    if not puma.str.fullmatch(r"\d{2}-\d{5}").all():
        raise ValueError("PUMA values must look like 'SS-PPPPP'")
    out = pd.DataFrame(
        {
            "state": puma.str.slice(0, 2),
            "puma": puma,
            "hhgq": source["HOUSING_TYPE"].astype(str).map(HHGQ),
            "votingage": (source["AGEP"].astype(int) >= 18).astype(int),
            "hispanic": (source["HISP"].astype(str) != "0").astype(int),
            "cenrace": source["RAC1P"].astype(str).map(CENRACE),
        }
    )
    if out.isna().any().any():
        bad = out.columns[out.isna().any()].tolist()
        raise ValueError(f"unmapped source values in {bad}")
    out[["hhgq", "cenrace"]] = out[["hhgq", "cenrace"]].astype(np.int64)
    return out


def write_pumas(frame: pd.DataFrame) -> None:
    """pumas.csv: the excerpt's PUMAs (published with it: SDNist's documentation lists them), sorted."""
    pumas = frame[["state", "puma"]].astype(str).drop_duplicates().sort_values(["state", "puma"])
    pumas.to_csv(PUMAS, index=False, lineterminator="\n")
    print(f"wrote {len(pumas)} PUMAs to {PUMAS}")


def main(argv: list[str]) -> None:
    if "--pumas" in argv[1:]:
        write_pumas(pd.read_csv(OUTPUT, dtype=str, keep_default_na=False))
        return
    source = Path(argv[1]) if len(argv) > 1 else DEFAULT_SOURCE
    frame = derive(pd.read_csv(source, dtype=str, keep_default_na=False))
    frame.to_csv(OUTPUT, index=False, lineterminator="\n")
    print(f"wrote {len(frame)} persons to {OUTPUT}")
    write_pumas(frame)


if __name__ == "__main__":
    main(sys.argv)
