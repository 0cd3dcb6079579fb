"""Rebuild ma1940_households.parquet from the published county x tenure table.

The 1940 Massachusetts full count is published here only as households by county and tenure;
the seed paper's demonstration also needs household size (the match key is state x size).
Sizes are therefore drawn, with a fixed seed, from an approximate 1940 size distribution,
constrained so that exactly 264,331 households have two persons and that this is the largest
size stratum, as in the paper. See README.md for what is real and what is drawn.

Usage: python build_ma1940.py [--check]   (--check rebuilds in memory and compares)
"""

from __future__ import annotations

import sys
from fractions import Fraction
from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
CSV = HERE / "ma1940_county_tenure.csv"
PARQUET = HERE / "ma1940_households.parquet"

SEED = 1940
TWO_PERSON_HOUSEHOLDS = 264_331  # the seed paper's b: the largest stratum (MA x size 2)
MAX_SIZE = 20

# Approximate share (percent) of occupied dwelling units by persons per unit, United States,
# 1940 census, rounded to half a percent; the open class 7+ is spread over 7..20 below.
SHARES_1940 = {
    1: Fraction("8.0"),
    2: Fraction("25.0"),
    3: Fraction("22.0"),
    4: Fraction("18.0"),
    5: Fraction("11.5"),
    6: Fraction("6.5"),
}
SHARE_7_PLUS = Fraction("9.0")
TAIL_RATIO = Fraction(3, 5)  # each size above 6 is 3/5 as common as the one before


def size_weights() -> dict[int, Fraction]:
    """Exact weights for sizes 1..20: the 1940 shares with a geometric 7+ tail."""
    tail = {s: TAIL_RATIO ** (s - 7) for s in range(7, MAX_SIZE + 1)}
    tail_total = sum(tail.values())
    weights = dict(SHARES_1940)
    weights.update({s: SHARE_7_PLUS * w / tail_total for s, w in tail.items()})
    assert sum(weights.values()) == 100
    return weights


def size_counts(total: int) -> dict[int, int]:
    """Statewide households per size: size 2 fixed, the rest by largest remainder (exact)."""
    weights = size_weights()
    others = {s: w for s, w in weights.items() if s != 2}
    rest = total - TWO_PERSON_HOUSEHOLDS
    scale = Fraction(rest) / sum(others.values())
    ideal = {s: w * scale for s, w in others.items()}
    counts = {s: int(v) for s, v in ideal.items()}  # floor; all values are positive
    short = rest - sum(counts.values())
    for s in sorted(ideal, key=lambda s: (-(ideal[s] - counts[s]), s))[:short]:
        counts[s] += 1
    counts[2] = TWO_PERSON_HOUSEHOLDS
    counts = dict(sorted(counts.items()))
    assert sum(counts.values()) == total
    assert all(counts[2] > c for s, c in counts.items() if s != 2), "size 2 must be largest"
    return counts


def build() -> pd.DataFrame:
    table = pd.read_csv(CSV)
    counties = list(table["county"])
    long = table.melt(id_vars="county", value_vars=["owned", "rented"], var_name="tenure", value_name="households")
    long["county"] = pd.Categorical(long["county"], categories=counties)
    long = long.sort_values(["county", "tenure"], kind="stable").reset_index(drop=True)
    n_per_cell = long["households"].to_numpy()
    total = int(n_per_cell.sum())
    counts = size_counts(total)
    # A random arrangement of the statewide sizes over households: each county x tenure cell
    # gets a multivariate hypergeometric share, so statewide counts are exact.
    sizes = np.repeat(np.array(list(counts), dtype=np.uint8), list(counts.values()))
    sizes = np.random.default_rng(SEED).permutation(sizes)
    df = pd.DataFrame(
        {
            "state": pd.Categorical.from_codes(np.zeros(total, dtype=np.int8), categories=["MA"]),
            "county": pd.Categorical.from_codes(
                np.repeat(long["county"].cat.codes.to_numpy(), n_per_cell), categories=counties
            ),
            "tenure": pd.Categorical.from_codes(
                np.repeat((long["tenure"] == "rented").to_numpy().astype(np.int8), n_per_cell),
                categories=["owned", "rented"],
            ),
            "size": sizes,
        }
    )
    # Sorted rows compress to almost nothing; the household id follows that order.
    df = df.sort_values(["county", "tenure", "size"], kind="stable").reset_index(drop=True)
    df["hhid"] = np.arange(1, total + 1, dtype=np.int32)
    return df


def write(df: pd.DataFrame, path: Path = PARQUET) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.Table.from_pandas(df, preserve_index=False)
    tmp = path.with_suffix(".parquet.tmp")
    # Household ids are consecutive: delta encoding stores them in a few bytes.
    pq.write_table(
        table,
        tmp,
        compression="zstd",
        use_dictionary=["state", "county", "tenure", "size"],
        column_encoding={"hhid": "DELTA_BINARY_PACKED"},
    )
    tmp.replace(path)


def main(argv: list[str]) -> int:
    df = build()
    if "--check" in argv:
        same = pd.read_parquet(PARQUET).equals(df)
        print("ma1940_households.parquet is", "up to date" if same else "DIFFERENT from a rebuild")
        return 0 if same else 1
    write(df)
    print(f"wrote {PARQUET.name}: {len(df):,} households, {PARQUET.stat().st_size:,} bytes")
    by_size = df["size"].value_counts().sort_index()
    print("households by size:", {int(k): int(v) for k, v in by_size.items()})
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
