"""Writes staff.csv: a made-up staff table for the aggregate tutorial (no real person in it).

2,000 rows, seed 2026: a region (four of the five declared regions; nobody works on the islands),
a grade 1-4 and a yearly salary in thousands, drawn around a grade's level (a few above 200, so
the tutorial's clipping bound has something to clip).
"""

from __future__ import annotations

import pathlib

import numpy as np
import pandas as pd

HERE = pathlib.Path(__file__).parent


def main() -> None:
    rng = np.random.default_rng(2026)
    n = 2000
    region = rng.choice(["north", "south", "east", "west"], size=n, p=[0.4, 0.3, 0.2, 0.1])
    grade = rng.choice([1, 2, 3, 4], size=n, p=[0.4, 0.3, 0.2, 0.1])
    salary = np.maximum(15, np.rint(rng.normal(30 + 25 * grade, 12 + 6 * grade))).astype(int)
    pd.DataFrame({"region": region, "grade": grade, "salary": salary}).to_csv(HERE / "staff.csv", index=False)


if __name__ == "__main__":
    main()
