"""Throughput of `dpspec verify` on the bundled specs whose mechanisms batch their runs.

    python benchmarks/bench_verify.py [--runs N ...] [--seed S]

For each spec (randomized response, swapping, TopDown, SafeTab-P and -H) and each number of
runs per dataset it prints the wall time, mechanism runs per second (both datasets counted),
the lower bound and the claim. The floor measured in the same run is the cost of drawing the randomness alone:
N exact Bernoulli(p) draws per unit for randomized response, which any verification of it
must at least make; the ratio says how much the event selection and intervals add.
"""

from __future__ import annotations

import argparse
import sys
import time
from fractions import Fraction
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "plugins")]

import dpspec  # noqa: E402
from dpspec.run.compiler import make_rng  # noqa: E402
from dpspec.run.noise import bernoulli  # noqa: E402
from dpspec.verify import verify  # noqa: E402

import doc_table  # noqa: E402

SPECS = [
    "acs_ma_vision_rr.dps",
    "ma1940_swap.dps",
    "acs_national_topdown.dps",
    "safetab_p_production.dps",
    "safetab_h_production.dps",
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--seed", type=int, default=1)
    doc_table.add_option(parser)
    args = parser.parse_args()
    print(f"{'spec':<28} {'runs':>9} {'seconds':>8} {'runs/s':>10} {'bound':>8} {'claim':>8} verdict")
    rows = []
    for name in SPECS:
        spec = dpspec.load(str(ROOT / "specs" / name))
        for n in args.runs:
            t0 = time.perf_counter()
            result = verify(spec, runs=n, seed=args.seed)
            wall = time.perf_counter() - t0
            print(
                f"{name:<28} {n:>9,} {wall:>8.2f} {2 * n * len(result.pairs) / wall:>10,.0f} "
                f"{result.lower_bound:>8.4f} {result.claimed:>8.4f} {result.verdict}"
            )
            rows.append(
                [
                    f"`{name}`",
                    f"{n:,}",
                    f"{wall:.2f}",
                    f"{2 * n * len(result.pairs) / wall:,.0f}",
                    f"{result.lower_bound:.4f}",
                    f"{result.claimed:.4f}",
                    result.verdict,
                ]
            )
    floors = []
    rng = make_rng(args.seed)
    for n in args.runs:
        t0 = time.perf_counter()
        bernoulli(Fraction(3, 4), 2 * 3 * n, rng)  # two datasets of three units
        floor = time.perf_counter() - t0
        print(f"floor: {2 * 3 * n:,} Bernoulli draws in {floor:.3f} s")
        floors.append(f"floor at {n:,} runs: {2 * 3 * n:,} exact Bernoulli draws in {floor:.3f} s")
    doc_table.write(
        "bench_verify",
        "Empirical verification (dpspec verify)",
        __doc__.split("\n\n")[0],
        ["spec", "runs per dataset", "seconds", "runs/s", "lower bound", "claim", "verdict"],
        rows,
        notes=[f"seed {args.seed}"] + floors,
        enabled=not args.no_doc,
    )


if __name__ == "__main__":
    main()
