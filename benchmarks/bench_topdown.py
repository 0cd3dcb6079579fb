"""TopDown benchmarks: the ACS national excerpt end to end, and synthetic states.

    python benchmarks/bench_topdown.py                     # excerpt, then a 1M-person state
    python benchmarks/bench_topdown.py --persons 100000    # a smaller state only
    python benchmarks/bench_topdown.py --skip-synthetic    # the excerpt only

For each run it prints the wall time per level (noise, solve), the share of node time spent
inside HiGHS, peak memory of the main process and of the solver workers, and for the noise the
ratio to a simple lower bound measured in the same run: drawing the same number of uniform
integers with the same generator (the exact sampler needs several per sample).
Targets: excerpt < 30 s; 1M persons with the 2,016-cell histogram < 15 min on 2 cores.
"""
from __future__ import annotations

import argparse
import os
import resource
import sys
import time
from fractions import Fraction
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "plugins")]

from dpspec_topdown.engine import run_topdown  # noqa: E402
from dpspec.noise import discrete_gaussian  # noqa: E402
from dpspec_topdown.synthetic import (LEVELS, PL94_VARIABLES, PRODUCTION_LEVEL_SHARES,  # noqa: E402
                                      PRODUCTION_RHO, generate_population, pl94_strategy)

ACS_CSV = ROOT / "specs" / "data" / "acs_national" / "acs_national_pl94.csv"
ACS_VARIABLES = {"hhgq": [0, 1, 2], "votingage": [0, 1], "hispanic": [0, 1], "cenrace": list(range(7))}
ACS_QUERIES = [((), Fraction(1, 5)), (("hhgq",), Fraction(1, 5)),
               (("votingage", "hispanic", "cenrace"), Fraction(2, 5)),
               (("hhgq", "votingage", "hispanic", "cenrace"), Fraction(1, 5))]
ACS_SHARES = {"nation": Fraction(1, 5), "state": Fraction(2, 5), "puma": Fraction(2, 5)}


def _peak_mb(res) -> tuple[float, float]:
    """Peak resident memory (MB) of this process and of the largest solver worker."""
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    workers = max((row.get("solver_peak_mb", 0.0) for row in res.timings["levels"].values()
                   if row.get("parallel")), default=0.0)
    return own, workers


def _accuracy(res, persons: pd.DataFrame) -> str:
    """Mean absolute error of unit totals per explicit level (persons per unit)."""
    parts = []
    for level in res.hierarchy.levels:
        if level.implicit:
            continue
        truth = persons.groupby(level.name).size().reindex(level.codes).to_numpy()
        got = np.asarray(res.histograms[level.name].sum(axis=1)).ravel()
        parts.append(f"{level.name} {np.abs(got - truth).mean():.2f}")
    return "mean |error| of unit totals: " + ", ".join(parts)


def _report(title: str, res, wall: float, n_persons: int, persons: pd.DataFrame | None = None) -> None:
    t = res.timings
    print(f"\n== {title}: {n_persons:,} persons, {res.schema.n_cells:,} cells, "
          f"{t['workers']} worker(s)")
    print(f"{'level':<11}{'units':>8}{'nodes':>7}{'noise s':>9}{'solve s':>9}{'HiGHS s':>9}"
          f"{'max vars':>9}{'milp':>6}{'capped':>7}")
    for level, row in t["levels"].items():
        print(f"{level:<11}{row['units']:>8}{row.get('nodes', 0):>7}{row['noise_seconds']:>9.2f}"
              f"{row.get('solve_seconds', 0):>9.2f}"
              f"{row.get('qp_seconds', 0) + row.get('rounding_seconds', 0):>9.2f}"
              f"{row.get('max_variables', 0):>9}{row.get('milp_nodes', 0):>6}{row.get('qp_capped_nodes', 0):>7}")
    own, kids = _peak_mb(res)
    print(f"total {wall:.1f} s (engine {t['total_seconds']:.1f} s); HiGHS share of node time "
          f"{t['solver_share']:.0%}; peak memory {own:,.0f} MB main, {kids:,.0f} MB largest worker "
          "(0: no pool)")
    print(f"rho declared {res.total_rho} = {float(res.total_rho):.4f}; spent {float(res.rho_spent):.6f}")
    if persons is not None:
        print(_accuracy(res, persons))


def _noise_lower_bound(n: int = 2_000_000) -> None:
    rng = np.random.default_rng(0)
    t0 = time.perf_counter()
    discrete_gaussian(Fraction(100), n, rng)
    exact = time.perf_counter() - t0
    t0 = time.perf_counter()
    rng.integers(0, 20, size=n)
    bound = time.perf_counter() - t0
    print(f"\n== noise: {n / exact / 1e6:.2f} M exact samples/s at sigma²=100; "
          f"{exact / bound:.1f}x the time to draw as many uniform integers")


def bench_acs(workers: int | None) -> None:
    persons = pd.read_csv(ACS_CSV, dtype={"state": str, "puma": str})
    t0 = time.perf_counter()
    res = run_topdown(persons, ["nation", "state", "puma"], ACS_VARIABLES,
                      {lv: ACS_QUERIES for lv in ACS_SHARES}, PRODUCTION_RHO, ACS_SHARES, "hamming",
                      [("state", ())], np.random.default_rng(2019), workers=workers)
    _report("ACS national excerpt (nation > state > PUMA)", res, time.perf_counter() - t0, len(persons), persons)


def bench_synthetic(n_persons: int, n_blocks: int, workers: int | None) -> None:
    t0 = time.perf_counter()
    persons = generate_population(n_persons, n_blocks, seed=1)
    gen = time.perf_counter() - t0
    last = [0.0]

    def progress(level, done, total):
        now = time.perf_counter()
        if done == total or now - last[0] > 30:
            last[0] = now
            print(f"  [{now - t0:7.1f} s] {level}: {done}/{total} nodes", flush=True)

    t1 = time.perf_counter()
    res = run_topdown(persons, ["nation"] + LEVELS, PL94_VARIABLES, pl94_strategy(), PRODUCTION_RHO,
                      PRODUCTION_LEVEL_SHARES, "hamming", [("state", ())], np.random.default_rng(1),
                      progress=progress, workers=workers)
    wall = time.perf_counter() - t1
    blocks = persons["block"].nunique()
    _report(f"synthetic state ({blocks:,} populated blocks; generated in {gen:.1f} s)", res, wall, n_persons, persons)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--persons", type=int, nargs="*", default=[1_000_000])
    ap.add_argument("--blocks-per-person", type=float, default=0.025)
    ap.add_argument("--workers", type=int, default=None)
    ap.add_argument("--skip-acs", action="store_true")
    ap.add_argument("--skip-synthetic", action="store_true")
    args = ap.parse_args(argv)
    print(f"cores available: {len(os.sched_getaffinity(0))}")
    _noise_lower_bound()
    if not args.skip_acs:
        bench_acs(args.workers)
    if not args.skip_synthetic:
        for n in args.persons:
            bench_synthetic(n, max(10, int(n * args.blocks_per_person)), args.workers)


if __name__ == "__main__":
    main()
