"""`dpspec sweep` on the seed's swap figure: MAPE of the 1940 county x tenure table by swap rate.

    python benchmarks/bench_sweep.py [--runs 20] [--rates 0.01,0.05,0.1,0.5] [--workers N]

Prints, per rate, the mean and spread of the MAPE over the runs (the seed reports 13.78% at 50%),
the wall time, the time spent inside the mechanism's runs (the floor: a sweep cannot be faster than
its runs) and their ratio, and the peak memory of this process.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SPEC = ROOT / "specs" / "ma1940_swap.dps"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--rates", default="0.01,0.05,0.1,0.5")
    ap.add_argument("--workers", type=int, default=1, help="points as units of work on this many processes")
    args = ap.parse_args()
    from dpspec.api import parse, read_source
    from dpspec.sweep.grid import parse_axis, product
    from dpspec.sweep.runner import run_sweep

    spec = parse(read_source(str(SPEC)), str(SPEC))
    axes = [parse_axis(f"rate={args.rates}")]
    t0 = time.perf_counter()
    sweep = run_sweep(spec, axes, product(axes), runs=args.runs, seed=2028, workers=args.workers)
    wall = time.perf_counter() - t0
    print(f"{'rate':>6}  {'eps':>7}  {'MAPE mean':>9}  {'sd':>6}  {'min':>6}  {'max':>6}  runs")
    for p in sweep.points:
        mapes = [
            r["mape_percent"]
            for r in p.realized
            if r["table"] == "count households by county, tenure" and r["size"] == "all"
        ]
        sd = statistics.stdev(mapes) if len(mapes) > 1 else 0.0
        print(
            f"{float(p.values['rate']):>6g}  {p.common['epsilon']:>7.2f}  {statistics.mean(mapes):>9.3f}  {sd:>6.3f}  "
            f"{min(mapes):>6.3f}  {max(mapes):>6.3f}  {len(mapes)}"
        )
    # the floor: the mechanism's own runs, timed inside the same sweep (the rest is the sweep's
    # accounting, counting and comparison against the data)
    floor = sum(p.run_seconds for p in sweep.points)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # pool workers (forkserver's children) not counted
    print(
        f"wall {wall:.1f} s for {len(sweep.points)} points x {args.runs} runs on {args.workers} process(es); floor (the mechanism's runs) {floor:.1f} s; "
        f"ratio {wall / floor:.2f}; peak memory {peak:.0f} MB (this process"
        + (", workers not counted)" if args.workers > 1 else ")")
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
