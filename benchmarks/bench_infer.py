"""Throughput and efficiency of `dpspec infer`'s importance sampler (Algorithm 2) by target size.

    python benchmarks/bench_infer.py [K ...] [--proposals P] [--sigma2 S]

For each number of cells K (default 10 50 200 1000) it builds a synthetic target: K cells
under one public total N = 100 K, true counts drawn from the default Dirichlet-multinomial
prior, each cell released with discrete Gaussian noise (sigma² S, default 16.7 as in the bundled
example). It prints the wall time of P importance proposals (default 20,000), proposals per
second, the effective sample size as a share of P, the pilot's estimate of exact rejection's
acceptance rate (log10), and the ratio to a floor measured in the same run: drawing the P x K
discrete Gaussian steps alone, which any proposal of this kind must at least do.
"""

from __future__ import annotations

import argparse
import sys
import time
from fractions import Fraction
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "plugins")]

from dpspec import ir  # noqa: E402
from dpspec.run.compiler import make_rng  # noqa: E402
from dpspec.inference import sampler  # noqa: E402
from dpspec.inference.model import build_model, parse_target  # noqa: E402
from dpspec.inference.prior import make_prior  # noqa: E402
from dpspec.contract.mechanism import CountLikelihood  # noqa: E402
from dpspec.run.noise import discrete_gaussian, discrete_gaussian_logpmf  # noqa: E402

import doc_table  # noqa: E402
from dpspec.language.parser import load_text_or_path  # noqa: E402


def synthetic(k: int, sigma2: float, rng):
    values = ", ".join(f"v{i}" for i in range(k))
    spec = load_text_or_path(f"""spec "bench"
domain d "synthetic" {{
  stage edited
  table persons unit person {{
    cell : {{{values}}}
  }}
}}
data persons from "persons.csv"
invariants {{
  count persons
}}
unit persons : hamming
premetric pure
mechanism randomized_response {{ table: persons  column: cell  p: 3/4 }}
""")
    n = 100 * k
    truth = rng.multinomial(n, rng.dirichlet(np.ones(k)))
    noisy = truth + discrete_gaussian(Fraction(sigma2).limit_denominator(1000), k, rng)
    log_z = float(discrete_gaussian_logpmf(sigma2, [0])[0])

    def logpmf(t):
        d = noisy - np.asarray(t, dtype=float)
        return -d * d / (2 * sigma2) + log_z

    cells = pd.DataFrame({"cell": [f"v{i}" for i in range(k)]})
    lk = CountLikelihood(
        ir.CountQuery("persons", ("cell",)),
        cells,
        noisy,
        logpmf,
        np.full(k, log_z),
        noisy.astype(float),
        np.full(k, sigma2),
    )
    outputs = {"count_persons": pd.DataFrame({"count": [n]})}
    return build_model(spec, parse_target("count persons by cell", spec), [lk], outputs)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("sizes", nargs="*", type=int, default=[10, 50, 200, 1000])
    ap.add_argument("--proposals", type=int, default=20_000)
    ap.add_argument("--sigma2", type=float, default=50 / 3)
    doc_table.add_option(ap)
    args = ap.parse_args(argv)
    print(
        f"{'K':>6} {'seconds':>9} {'proposals/s':>12} {'ESS share':>10} {'log10 acc.':>11} {'floor s':>8} {'ratio':>6}"
    )
    rows = []
    for k in args.sizes:
        rng = make_rng(k)
        model = synthetic(k, args.sigma2, rng)
        prior = make_prior(None, model)
        pilot = sampler.estimate_acceptance(model, prior, rng, 2000)
        t0 = time.perf_counter()
        draws = sampler.importance(model, prior, args.proposals // 20, rng, proposals=args.proposals)
        seconds = time.perf_counter() - t0
        t0 = time.perf_counter()
        discrete_gaussian(Fraction(args.sigma2).limit_denominator(1000), (draws.proposals, k), rng)
        floor = time.perf_counter() - t0
        print(
            f"{k:>6} {seconds:>9.2f} {draws.proposals / seconds:>12,.0f} {draws.ess / draws.proposals:>10.3f} "
            f"{pilot.log10_rate:>11.1f} {floor:>8.2f} {seconds / floor:>6.1f}"
        )
        rows.append(
            [
                k,
                f"{seconds:.2f}",
                f"{draws.proposals / seconds:,.0f}",
                f"{draws.ess / draws.proposals:.3f}",
                f"{pilot.log10_rate:.1f}",
                f"{floor:.2f}",
                f"{seconds / floor:.1f}",
            ]
        )
    doc_table.write(
        "bench_infer",
        "Inference (dpspec infer): importance sampling",
        __doc__.split("\n\n")[0],
        ["cells K", "seconds", "proposals/s", "ESS share", "log10 acceptance", "floor s", "ratio"],
        rows,
        notes=[f"{args.proposals:,} proposals, sigma² = {args.sigma2:.4g}."],
        enabled=not args.no_doc,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
