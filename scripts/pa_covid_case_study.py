"""Seed 2's case study (Seeman, Slavkovic & Reimherr, Section 4) on Pennsylvania's real counts.

Runs every spec of specs/pa_covid/ (4 methods x 2 budgets) for every month with `--replicates`
replicates each, and writes one report set: report.html (inline SVG analogues of the paper's
Figures 1-4), replicates.csv (every released county count), summary.csv (per method, budget,
month and county), headline.csv (the figures the docs quote) and contractions.csv. The
mechanisms run exactly as `dpspec compile` runs them (their `draw`, vectorized over replicates); only the month changes between runs.

    python scripts/pa_covid_case_study.py -o out/pa_covid [--replicates 100] [--counties Allegheny,Erie,Cameron]
"""
from __future__ import annotations

import argparse
import glob
import os
import sys
import time
from fractions import Fraction

import numpy as np
import pandas as pd

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SPECS = os.path.join(ROOT, "specs", "pa_covid")
POPULATION = os.path.join(ROOT, "specs", "data", "pa_covid", "pa_county_population_2019.csv")
FOCUS = ("Allegheny", "Erie", "Cameron")  # large, middle, small (the paper's Figure 1)
PER = 100_000  # rates per 100,000 residents


def _specs(counties: list[str] | None = None):
    """Every case-study spec, checked; with `counties`, each declares those counties only (a
    release has every declared county, so a study of a few declares the few)."""
    import re

    import dpspec
    from dpspec.check.checker import check
    from dpspec.language.parser import parse

    out = []
    for path in sorted(glob.glob(os.path.join(SPECS, "*.dps"))):
        spec = dpspec.load(path)
        if counties:
            listed = ", ".join('"' + c.replace('"', "") + '"' for c in counties)
            text = re.sub(r'county : category values from "[^"]+"', f"county : {{{listed}}}", spec.text)
            spec = parse(text, path)
        checked = check(spec)
        name = os.path.basename(path)[:-4]
        method, regime = name.rsplit("_", 2)[0], name.rsplit("_", 2)[1]
        out.append((method, regime, spec, checked))
    return out


def run(replicates: int = 100, counties: list[str] | None = None, seed: int | None = None, months: list[str] | None = None):
    """(replicates frame, contractions frame, facts): every (method, budget, month, replicate, county)."""
    from dpspec.check.data import load_data

    data, _ = load_data(_specs()[0][2])
    specs = _specs(counties)
    frame = data["cases"]
    if counties:
        unknown = sorted(set(counties) - set(frame["county"].astype(str)))
        if unknown:
            raise SystemExit(f"unknown counties: {', '.join(unknown)}")
        frame = frame[frame["county"].astype(str).isin(counties)].reset_index(drop=True)
        frame["county"] = pd.Categorical(frame["county"].astype(str), categories=counties)
        data = {"cases": frame}
    all_months = sorted(frame["month"].astype(str).unique())
    months = months or all_months
    rng = np.random.default_rng(seed)
    rows, contractions, timing = [], [], {}
    for method, regime, spec, checked in specs:
        mech, base_params = checked.mechanism, checked.params
        started = time.perf_counter()
        for month in months:
            params = {**base_params, "release_period": month}
            cells, counts, outcome, total, previous, _ = mech.prepare(spec, params, data)
            if method == "postprocessing":
                y, z, flags = mech.draw(spec, params, counts, outcome, total, rng, draws=replicates)
                for name, mask in flags.items():
                    contractions.append(pd.DataFrame({"method": method, "budget": regime, "month": month, "county": cells,
                                                      "effect": name, "prevalence": mask.mean(axis=0)}))
            else:
                y, z, _ = mech.draw(spec, params, counts, outcome, total, previous, rng, draws=replicates)
            n = len(cells)
            rows.append(pd.DataFrame({
                "method": method, "budget": regime, "epsilon": float(params["epsilon"]), "month": month,
                "replicate": np.repeat(np.arange(replicates), n), "county": np.tile(cells, replicates),
                "cases": np.tile(counts, replicates), "deaths": np.tile(outcome, replicates),
                "released_cases": y.ravel(), "released_deaths": z.ravel()}))
        timing[f"{method} {regime}"] = time.perf_counter() - started
    return pd.concat(rows, ignore_index=True), (pd.concat(contractions, ignore_index=True) if contractions else pd.DataFrame()), timing


