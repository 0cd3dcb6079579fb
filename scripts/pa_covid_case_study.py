"""Seed 2's case study (Seeman, Slavkovic & Reimherr, Section 4) on Pennsylvania's real counts.

Runs every spec of specs/pa_covid/ (4 methods x 2 budgets) for every month with `--replicates`
replicates each, and writes one report set: report.html (inline SVG analogues of the paper's
Figures 1-4), replicates.csv (every released county count), summary.csv (per method, budget,
month and county), headline.csv (the figures the docs quote) and contractions.csv. The
mechanisms run exactly as `dpspec compile` runs them (their `draw`, vectorized over replicates); only the month changes between runs.

With `--epsilons VALUES` (the grid syntax of `dpspec sweep --vary`, e.g. log:0.01:10:13) each
method's spec runs at every epsilon instead of its two budgets, and the set adds sweep.csv (the
headline figures at every epsilon) and crossover.csv (where post-processing and each base
measure swap ranks, per metric); Figures 1-3 are drawn at three budgets that bracket the
crossover of the prior base against post-processing on the median error.

    python scripts/pa_covid_case_study.py -o out/pa_covid [--replicates 100] [--counties Allegheny,Erie,Cameron]
    python scripts/pa_covid_case_study.py -o out/pa_sweep --epsilons log:0.01:10:13 --replicates 20
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


def budget_label(epsilon) -> str:
    """A sweep point's budget label: the epsilon as it prints."""
    return f"{float(epsilon):g}"


def _points(specs, epsilons):
    """(method, budget label, spec, checked, epsilon or None): the bundled two budgets per method, or
    with `epsilons` each method's spec (its high-privacy one, any would do) at every epsilon."""
    if not epsilons:
        return [(m, r, s, c, None) for m, r, s, c in specs]
    one = {m: (s, c) for m, r, s, c in specs if r == "high"}
    return [(m, budget_label(e), s, c, Fraction(e)) for m, (s, c) in one.items() for e in epsilons]


def run(
    replicates: int = 100,
    counties: list[str] | None = None,
    seed: int | None = None,
    months: list[str] | None = None,
    epsilons: list | None = None,
    methods: list[str] | None = None,
):
    """(replicates frame, contractions frame, seconds per point): every (method, budget, month, replicate, county)."""
    from dpspec.check.data import load_data

    data, _ = load_data(_specs()[0][2])
    specs = _specs(counties)
    if methods:
        unknown = sorted(set(methods) - {m for m, _, _, _ in specs})
        if unknown:
            raise SystemExit(f"unknown methods: {', '.join(unknown)} (the specs' names: {', '.join(LABELS)})")
        specs = [p for p in specs if p[0] in methods]
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
    for method, regime, spec, checked, epsilon in _points(specs, epsilons):
        mech, base_params = checked.mechanism, checked.params
        started = time.perf_counter()
        for month in months:
            params = {**base_params, "release_period": month, **({"epsilon": epsilon} if epsilon is not None else {})}
            cells, counts, outcome, total, previous, _ = mech.prepare(spec, params, data)
            if method == "postprocessing":
                y, z, flags = mech.draw(spec, params, counts, outcome, total, rng, draws=replicates)
                for name, mask in flags.items():  # both tallies: the zero region, and the strict one beside it
                    contractions.append(
                        pd.DataFrame(
                            {
                                "method": method,
                                "budget": regime,
                                "month": month,
                                "county": cells,
                                "effect": name.removesuffix("_strict"),
                                "definition": "strict" if name.endswith("_strict") else "zero region",
                                "prevalence": mask.mean(axis=0),
                            }
                        )
                    )
            else:
                y, z, _ = mech.draw(spec, params, counts, outcome, total, previous, rng, draws=replicates)
            n = len(cells)
            rows.append(
                pd.DataFrame(
                    {
                        "method": method,
                        "budget": regime,
                        "epsilon": float(params["epsilon"]),
                        "month": month,
                        "replicate": np.repeat(np.arange(replicates), n),
                        "county": np.tile(cells, replicates),
                        "cases": np.tile(counts, replicates),
                        "deaths": np.tile(outcome, replicates),
                        "released_cases": y.ravel(),
                        "released_deaths": z.ravel(),
                    }
                )
            )
        timing[f"{method} {regime}"] = time.perf_counter() - started
    return (
        pd.concat(rows, ignore_index=True),
        (pd.concat(contractions, ignore_index=True) if contractions else pd.DataFrame()),
        timing,
    )


