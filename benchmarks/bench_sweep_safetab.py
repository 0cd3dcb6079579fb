"""`dpspec sweep` on SafeTab-P's production spec: realized error by geography level against the
noise the design states, and what the sweep costs over its runs.

    python benchmarks/bench_sweep_safetab.py [--runs 3] [--fractions 0.1,0.2]

For every point and geography level: the mean |released - true| of the stage-2 cells whose true
count is positive, pooled over the iteration levels and runs, beside E|Z| of the discrete
Gaussian at the design's sigma² (their ratio should be near 1); then the wall time, the time
inside the mechanism's runs (the floor: a sweep cannot be faster than its runs), their ratio,
and the peak memory of this process.
"""

from __future__ import annotations

import argparse
import math
import resource
import sys
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
SPEC = ROOT / "specs" / "safetab_p_production.dps"


def mean_abs(sigma2: float) -> float:
    """E|Z| of the discrete Gaussian with parameter sigma²."""
    k = np.arange(-int(40 * math.sqrt(sigma2)) - 10, int(40 * math.sqrt(sigma2)) + 11, dtype=float)
    w = np.exp(-k * k / (2 * sigma2))
    return float((np.abs(k) * w).sum() / w.sum())


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--fractions", default="0.1,0.2")
    args = ap.parse_args()
    from dpspec.api import parse, read_source
    from dpspec.sweep.grid import parse_axis, product
    from dpspec.sweep.runner import run_sweep

    spec = parse(read_source(str(SPEC)), str(SPEC))
    axes = [parse_axis(f"stage1_fraction={args.fractions}")]
    t0 = time.perf_counter()
    sweep = run_sweep(spec, axes, product(axes), runs=args.runs, seed=2028)
    wall = time.perf_counter() - t0
    print(f"{'fraction':>8}  {'level':>7}  {'cells':>7}  {'MAE':>7}  {'E|Z|':>7}  ratio")
    for p in sweep.points:
        mech, pspec, params = p.checked.mechanism, p.checked.spec, p.checked.params
        design = mech.design(pspec, params)
        s2 = {
            (c["geography"], c["iteration_level"]): c["noise_variance"]
            for c in mech.components(design, mech.fanouts(pspec, params, design))
            if c["stage"] == "stage 2"
        }
        pooled = defaultdict(lambda: [0, 0.0, 0.0])  # level -> cells, sum |error|, sum E|Z|
        for r in p.realized:
            head, role = r["table"].rsplit(", ", 1)
            if role != "cell" or r["size"] in ("all", "0"):
                continue
            acc = pooled[r["level"]]
            acc[0] += r["cells"]
            acc[1] += r["cells"] * r["mae"]
            acc[2] += r["cells"] * mean_abs(s2[(r["level"], int(head.rsplit(" ", 1)[1]))])
        for level, (n, err, expected) in pooled.items():
            print(
                f"{float(p.values['stage1_fraction']):>8g}  {level:>7}  {n:>7}  {err / n:>7.3f}  {expected / n:>7.3f}  "
                f"{err / expected:.3f}"
            )
    floor = sum(p.run_seconds for p in sweep.points)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(
        f"wall {wall:.1f} s for {len(sweep.points)} points x {args.runs} runs; floor (the mechanism's runs) "
        f"{floor:.1f} s; ratio {wall / floor:.2f}; peak memory {peak:.0f} MB"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
