"""Build the bundled SafeTab data: a synthetic state and SafeTab-P's published totals.

    python specs/data/safetab/build.py                    # everything
    python specs/data/safetab/build.py --published-only   # step 3 only (after a change to SafeTab-P's noise)
    python specs/data/safetab/build.py --geography-only   # step 2 only

1. 40,000 households and their persons from `dpspec_safetab.synthetic.population` (seed
   2020; race and ethnicity codes from the bundled 2020 code table) -> households.parquet,
   persons.parquet.
2. The synthetic state's geography, the files the specs declare public (`values from`): one
   row per tract with its state and county -> geography.csv; the places -> places.csv; the
   AIAN/NH areas -> aiannh.csv. The geography is synthetic, made up by the generator, so it is
   public by construction (as the Census Bureau's published geography files are for real data);
   read here from the generated households, it lists exactly the units they live in.
3. SafeTab-P (specs/safetab_p_production.dps) compiled on those persons with seed 2020; its
   published population-group totals (rows with no sex/age breakdown) ->
   safetab_p_published.parquet: what SafeTab-H reads as public information. Negative counts
   are set to 0 first, as SafeTab-P's post-processing does for the published Detailed DHC-A
   (`allow_negative_counts: false`; SafeTab-H's documentation: "the T1 counts have been
   postprocessed by SafeTab-P"). A seeded run is not protected; this is synthetic data, so
   that is fine here, never for real data.
"""

from __future__ import annotations

import os
import sys

import pandas as pd

HERE = os.path.dirname(os.path.abspath(__file__))
SPECS = os.path.dirname(os.path.dirname(HERE))
N_HOUSEHOLDS = 40_000
SEED = 2020


def published_totals() -> pd.DataFrame:
    """SafeTab-P's published population-group totals on the bundled persons (seed 2020)."""
    import dpspec
    from dpspec.run.compiler import compile_spec

    spec = dpspec.load(os.path.join(SPECS, "safetab_p_production.dps"))
    counts = compile_spec(spec, seed=SEED, audit=False).published["counts"]
    totals = counts[
        (counts["QSEX"] == "*") & (counts["AGE4"] == "*") & (counts["AGE9"] == "*") & (counts["AGE23"] == "*")
    ]
    totals = totals[["geography", "geocode", "group", "group_level", "detail", "count"]].reset_index(drop=True)
    totals["count"] = totals["count"].clip(lower=0)  # the published DDHC-A rounds negative counts up to 0
    return totals


def geography_files(households: pd.DataFrame) -> None:
    """The synthetic geography as public key files: tracts in their county and state, places,
    AIAN/NH areas (each sorted, one unit per row)."""

    def write(columns, name):
        units = households[columns].dropna().drop_duplicates().sort_values(columns)
        units.to_csv(os.path.join(HERE, name), index=False)
        print(f"{name}: {len(units)} units", file=sys.stderr)

    write(["state", "county", "tract"], "geography.csv")
    write(["place"], "places.csv")
    write(["aiannh"], "aiannh.csv")


def main() -> None:
    from dpspec_safetab.synthetic import population

    steps = sys.argv[1:]
    if "--published-only" not in steps and "--geography-only" not in steps:
        codes = pd.read_parquet(os.path.join(HERE, "codes.parquet"))["code"]
        households, persons = population(N_HOUSEHOLDS, codes, seed=SEED)
        households.to_parquet(os.path.join(HERE, "households.parquet"), index=False)
        persons.to_parquet(os.path.join(HERE, "persons.parquet"), index=False)
        print(f"{len(households)} households, {len(persons)} persons", file=sys.stderr)
    if "--published-only" not in steps:
        geography_files(pd.read_parquet(os.path.join(HERE, "households.parquet")))
    if "--geography-only" in steps:
        return
    totals = published_totals()
    totals.to_parquet(os.path.join(HERE, "safetab_p_published.parquet"), index=False)
    print(f"{len(totals)} published totals", file=sys.stderr)


if __name__ == "__main__":
    main()