def summarize(reps: pd.DataFrame) -> pd.DataFrame:
    pop = pd.read_csv(POPULATION).set_index("county")["population"]
    reps = reps.assign(population=reps["county"].map(pop).to_numpy())
    reps["rate"] = reps["released_cases"] / reps["population"] * PER
    reps["true_rate"] = reps["cases"] / reps["population"] * PER
    with np.errstate(divide="ignore", invalid="ignore"):
        reps["relative_error"] = np.where(reps["cases"] > 0, 100 * np.abs(reps["released_cases"] - reps["cases"]) / reps["cases"], np.nan)
    # the Wasserstein releases contract nothing; a released zero is still counted, for comparison
    reps["zero_cases"] = (reps["released_cases"] == 0) & (reps["cases"] > 0)
    reps["zero_deaths"] = (reps["released_deaths"] == 0) & (reps["deaths"] > 0)
    reps["deaths_equal_cases"] = (reps["released_deaths"] == reps["released_cases"]) & (reps["released_cases"] > 0)
    keys = ["method", "budget", "month", "county"]
    g = reps.groupby(keys, sort=True)
    out = g.agg(cases=("cases", "first"), deaths=("deaths", "first"), population=("population", "first"),
                true_rate=("true_rate", "first"), mean_relative_error=("relative_error", "mean"),
                released_zero_cases=("zero_cases", "mean"), released_zero_deaths=("zero_deaths", "mean"),
                deaths_equal_cases=("deaths_equal_cases", "mean"))
    q = g["rate"].quantile([0.05, 0.25, 0.5, 0.75, 0.95]).unstack()
    q.columns = ["rate_q05", "rate_q25", "rate_median", "rate_q75", "rate_q95"]
    return out.join(q).reset_index()


def headline(summary: pd.DataFrame, contractions: pd.DataFrame) -> pd.DataFrame:
    """The figures docs/guides/z-pufferfish.md quotes, one row per (budget, method): the mean relative
    error of a county-month's released cases over all counties and months (median, 90th percentile,
    worst; median over the least populous quarter of counties) and, for post-processing, the share
    of replicates with each contraction in small (<= 10 cases) and large (> 100 cases) county-months."""
    pop = summary.groupby("county")["population"].first()
    small = set(pop[pop <= pop.quantile(0.25)].index)
    sized = (contractions.merge(summary[["method", "budget", "month", "county", "cases"]])
             if not contractions.empty else pd.DataFrame())
    rows = []
    for (budget, method), e in summary.groupby(["budget", "method"], sort=False):
        err = e["mean_relative_error"].dropna()
        row = {"budget": budget, "epsilon": None, "method": method, "median": err.median(), "q90": err.quantile(0.9),
               "worst": err.max(), "median_smallest_quarter": e[e["county"].isin(small)]["mean_relative_error"].median()}
        for label, keep in (("at_most_10_cases", lambda c: c <= 10), ("over_100_cases", lambda c: c > 100)):
            part = sized[(sized["method"] == method) & (sized["budget"] == budget) & keep(sized["cases"])] if not sized.empty else sized
            for effect in ("ContractedCaseZeros", "ContractedDeathZeros", "ContractedRates"):
                hit = part[part["effect"] == effect]["prevalence"] if not part.empty else pd.Series(dtype=float)
                row[f"{effect}_{label}"] = float(hit.mean()) if len(hit) else None
        rows.append(row)
    return pd.DataFrame(rows)


LABELS = {"postprocessing": "post-processing", "wasserstein_naive": "Wasserstein, naive",
          "wasserstein_congenial": "Wasserstein, congenial", "wasserstein_prior": "Wasserstein, prior"}


def figures(summary: pd.DataFrame, reps: pd.DataFrame, contractions: pd.DataFrame) -> list[tuple[str, str, object]]:
    """(heading, caption, svg) for the analogues of the paper's Figures 1-4."""
    from dpspec.budget.pufferfish import dependent_count_sensitivity
    from dpspec.report.svg import Bar, Box, bar_chart, box_chart, curve_chart

    out = []
    pop = pd.read_csv(POPULATION).set_index("county")["population"]
    reps = reps.assign(rate=reps["released_cases"] / reps["county"].map(pop).to_numpy() * PER)
    months = sorted(summary["month"].unique())
    for county in [c for c in FOCUS if c in set(summary["county"])]:
        for regime in ("low", "high"):
            boxes = []
            for month in months:
                for method in LABELS:
                    s = reps[(reps["county"] == county) & (reps["budget"] == regime) & (reps["month"] == month) & (reps["method"] == method)]["rate"]
                    if s.empty:
                        continue
                    truth = summary[(summary["county"] == county) & (summary["month"] == month)]["true_rate"].iloc[0]
                    boxes.append(Box.of(f"{month} {LABELS[method]}", s.to_numpy(dtype=float), reference=truth))
            out.append((f"Figure 1: {county}, {regime} privacy",
                        "Released case rates per 100,000 over the replicates (box: quartiles; whiskers: range); dashed red: the confidential rate.",
                        box_chart(f"{county} case rate per 100,000, {regime} privacy", boxes, axis="per 100,000")))
    for regime in ("low", "high"):
        boxes = []
        for method in LABELS:
            s = summary[(summary["budget"] == regime) & (summary["method"] == method)]["mean_relative_error"].dropna()
            if s.empty:
                continue
            boxes.append(Box.of(LABELS[method], s.to_numpy(dtype=float)))
        out.append((f"Figure 2: relative error, {regime} privacy",
                    "Mean relative error (%) of the released case counts, one point per county and month, over all counties and months.",
                    box_chart(f"Relative error of case counts (%), {regime} privacy", boxes, axis="%")))
    if not contractions.empty:
        totals = summary.groupby("county")["cases"].sum().sort_values()
        extremes = [totals.index[0], totals.index[-1]] if len(totals) > 1 else list(totals.index)
        bars = []
        for regime in ("low", "high"):
            for county in extremes:
                for effect in ("ContractedCaseZeros", "ContractedDeathZeros", "ContractedRates"):
                    c = contractions[(contractions["budget"] == regime) & (contractions["county"] == county) & (contractions["effect"] == effect)]
                    bars.append(Bar(f"{regime}: {county} {effect}", float(c["prevalence"].mean()) if not c.empty else 0.0,
                                    tone="bad" if regime == "high" else "neutral"))
        out.append(("Figure 3: contractions of post-processing",
                    f"Share of replicates and months where post-processing maps several noisy values to one output, for the "
                    f"counties with the fewest ({extremes[0]}) and most ({extremes[-1]}) cases. The Wasserstein releases "
                    "contract nothing: their rows in summary.csv give, for comparison, how often they release a zero.",
                    bar_chart("Prevalence of contraction effects", bars, axis="share")))
    series = []
    for n in (5, 20, 100):
        ds = [Fraction(i, 20) for i in range(21)]  # exact: the sensitivity is a function of rationals
        ys = [float((dependent_count_sensitivity(n, (1 - d) / 2, (1 + d) / 2) - 1) / Fraction(n - 1)) for d in ds]
        series.append((f"n = {n}", [float(d) for d in ds], ys))
    out.append(("Figure 4: sensitivity against dependence",
                "The Wasserstein sensitivity of one count over n units under Section 4.4's family, q0 = (1 - d)/2 and "
                "q1 = (1 + d)/2, rescaled from 1 (independence, d = 0) to n (d = 1): (Delta - 1)/(n - 1).",
                curve_chart("Wasserstein sensitivity of one count", series, x_label="dependence d = q1 - q0",
                            y_label="(Delta - 1) / (n - 1)")))
    return out


