"""Build the person file for the ACS swapping spec from the unchanged ACS excerpt.

    python specs/data/acs_swap/build_ma2019_swap.py          # writes ma2019_persons.csv
    python specs/data/acs_swap/build_ma2019_swap.py --check  # exit 1 if a rebuild differs

The .dps language has no derived columns, so the two columns the swap needs and the excerpt
lacks are computed here, from ../acs/ma2019.csv only:
  STATE     the state FIPS code, the part of PUMA before the dash ("25" for Massachusetts),
            so that PUMA can be declared nested in STATE;
  AGE_BAND  AGEP in five bands: 0-17, 18-29, 30-44, 45-64, 65+ (the match key's age).
Every other column is copied as text, unchanged. Row order is the source's.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd

HERE = Path(__file__).resolve().parent
SOURCE = HERE.parent / "acs" / "ma2019.csv"
TARGET = HERE / "ma2019_persons.csv"
KEEP = ["STATE", "PUMA", "SEX", "AGEP", "AGE_BAND", "RAC1P", "HISP"]
BANDS = [(0, 17, "0-17"), (18, 29, "18-29"), (30, 44, "30-44"), (45, 64, "45-64"), (65, 200, "65+")]


def age_band(age: pd.Series) -> pd.Series:
    """Each age in exactly one band; an age outside every band is an error, not a guess."""
    out = pd.Series(pd.NA, index=age.index, dtype="string")
    for low, high, label in BANDS:
        out[(age >= low) & (age <= high)] = label
    if out.isna().any():
        bad = age[out.isna()].iloc[0]
        raise ValueError(f"age {bad} falls in no band")
    return out


def build() -> pd.DataFrame:
    raw = pd.read_csv(SOURCE, dtype=str, keep_default_na=False)
    out = raw.copy()
    out["STATE"] = raw["PUMA"].str.split("-", n=1).str[0]
    out["AGE_BAND"] = age_band(raw["AGEP"].astype(int))
    return out[KEEP]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="rebuild in memory and compare with the file")
    args = parser.parse_args(argv)
    frame = build()
    text = frame.to_csv(index=False, lineterminator="\n")
    if args.check:
        same = TARGET.exists() and TARGET.read_text() == text
        print(f"{TARGET.name}: {'up to date' if same else 'DIFFERS from a rebuild'}")
        return 0 if same else 1
    tmp = TARGET.with_suffix(".tmp")
    tmp.write_text(text)
    tmp.replace(TARGET)
    print(f"wrote {TARGET} ({len(frame)} rows)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