def summarize(reps: pd.DataFrame) -> pd.DataFrame:
    pop = pd.read_csv(POPULATION).set_index("county")["population"]
    reps = reps.assign(population=reps["county"].map(pop).to_numpy())
    reps["rate"] = reps["released_cases"] / reps["population"] * PER
    reps["true_rate"] = reps["cases"] / reps["population"] * PER
    with np.errstate(divide="ignore", invalid="ignore"):
        reps["relative_error"] = np.where(
            reps["cases"] > 0, 100 * np.abs(reps["released_cases"] - reps["cases"]) / reps["cases"], np.nan
        )
    # the Wasserstein releases contract nothing; a released zero is still counted, for comparison
    reps["zero_cases"] = (reps["released_cases"] == 0) & (reps["cases"] > 0)
    reps["zero_deaths"] = (reps["released_deaths"] == 0) & (reps["deaths"] > 0)
    reps["deaths_equal_cases"] = (reps["released_deaths"] == reps["released_cases"]) & (reps["released_cases"] > 0)
    keys = ["method", "budget", "month", "county"]
    g = reps.groupby(keys, sort=True)
    out = g.agg(
        cases=("cases", "first"),
        deaths=("deaths", "first"),
        population=("population", "first"),
        true_rate=("true_rate", "first"),
        mean_relative_error=("relative_error", "mean"),
        released_zero_cases=("zero_cases", "mean"),
        released_zero_deaths=("zero_deaths", "mean"),
        deaths_equal_cases=("deaths_equal_cases", "mean"),
    )
    q = g["rate"].quantile([0.05, 0.25, 0.5, 0.75, 0.95]).unstack()
    q.columns = ["rate_q05", "rate_q25", "rate_median", "rate_q75", "rate_q95"]
    return out.join(q).reset_index()


def headline(summary: pd.DataFrame, contractions: pd.DataFrame) -> pd.DataFrame:
    """The figures docs/guides/z-pufferfish.md quotes, one row per (budget, method): the mean relative
    error of a county-month's released cases over all counties and months (median, 90th percentile,
    worst; median over the least populous quarter of counties) and, for post-processing, the share
    of replicates with each contraction in small (<= 10 cases) and large (> 100 cases) county-months,
    as the map's zero region (the plain names) and by the strict tally (suffix _strict)."""
    pop = summary.groupby("county")["population"].first()
    small = set(pop[pop <= pop.quantile(0.25)].index)
    sized = (
        contractions.merge(summary[["method", "budget", "month", "county", "cases"]])
        if not contractions.empty
        else pd.DataFrame()
    )
    rows = []
    for (budget, method), e in summary.groupby(["budget", "method"], sort=False):
        err = e["mean_relative_error"].dropna()
        row = {
            "budget": budget,
            "epsilon": None,
            "method": method,
            "median": err.median(),
            "q90": err.quantile(0.9),
            "worst": err.max(),
            "median_smallest_quarter": e[e["county"].isin(small)]["mean_relative_error"].median(),
        }
        for definition, suffix in (("zero region", ""), ("strict", "_strict")):
            for label, keep in (("at_most_10_cases", lambda c: c <= 10), ("over_100_cases", lambda c: c > 100)):
                part = (
                    sized[
                        (sized["method"] == method)
                        & (sized["budget"] == budget)
                        & keep(sized["cases"])
                        & (sized["definition"] == definition)
                    ]
                    if not sized.empty
                    else sized
                )
                for effect in EFFECTS:
                    hit = part[part["effect"] == effect]["prevalence"] if not part.empty else pd.Series(dtype=float)
                    row[f"{effect}{suffix}_{label}"] = float(hit.mean()) if len(hit) else None
        rows.append(row)
    return pd.DataFrame(rows)