def html(figs, timing, replicates, months, head: pd.DataFrame | None = None) -> str:
    from markupsafe import escape

    parts = ["<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>PA COVID-19 case study (seed 2)</title>"
             "<style>body{font-family:system-ui,sans-serif;max-width:980px;margin:2em auto;padding:0 1em}"
             "figure{margin:1.5em 0}figcaption{color:#444;font-size:.9em}</style></head><body>",
             "<h1>Partially private data: Pennsylvania's county COVID-19 counts</h1>",
             f"<p>{replicates} replicates of each method and budget for the months {escape(', '.join(months))}; Z = the month's "
             "state total and the previous month's county counts. See docs/guides/z-pufferfish.md for what it shows.</p>"]
    if head is not None and not head.empty:
        parts.append("<h2>Relative error of case counts (%)</h2><table><tr><th>budget</th><th>method</th><th>median</th>"
                     "<th>90th percentile</th><th>worst</th><th>median, least populous quarter</th></tr>"
                     + "".join(f"<tr><td>{escape(r.budget)}</td><td>{escape(LABELS.get(r.method, r.method))}</td>"
                               f"<td>{r.median:.3g}</td><td>{r.q90:.3g}</td><td>{r.worst:.4g}</td>"
                               f"<td>{r.median_smallest_quarter:.3g}</td></tr>" for r in head.itertuples())
                     + "</table>")
    for heading, caption, svg in figs:
        parts.append(f"<figure><h2>{escape(heading)}</h2>{svg}<figcaption>{escape(caption)}</figcaption></figure>")
    parts.append("<h2>Time</h2><ul>" + "".join(f"<li>{escape(k)}: {v:.1f} s</li>" for k, v in timing.items()) + "</ul>")
    parts.append("</body></html>")
    return "\n".join(parts)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("-o", "--output", required=True, help="the report folder (written whole, or not at all)")
    ap.add_argument("--replicates", type=int, default=100)
    ap.add_argument("--counties", help="comma-separated county names (default: all 67)")
    ap.add_argument("--months", help="comma-separated months (default: all)")
    ap.add_argument("--seed", type=int, help="reproducible draws (tests only)")
    args = ap.parse_args(argv)
    from dpspec.publish.report_set import write_report_set

    counties = args.counties.split(",") if args.counties else None
    months = args.months.split(",") if args.months else None
    reps, contractions, timing = run(args.replicates, counties, args.seed, months)
    summary = summarize(reps)
    figs = figures(summary, reps, contractions)
    head = headline(summary, contractions)
    epsilon = reps.groupby("budget")["epsilon"].first()
    head["epsilon"] = head["budget"].map(epsilon)
    files = {"html": ("report.html", html(figs, timing, args.replicates, sorted(reps["month"].unique()), head)),
             "replicates": ("replicates.csv", reps), "summary": ("summary.csv", summary),
             "headline": ("headline.csv", head)}
    if not contractions.empty:
        files["contractions"] = ("contractions.csv", contractions)
    write_report_set(args.output, "pa-covid-case-study", files,
                     {"replicates": args.replicates, "seconds": {k: round(v, 2) for k, v in timing.items()}})
    print(f"wrote {args.output}: " + ", ".join(f"{k} {v:.1f} s" for k, v in timing.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
