"""Draws per second of the Wasserstein exponential mechanism's exact samplers (seed 2, issue 23).

    python benchmarks/bench_wasserstein.py [--draws D] [--sizes 67 3000] [--epsilon 0.5 10]

For each size n (default 67, Pennsylvania's counties, and 3,000, a national county release) it
builds counts like Pennsylvania's August 2020 (drawn from a Dirichlet-multinomial with the real
month's shape, repeated for 3,000), the previous month's as the prior, and times D draws
(default 100) of each base measure at each epsilon. The floor is drawing the same number of
unconstrained two-sided geometric (discrete Laplace) counts, n x D, with the project's own
sampler at the same scale; the ratio says what the base measure costs beyond the noise itself.
Peak memory is the process's maximum resident size at the end (ru_maxrss).
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
sys.path[:0] = [str(ROOT), str(ROOT / "plugins")]

from dpspec.errors import MechanismError  # noqa: E402
from dpspec.run.noise import discrete_laplace  # noqa: E402
from dpspec_wasserstein import samplers  # noqa: E402


def counts_like_pennsylvania(n: int, rng):
    monthly = pd.read_csv(ROOT / "specs" / "data" / "pa_covid" / "pa_covid_monthly_2020.csv")
    cur = monthly[monthly["month"] == "2020-08"]["cases"].to_numpy()
    prev = monthly[monthly["month"] == "2020-07"]["cases"].to_numpy()
    reps = -(-n // len(cur))
    cur, prev = np.tile(cur, reps)[:n], np.tile(prev, reps)[:n]
    return cur.astype(np.int64), prev.astype(np.int64)


def timed(fn):
    start = time.perf_counter()
    out = fn()
    return time.perf_counter() - start, out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--draws", type=int, default=100)
    ap.add_argument("--sizes", type=int, nargs="+", default=[67, 3000])
    ap.add_argument("--epsilon", type=Fraction, nargs="+", default=[Fraction(1, 2), Fraction(10)])
    args = ap.parse_args(argv)
    rng = np.random.default_rng(1)
    print(f"{'n':>5} {'eps':>5} {'base':>10} {'seconds':>8} {'draws/s':>9} {'acceptance':>10} {'floor s':>8} {'ratio':>7}")
    for n in args.sizes:
        counts, prev = counts_like_pennsylvania(n, rng)
        total = int(counts.sum())
        for eps in args.epsilon:
            r = samplers.rate(eps, 2)  # the case study's sensitivity given the total
            floor, _ = timed(lambda: discrete_laplace(1 / r, n * args.draws, rng))
            runs = {"naive": lambda: samplers.naive(counts, r, args.draws, rng),
                    "congenial": lambda: samplers.congenial(counts, total, r, args.draws, rng, 10**9),
                    "prior": lambda: samplers.prior(counts, prev + 1, total, r, args.draws, rng, 10**9)}
            for base, fn in runs.items():
                try:
                    seconds, (_, info) = timed(fn)
                except MechanismError as err:
                    print(f"{n:>5} {float(eps):>5g} {base:>10} refused: {err}")
                    continue
                acc = info.get("acceptance")
                print(f"{n:>5} {float(eps):>5g} {base:>10} {seconds:>8.3f} {args.draws / seconds:>9.1f} "
                      f"{'-' if acc is None else f'{acc:.3f}':>10} {floor:>8.3f} {seconds / floor:>7.1f}")
    print(f"peak memory: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
