"""PHSafe (2020 S-DHC) benchmark: a synthetic nation of about 1.1M persons in 400,000 households
over the 51 states, run with the US production parameters (specs/sdhc_production.dps).

    python benchmarks/bench_phsafe.py                      # 400,000 households
    python benchmarks/bench_phsafe.py --households 40000   # smaller

Prints the wall time of the mechanism (the join by household, truncation to tau, the cells and
iterations of every record, the 46 measurements' counts on their full grids with keyed exact
discrete Gaussian noise, the post-processed PH5_num and PH8_num), records per second, the peak
resident memory of the process against the input frames, and the ratio to a floor measured in
the same run: the same inner join in pandas and one plain groupby-count per measurement over
(region, iteration code, data cell) columns prepared beforehand (not timed), i.e. the counting
alone, without truncation, cell mapping, the zero cells of the grid or noise. Then the noise
alone: the same number of keyed draws. The mechanism runs twice: the first run also builds the
exact sampler's alias tables, one per distinct noise scale, a fixed cost whatever the data size.
"""

from __future__ import annotations

import argparse
import resource
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "plugins")]

from dpspec import load  # noqa: E402
from dpspec.contract.mechanism import resolve_params  # noqa: E402
from dpspec_phsafe.plugin import PHSafe  # noqa: E402
from dpspec_phsafe.synthetic import population  # noqa: E402
from dpspec_phsafe.tabulate import ITERATION_CODES, Records, iterations, measure, table_records  # noqa: E402

SPEC = ROOT / "specs" / "sdhc_production.dps"


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _design():
    spec = load(str(SPEC))
    params, problems = resolve_params(PHSafe(), spec.mechanism, spec)
    assert not problems, problems
    return PHSafe().design(spec, params)


def floor(design, persons, units, rec) -> float:
    """The join plus one groupby-count per measurement, on prepared columns."""
    prepared = []
    for m in design.measured():
        cols, mask, cell, race, eth = table_records(m.table, rec, design.tau.get(m.table))
        it = iterations(m.level, cols[race].astype(np.int64), cols[eth].astype(np.int64))
        keep = mask & (it >= 0)
        region = "US" if m.geography == "usa" else np.asarray(rec.states)[cols["region"][keep]]
        prepared.append(
            pd.DataFrame(
                {"region": region, "iteration": np.asarray(ITERATION_CODES[m.level])[it[keep]], "cell": cell[keep]}
            )
        )
    t0 = time.perf_counter()
    persons.merge(units, on="MAFID", how="inner")
    for frame in prepared:
        frame.groupby(["region", "iteration", "cell"], sort=False).size()
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--households", type=int, default=400_000)
    args = ap.parse_args()
    design = _design()
    units, persons = population(args.households, list(design.states), seed=7)
    input_mb = (units.memory_usage(deep=True).sum() + persons.memory_usage(deep=True).sum()) / 2**20
    base_mb = _peak_mb()
    print(
        f"{len(units):,} units, {len(persons):,} persons ({input_mb:.0f} MB as frames); "
        f"peak RSS before the run {base_mb:.0f} MB"
    )
    t0 = time.perf_counter()
    rec = Records(persons, units, design.states, "synthetic")
    out = measure(design, rec, run_key=2020)
    cold = time.perf_counter() - t0
    t0 = time.perf_counter()  # again: the sampler's alias tables (one per distinct sigma^2) are built once per process
    rec = Records(persons, units, design.states, "synthetic")
    out = measure(design, rec, run_key=2021)
    wall = time.perf_counter() - t0
    peak = _peak_mb()
    print(
        f"mechanism: {cold:.2f} s wall on the first run (with the noise sampler's one-off tables), {wall:.2f} s "
        f"on the second; {len(persons) / wall:,.0f} person records/s, {len(out):,} released counts"
    )
    print(f"peak RSS {peak:.0f} MB (+{peak - base_mb:.0f} MB over the inputs' {input_mb:.0f} MB)")
    f = floor(design, persons, units, rec)
    print(f"floor (pandas join + groupby-count per measurement): {f:.2f} s; ratio {wall / f:.1f}x")
    from dpspec.api import KeyColumns, keyed_discrete_gaussian

    n = len(out)
    t0 = time.perf_counter()
    keyed_discrete_gaussian(1000, 99, KeyColumns(("bench",), (np.arange(n),)), 1)
    print(f"noise alone: {n:,} keyed exact draws in {time.perf_counter() - t0:.2f} s")


if __name__ == "__main__":
    main()