EFFECTS = ("ContractedCaseZeros", "ContractedDeathZeros", "ContractedRates")
METRICS = ("median", "q90", "worst", "median_smallest_quarter")
BASES = ("wasserstein_naive", "wasserstein_congenial", "wasserstein_prior")


def crossover(head: pd.DataFrame) -> pd.DataFrame:
    """Where post-processing and each base measure swap ranks, per metric: the sign changes of
    log(post-processing's error / the base's) between consecutive epsilons, located by linear
    interpolation in log epsilon. One row per (base, metric): every crossing, and who wins below
    the first and above the last."""
    rows = []
    post = head[head["method"] == "postprocessing"].set_index("epsilon").sort_index()
    for base in BASES:
        other = head[head["method"] == base].set_index("epsilon").sort_index()
        eps = [e for e in post.index if e in other.index]
        if len(eps) < 2:
            continue
        for metric in METRICS:
            a, b = post.loc[eps, metric].to_numpy(dtype=float), other.loc[eps, metric].to_numpy(dtype=float)
            with np.errstate(divide="ignore", invalid="ignore"):
                d = np.log(a) - np.log(b)  # -inf when post-processing's error is 0 and the base's is not
            d = np.where(a == b, 0.0, d)
            le = np.log10(np.asarray(eps, dtype=float))
            crossings = []
            for i in range(len(eps) - 1):
                if d[i] * d[i + 1] < 0:  # a zero error on one side: the crossing is put halfway, in log epsilon
                    t = d[i] / (d[i] - d[i + 1]) if np.isfinite(d[i]) and np.isfinite(d[i + 1]) else 0.5
                    crossings.append(10 ** (le[i] + (le[i + 1] - le[i]) * t))

            def winner(v):
                return "post-processing" if v < 0 else LABELS[base] if v > 0 else "tie"

            rows.append(
                {
                    "base": base,
                    "metric": metric,
                    "crossings": len(crossings),
                    "crossover_epsilon": crossings[0] if crossings else None,
                    "all_crossings": "; ".join(f"{c:.4g}" for c in crossings),
                    "winner_below": winner(d[0]),
                    "winner_above": winner(d[-1]),
                    "ratio_at_smallest_epsilon": float(np.exp(d[0])),
                    "ratio_at_largest_epsilon": float(np.exp(d[-1])),
                }
            )
    return pd.DataFrame(rows)


