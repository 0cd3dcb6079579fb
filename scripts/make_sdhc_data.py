"""Build the bundled synthetic S-DHC input, specs/data/sdhc/{units,persons}.parquet.

Seeded (2020), not census data: 3,000 occupied housing units with their persons, plus vacant
units and group quarters, spread over three states of production's US state_filter
(Connecticut 09, Maine 23, Vermont 50) and Puerto Rico (72), so the US spec
(specs/sdhc_production.dps) and the Puerto Rico spec (specs/sdhc_production_pr.dps) read the
same files, each keeping its own states as production's state_filter does.

    .venv/bin/python scripts/make_sdhc_data.py
"""

from __future__ import annotations

import pathlib

from dpspec_phsafe.synthetic import population

OUT = pathlib.Path(__file__).resolve().parent.parent / "specs" / "data" / "sdhc"


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    units, persons = population(3000, ["09", "23", "50", "72"], seed=2020)
    units.to_parquet(OUT / "units.parquet", index=False)
    persons.to_parquet(OUT / "persons.parquet", index=False)
    print(f"{len(units)} units, {len(persons)} persons -> {OUT}")


if __name__ == "__main__":
    main()
