"""Build the small synthetic data behind the audit examples (specs/audit/*.dps).

Households in one state, two counties, four tracts and twelve blocks, with a size and a tenure;
persons linked to their household by `hhid`, with an age group and an employment flag. Nothing
here is real: the examples only need data whose shape fits the specs. Deterministic (NumPy PCG64,
seed 2024); `--check` rebuilds in memory and exits 1 if the files differ.
"""

from __future__ import annotations

import io
import sys
from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
N_HOUSEHOLDS = 240
SEED = 2024
COUNTIES = {"Suffolk": ["S1", "S2"], "Middlesex": ["M1", "M2"]}


def build() -> dict[str, pd.DataFrame]:
    rng = np.random.Generator(np.random.PCG64(SEED))
    blocks = [(county, tract, f"{tract}{b}") for county, tracts in COUNTIES.items() for tract in tracts for b in "abc"]
    where = rng.integers(0, len(blocks), size=N_HOUSEHOLDS)
    size = rng.choice(np.arange(1, 7), size=N_HOUSEHOLDS, p=[0.2, 0.3, 0.2, 0.15, 0.1, 0.05])
    tenure = np.where(rng.random(N_HOUSEHOLDS) < 0.45, "owned", "rented")
    households = (
        pd.DataFrame(
            {
                "hhid": np.arange(1, N_HOUSEHOLDS + 1),
                "state": "MA",
                "county": [blocks[i][0] for i in where],
                "tract": [blocks[i][1] for i in where],
                "block": [blocks[i][2] for i in where],
                "size": size,
                "tenure": tenure,
            }
        )
        .sort_values(["county", "tract", "block", "hhid"], kind="stable")
        .reset_index(drop=True)
    )
    hhid = np.repeat(households["hhid"].to_numpy(), households["size"].to_numpy())
    n = len(hhid)
    persons = pd.DataFrame(
        {
            "pid": np.arange(1, n + 1),
            "hhid": hhid,
            "age": rng.choice(["child", "adult", "senior"], size=n, p=[0.25, 0.6, 0.15]),
            "employed": np.where(rng.random(n) < 0.55, "true", "false"),
        }
    )
    return {"households": households, "persons": persons}


def _csv(frame: pd.DataFrame) -> str:
    buf = io.StringIO()
    frame.to_csv(buf, index=False, lineterminator="\n")
    return buf.getvalue()


def main(argv) -> int:
    frames = build()
    if "--check" in argv:
        same = all((HERE / f"{name}.csv").read_text() == _csv(f) for name, f in frames.items())
        print("data up to date" if same else "data differs from a rebuild")
        return 0 if same else 1
    for name, frame in frames.items():
        (HERE / f"{name}.csv").write_text(_csv(frame))
        print(f"wrote {name}.csv ({len(frame)} rows)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