def bracket(epsilons: list[float], cross: float | None) -> list[float]:
    """Three grid budgets around a crossover: the grid point nearest it (in log scale) and those two
    steps either side; without a crossover, the ends and the middle of the grid."""
    eps = sorted(epsilons)
    if cross is None or not np.isfinite(cross):
        picks = [eps[0], eps[len(eps) // 2], eps[-1]]
    else:
        near = int(np.argmin([abs(np.log(e / cross)) for e in eps]))
        picks = [eps[max(0, near - 2)], eps[near], eps[min(len(eps) - 1, near + 2)]]
    return sorted(dict.fromkeys(picks))


LABELS = {
    "postprocessing": "post-processing",
    "wasserstein_naive": "Wasserstein, naive",
    "wasserstein_congenial": "Wasserstein, congenial",
    "wasserstein_prior": "Wasserstein, prior",
}


def _regime_words(budget: str) -> str:
    return {"low": "low privacy", "high": "high privacy"}.get(budget, f"epsilon = {budget}")


def size_quarters(summary: pd.DataFrame) -> pd.Series:
    """Each county's population quarter, 1 (least populous) to 4."""
    pop = summary.groupby("county")["population"].first()
    return pd.qcut(pop.rank(method="first"), 4, labels=[1, 2, 3, 4]).astype(int)


def figures(
    summary: pd.DataFrame,
    reps: pd.DataFrame,
    contractions: pd.DataFrame,
    budgets: list[str] | None = None,
    sweep: pd.DataFrame | None = None,
    cross: float | None = None,
) -> list[tuple[str, str, object]]:
    """(heading, caption, svg) for the analogues of the paper's Figures 1-4, Figures 1-3 at `budgets`
    (default: every budget in the summary); with a sweep, Figure 2's error against epsilon too."""
    from dpspec.budget.pufferfish import dependent_count_sensitivity
    from dpspec.report.svg import Bar, Box, bar_chart, box_chart, heat_map, xy_chart

    out = []
    budgets = budgets or list(dict.fromkeys(summary["budget"]))
    pop = pd.read_csv(POPULATION).set_index("county")["population"]
    reps = reps.assign(rate=reps["released_cases"] / reps["county"].map(pop).to_numpy() * PER)
    months = sorted(summary["month"].unique())
    for county in [c for c in FOCUS if c in set(summary["county"])]:
        for regime in budgets:
            boxes = []
            for month in months:
                for method in LABELS:
                    s = reps[
                        (reps["county"] == county)
                        & (reps["budget"] == regime)
                        & (reps["month"] == month)
                        & (reps["method"] == method)
                    ]["rate"]
                    if s.empty:
                        continue
                    truth = summary[(summary["county"] == county) & (summary["month"] == month)]["true_rate"].iloc[0]
                    boxes.append(Box.of(f"{month} {LABELS[method]}", s.to_numpy(dtype=float), reference=truth))
            out.append(
                (
                    f"Figure 1: {county}, {_regime_words(regime)}",
                    "Released case rates per 100,000 over the replicates (box: quartiles; whiskers: range); dashed red: the confidential rate.",
                    box_chart(f"{county} case rate per 100,000, {_regime_words(regime)}", boxes, axis="per 100,000"),
                )
            )
    if sweep is not None and not sweep.empty:
        series = []
        for method in LABELS:
            e = sweep[(sweep["method"] == method) & (sweep["median"] > 0)].sort_values("epsilon")
            if not e.empty:
                series.append(
                    (
                        LABELS[method],
                        list(np.log10(e["epsilon"].astype(float))),
                        list(np.log10(e["median"].astype(float))),
                    )
                )
        marked = None
        if cross is not None and np.isfinite(cross):
            prior = sweep[(sweep["method"] == "wasserstein_prior") & (sweep["median"] > 0)].sort_values("epsilon")
            y = float(
                np.interp(
                    np.log10(cross), np.log10(prior["epsilon"].astype(float)), np.log10(prior["median"].astype(float))
                )
            )
            series.append((f"crossover: epsilon {cross:.3g}", [float(np.log10(cross))], [y]))
            marked = {(len(series) - 1, 0)}
        out.append(
            (
                "Figure 2: median relative error against the budget",
                "Median over county-months of the mean relative error (%) of the released case counts, log10 against "
                "log10 epsilon; the square marks where the prior base measure and post-processing swap ranks.",
                xy_chart(
                    "Median relative error of case counts",
                    series,
                    x_label="log10 epsilon",
                    y_label="log10 median relative error (%)",
                    marked=marked,
                ),
            )
        )
    quarter = size_quarters(summary)
    for regime in budgets:
        boxes = []
        for q in (1, 2, 3, 4):
            for method in LABELS:
                part = summary[
                    (summary["budget"] == regime) & (summary["method"] == method) & summary["county"].map(quarter).eq(q)
                ]["mean_relative_error"].dropna()
                if not part.empty:
                    boxes.append(Box.of(f"size quarter {q}: {LABELS[method]}", part.to_numpy(dtype=float)))
        out.append(
            (
                f"Figure 2: relative error by county size, {_regime_words(regime)}",
                "Mean relative error (%) of the released case counts, one point per county and month, by the county's "
                "population quarter (1: least populous).",
                box_chart(
                    f"Relative error of case counts (%) by county size, {_regime_words(regime)}", boxes, axis="%"
                ),
            )
        )
    if not contractions.empty:
        totals = summary.groupby("county")["cases"].sum().sort_values()
        extremes = [totals.index[0], totals.index[-1]] if len(totals) > 1 else list(totals.index)
        bars = []
        for regime in budgets:
            for county in extremes:
                for effect in EFFECTS:
                    for definition in ("zero region", "strict"):
                        c = contractions[
                            (contractions["budget"] == regime)
                            & (contractions["county"] == county)
                            & (contractions["effect"] == effect)
                            & (contractions["definition"] == definition)
                        ]
                        bars.append(
                            Bar(
                                f"{_regime_words(regime)}: {county} {effect} ({definition})",
                                float(c["prevalence"].mean()) if not c.empty else 0.0,
                                tone="bad" if definition == "zero region" else "muted",
                            )
                        )
        out.append(
            (
                "Figure 3: contractions of post-processing",
                f"Share of replicates and months where post-processing maps several noisy values to one output, for the "
                f"counties with the fewest ({extremes[0]}) and most ({extremes[-1]}) cases: the map's zero region (every "
                "noisy count at or below the projection's threshold; deaths at or below 0 or in a county released as 0; "
                "deaths at or above the released cases), and beside it the strict tally (a negative noisy count; deaths "
                "strictly above the cases). The Wasserstein releases contract nothing: their rows in summary.csv give, "
                "for comparison, how often they release a zero.",
                bar_chart("Prevalence of contraction effects", bars, axis="share"),
            )
        )
    grid = [Fraction(i, 20) for i in range(21)]  # exact: the sensitivity is a function of rationals
    for n in (5, 20, 100):
        values = [[float(dependent_count_sensitivity(n, p0, p1)) / n for p0 in grid] for p1 in grid]
        out.append(
            (
                f"Figure 4: sensitivity over the (p0, p1) plane, n = {n}",
                f"The Wasserstein sensitivity Delta of one count over n = {n} units under Section 4.4's family (given one "
                "unit's secret x, each other unit has secret 1 with probability p_x), divided by n, at every (p0, p1) "
                "on a grid of steps 1/20, computed exactly: 1/n on the diagonal (independence), 1 at p0 = 0, p1 = 1.",
                heat_map(
                    f"Delta / n, n = {n}",
                    [float(g) for g in grid],
                    [float(g) for g in grid],
                    values,
                    x_label="p0",
                    y_label="p1",
                ),
            )
        )
    return out


def html(figs, timing, replicates, months, head: pd.DataFrame | None = None, cross: pd.DataFrame | None = None) -> str:
    from markupsafe import escape

    parts = [
        '<!doctype html><html lang="en"><head><meta charset="utf-8"><title>PA COVID-19 case study (seed 2)</title>'
        "<style>body{font-family:system-ui,sans-serif;max-width:980px;margin:2em auto;padding:0 1em}"
        "figure{margin:1.5em 0}figcaption{color:#444;font-size:.9em}</style></head><body>",
        "<h1>Partially private data: Pennsylvania's county COVID-19 counts</h1>",
        f"<p>{replicates} replicates of each method and budget for the months {escape(', '.join(months))}; Z = the month's "
        "state total and the previous month's county counts. See docs/guides/z-pufferfish.md for what it shows.</p>",
    ]
    if head is not None and not head.empty:
        parts.append(
            "<h2>Relative error of case counts (%)</h2><table><tr><th>budget</th><th>method</th><th>median</th>"
            "<th>90th percentile</th><th>worst</th><th>median, least populous quarter</th></tr>"
            + "".join(
                f"<tr><td>{escape(r.budget)}</td><td>{escape(LABELS.get(r.method, r.method))}</td>"
                f"<td>{r.median:.3g}</td><td>{r.q90:.3g}</td><td>{r.worst:.4g}</td>"
                f"<td>{r.median_smallest_quarter:.3g}</td></tr>"
                for r in head.itertuples()
            )
            + "</table>"
        )
    if cross is not None and not cross.empty:
        parts.append(
            "<h2>Where the ranking crosses</h2><table><tr><th>base measure</th><th>metric</th><th>crossings</th>"
            "<th>epsilon of each</th><th>wins below</th><th>wins above</th></tr>"
            + "".join(
                f"<tr><td>{escape(LABELS[r.base])}</td><td>{escape(r.metric)}</td><td>{r.crossings}</td>"
                f"<td>{escape(r.all_crossings or '-')}</td><td>{escape(r.winner_below)}</td>"
                f"<td>{escape(r.winner_above)}</td></tr>"
                for r in cross.itertuples()
            )
            + "</table>"
        )
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
    ap.add_argument(
        "--epsilons",
        help="run each method at these budgets instead of its two specs' (the grid syntax of "
        "dpspec sweep --vary: log:0.01:10:13, 0.1,0.5 or 1/10)",
    )
    ap.add_argument(
        "--methods", help="comma-separated methods (default: all four; e.g. postprocessing,wasserstein_prior)"
    )
    ap.add_argument("--seed", type=int, help="reproducible draws (tests only)")
    args = ap.parse_args(argv)
    from dpspec.publish.report_set import write_report_set
    from dpspec.sweep.grid import parse_axis

    counties = args.counties.split(",") if args.counties else None
    months = args.months.split(",") if args.months else None
    epsilons = list(parse_axis(f"epsilon={args.epsilons}").values) if args.epsilons else None
    started, cpu = time.perf_counter(), time.process_time()
    methods = args.methods.split(",") if args.methods else None
    reps, contractions, timing = run(args.replicates, counties, args.seed, months, epsilons, methods)
    summary = summarize(reps)
    head = headline(summary, contractions)
    epsilon = reps.groupby("budget")["epsilon"].first()
    head["epsilon"] = head["budget"].map(epsilon)
    cross, shown, sweep, main_cross = None, None, None, None
    if epsilons:
        sweep = head.sort_values(["method", "epsilon"]).reset_index(drop=True)
        cross = crossover(sweep)
        row = (
            cross[(cross["base"] == "wasserstein_prior") & (cross["metric"] == "median")] if not cross.empty else cross
        )
        main_cross = (
            float(row["crossover_epsilon"].iloc[0]) if len(row) and pd.notna(row["crossover_epsilon"].iloc[0]) else None
        )
        shown = [budget_label(e) for e in bracket(sorted(set(sweep["epsilon"])), main_cross)]
    figs = figures(summary, reps, contractions, shown, sweep, main_cross)
    timing["whole study (wall)"] = time.perf_counter() - started
    timing["whole study (CPU)"] = time.process_time() - cpu
    files = {
        "html": ("report.html", html(figs, timing, args.replicates, sorted(reps["month"].unique()), head, cross)),
        "replicates": ("replicates.csv", reps),
        "summary": ("summary.csv", summary),
        "headline": ("headline.csv", head),
    }
    if sweep is not None:
        files["sweep"] = ("sweep.csv", sweep)
        files["crossover"] = ("crossover.csv", cross)
    if not contractions.empty:
        files["contractions"] = ("contractions.csv", contractions)
    meta = {"replicates": args.replicates, "seconds": {k: round(v, 2) for k, v in timing.items()}}
    if epsilons:
        meta["epsilons"] = [str(e) for e in epsilons]
        meta["crossover_epsilon"] = main_cross
        meta["figures_at"] = shown
    write_report_set(args.output, "pa-covid-case-study", files, meta)
    print(f"wrote {args.output}: " + ", ".join(f"{k} {v:.1f} s" for k, v in timing.items()))
    if main_cross is not None:
        print(
            f"the prior base and post-processing cross at epsilon {main_cross:.3g} (median relative error); "
            f"Figures 1-3 at epsilon {', '.join(shown)}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
