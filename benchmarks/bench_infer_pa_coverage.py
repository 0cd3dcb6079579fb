"""How often `dpspec infer`'s intervals cover the confidential counts of a real Pennsylvania month.

    python benchmarks/bench_infer_pa_coverage.py [--month 2020-08] [--draws 1000] [--regimes low,high] [--priors default,previous]

For each budget it compiles the bundled prior-base spec of `specs/pa_covid/` for the month (seed
2020: a reproducible release, not a protected one), runs `dpspec infer` on the month's table
`count cases by month, county, died` (67 counties x living/dead), and compares each cell's 90% and
95% posterior intervals with the month's confidential counts in the bundled data: the share of
cells covered, by died = false / true, and of the misses how many lie below the interval (the
posterior pulled upward). Priors: `default` is infer's flat Dirichlet-multinomial within the
month's total; `previous` is a CSV of concentrations 1 + the previous month's counts per cell,
scaled so they add up to the number of cells plus the previous total over 100 (a prior worth about
1% of a month's cases); any other value is passed to `--prior` (e.g. dirichlet-multinomial:0.1).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "plugins")]

TARGET = "count cases by month, county, died"


def truths(month: str):
    import pandas as pd

    data = pd.read_parquet(ROOT / "specs" / "data" / "pa_covid" / "cases.parquet")
    data["died"] = data["died"].astype(bool)
    return data, {
        (str(c), bool(d)): int(n)
        for (m, c, d), n in data.groupby(["month", "county", "died"]).size().items()
        if str(m) == month
    }


def previous_prior(data, month: str, cells: list, path: Path) -> None:
    import numpy as np
    import pandas as pd

    months = sorted(str(m) for m in data["month"].unique())
    prev = months[months.index(month) - 1]
    counts = data[data["month"].astype(str) == prev].groupby(["county", "died"]).size()
    base = np.array([counts.get((c, d), 0) for _, c, d in cells], dtype=float)
    alpha = 1 + base * (0.01 if base.sum() else 0)
    pd.DataFrame(
        {
            "month": [m for m, _, _ in cells],
            "county": [c for _, c, _ in cells],
            "died": [str(d) for _, _, d in cells],
            "alpha": alpha,
        }
    ).to_csv(path, index=False)


def coverage(res, truth: dict) -> dict:
    out = {"n": 0, "90": 0, "95": 0, "below90": 0, "by_died": {False: [0, 0], True: [0, 0]}}
    for c in res.cells:
        lab = dict(part.split("=", 1) for part in c["cell"].split(", "))
        died = lab["died"] == "True"
        t = truth.get((lab["county"], died), 0)
        inside = c["q05"] <= t <= c["q95"]
        out["n"] += 1
        out["90"] += inside
        out["95"] += c["q025"] <= t <= c["q975"]
        out["below90"] += t < c["q05"]
        out["by_died"][died][0] += inside
        out["by_died"][died][1] += 1
    return out


def main(argv=None) -> int:
    import dpspec
    from dpspec.publish.output import write_result

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--month", default="2020-08")
    ap.add_argument("--draws", type=int, default=1000)
    ap.add_argument("--regimes", default="low,high")
    ap.add_argument("--priors", default="default")
    args = ap.parse_args(argv)
    data, truth = truths(args.month)
    print(
        "| budget | prior | 90% intervals covering | 95% | living cells (90%) | dead cells (90%) | misses below the interval | effective sample size | CPU s |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    with tempfile.TemporaryDirectory() as tmp:
        for regime in args.regimes.split(","):
            path = ROOT / "specs" / "pa_covid" / f"wasserstein_prior_{regime}_privacy.dps"
            text = path.read_text().replace('release_period: "2020-08"', f'release_period: "{args.month}"')
            (Path(tmp) / "specs").mkdir(exist_ok=True)
            spec_path = Path(tmp) / "specs" / path.name
            spec_path.write_text(text.replace('"../data/pa_covid/', f'"{ROOT}/specs/data/pa_covid/'))
            out = Path(tmp) / regime
            write_result(dpspec.compile(str(spec_path), seed=2020), str(out))
            for prior in args.priors.split(","):
                given = None if prior == "default" else prior  # or a dirichlet-multinomial:A
                if prior == "previous":
                    res0 = dpspec.infer(str(spec_path), str(out), TARGET, draws=10, seed=3, method="importance")
                    cells = [tuple(dict(p.split("=", 1) for p in c["cell"].split(", ")).values()) for c in res0.cells]
                    cells = [(m, c, d == "True") for m, c, d in cells]
                    given = str(Path(tmp) / f"prior_{regime}.csv")
                    previous_prior(data, args.month, cells, Path(given))
                cpu = time.process_time()
                res = dpspec.infer(str(spec_path), str(out), TARGET, prior=given, draws=args.draws, seed=3)
                cpu = time.process_time() - cpu
                cov = coverage(res, truth)
                n, alive, dead = cov["n"], cov["by_died"][False], cov["by_died"][True]
                misses = cov["n"] - cov["90"]
                ess = f"{res.draws.ess:,.0f}" if res.draws.ess is not None else "exact"
                print(
                    f"| {regime} privacy | {prior} | {cov['90']}/{n} ({cov['90'] / n:.0%}) | {cov['95']}/{n} ({cov['95'] / n:.0%}) "
                    f"| {alive[0]}/{alive[1]} | {dead[0]}/{dead[1]} | {cov['below90']} of {misses} | {ess} | {cpu:.1f} |",
                    flush=True,
                )
    return 0


if __name__ == "__main__":
    sys.exit(main())
