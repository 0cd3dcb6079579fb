"""Post-processing-only facility bounds (postprocess_only.py) at scale.

    python benchmarks/bench_postprocess_only.py --persons 200000 --blocks 5000

A synthetic state with the P.L. 94 variables; a tenth of the blocks hold one group-quarters type
(half their persons), the rest households only. The release is held (equal_to) to its
block x major type (household, institutional, noninstitutional) x voting age counts, and the
facility bounds on the detailed type (none of a type a block lacks, at least one person per
occupied facility) are stated two ways on the same persons and seed: kept in every solve, and
post-processing only with production's heuristic (the DHC persons setting). For each it prints the
wall time, the throughput, the heuristic's time and moves per level, the rows the release still
breaks, and the peak memory of the process. The floor is the same run without the facility bounds
(same persons, seed and equality): the heuristic's run does that work and more, so it cannot beat it.
"""

from __future__ import annotations

import argparse
import resource
import sys
import time
from fractions import Fraction
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "plugins"))

from dpspec_topdown.run.topdown import run_topdown  # noqa: E402
from dpspec_topdown.design import Design  # noqa: E402
from dpspec_topdown.run.context import Records, RunContext  # noqa: E402
from dpspec_topdown.measurement.histogram import Recode  # noqa: E402
from dpspec_topdown.synthetic import (  # noqa: E402
    LEVELS,
    PL94_VARIABLES,
    PRODUCTION_LEVEL_SHARES,
    generate_population,
    pl94_strategy,
)

MAJOR = {0: "hh", 1: "inst", 2: "inst", 3: "inst", 4: "inst", 5: "noninst", 6: "noninst", 7: "noninst"}


def population(n_persons: int, n_blocks: int, seed: int = 46) -> pd.DataFrame:
    persons = generate_population(n_persons, n_blocks, seed=seed)
    h = persons["hhgq"].to_numpy().copy()
    blocks = persons["block"].to_numpy()
    codes = pd.unique(blocks)
    for i, b in enumerate(codes[::10]):  # a tenth of the blocks: one group-quarters type each
        idx = np.flatnonzero(blocks == b)
        h[idx[: max(1, idx.size // 2)]] = 1 + i % 7
    return persons.assign(hhgq=h)


def bounds(persons: pd.DataFrame) -> list:
    present = persons.groupby(["block", "hhgq"], observed=True).size().unstack(fill_value=0)
    present = present.reindex(columns=range(8), fill_value=0)
    lower = (present > 0).astype(np.int64)
    lower[0] = 0
    return [("hhgq_total", ("hhgq",), lower, present.where(present == 0, np.inf).astype(np.float64))]


def run(persons, product, post_only: bool | None, seed: int):
    """post_only None: the floor, the run without the facility bounds."""
    shares = dict(PRODUCTION_LEVEL_SHARES)
    major = Recode.build("major", "hhgq", range(8), {"hh": [0], "inst": [1, 2, 3, 4], "noninst": [5, 6, 7]})
    t0 = time.perf_counter()
    res = run_topdown(
        Records(
            persons,
            bounds=bounds(persons) if post_only is not None else [],
            equalities=[("pl94", ("major", "votingage"), product)],
        ),
        Design(
            ["nation"] + LEVELS,
            PL94_VARIABLES,
            pl94_strategy(tuple(shares)),
            Fraction(1, 2),
            shares,
            "hamming",
            [("state", ())],
            recodes=[major],
            postprocess_only=["hhgq_total"] if post_only else (),
        ),
        RunContext(np.random.default_rng(seed), workers=2),
    )
    return res, time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--persons", type=int, default=200_000)
    ap.add_argument("--blocks", type=int, default=5_000)
    ap.add_argument("--seed", type=int, default=3)
    args = ap.parse_args()
    persons = population(args.persons, args.blocks)
    product = (
        persons.assign(major=persons["hhgq"].map(MAJOR))
        .groupby(["block", "major", "votingage"], observed=True)
        .size()
        .rename("count")
        .reset_index()
    )
    print(
        f"{len(persons):,} persons, {persons['block'].nunique():,} populated blocks, "
        f"{int((persons['hhgq'] > 0).sum()):,} in group quarters"
    )
    floor, floor_wall = run(persons, product, None, args.seed)
    print(f"floor (no facility bounds): {floor_wall:.1f} s, {len(persons) / floor_wall:,.0f} persons/s")
    for post_only in (False, True):
        try:
            res, wall = run(persons, product, post_only, args.seed)
        except Exception as exc:  # kept in every solve, the bounds may make a split infeasible
            print(f"bounds in every solve: {type(exc).__name__}: {exc}")
            continue
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        label = "post-processing only" if post_only else "bounds in every solve"
        print(
            f"{label}: {wall:.1f} s, {len(persons) / wall:,.0f} persons/s, {wall / floor_wall:.2f}x the floor, "
            f"peak memory {peak:,.0f} MB (process so far)"
        )
        if post_only:
            pp = res.timings["postprocess"]
            for level, moves in pp["moves"].items():
                print(f"  {level:<11} moves {moves:>6,}  heuristic {pp['seconds'].get(level, 0.0):6.2f} s")
            print(
                f"  heuristic total {sum(pp['seconds'].values()):.2f} s of {wall:.1f} s; rows left broken at a "
                f"node {len(pp['unrepaired'])}, in the release {len(pp['violations'])}"
            )


if __name__ == "__main__":
    main()
