"""The seed-2 case study script on a few counties, months and replicates (issue 23)."""

from __future__ import annotations

import importlib.util
import os

import pandas as pd
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _script():
    spec = importlib.util.spec_from_file_location(
        "pa_covid_case_study", os.path.join(ROOT, "scripts", "pa_covid_case_study.py")
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow  # runs the case study on three counties
def test_case_study_on_three_counties_writes_one_report_set(tmp_path):
    script = _script()
    out = tmp_path / "cs"
    assert (
        script.main(
            [
                "-o",
                str(out),
                "--replicates",
                "4",
                "--counties",
                "Allegheny,Erie,Cameron",
                "--months",
                "2020-05",
                "--seed",
                "1",
            ]
        )
        == 0
    )
    reps = pd.read_csv(out / "replicates.csv")
    assert set(reps["method"]) == {"postprocessing", "wasserstein_naive", "wasserstein_congenial", "wasserstein_prior"}
    assert set(reps["budget"]) == {"low", "high"} and len(reps) == 4 * 2 * 1 * 4 * 3
    # congenial releases (post-processing and both congenial bases) sum to the month's total of these counties
    sums = reps.groupby(["method", "budget", "month", "replicate"]).agg(r=("released_cases", "sum"), t=("cases", "sum"))
    congenial = sums.loc[[m for m in sums.index if m[0] != "wasserstein_naive"]]
    assert (congenial["r"] == congenial["t"]).all()
    assert (reps["released_deaths"] <= reps["released_cases"]).all() and (reps["released_cases"] >= 0).all()
    html = (out / "report.html").read_text()
    for figure in ("Figure 1: Cameron", "Figure 2", "Figure 3", "Figure 4"):
        assert figure in html
    assert "<svg" in html and "<script" not in html
    # every figure is drawn: Figure 1 for three counties and Figure 2 by county size at both budgets,
    # Figure 3, and Figure 4's (p0, p1) plane for n = 5, 20, 100
    assert html.count("<svg") == html.count("<h2>Figure") == 3 * 2 + 2 + 1 + 3
    assert "Figure 4: sensitivity over the (p0, p1) plane, n = 100" in html
    assert ">None<" not in html and "None</" not in html
    contractions = pd.read_csv(out / "contractions.csv")
    assert set(contractions["effect"]) == {"ContractedCaseZeros", "ContractedDeathZeros", "ContractedRates"}
    assert set(contractions["definition"]) == {"zero region", "strict"}
    # the zero region holds at least the strict tally of death zeros and rates (it adds the boundary)
    wide = contractions.pivot_table(
        index=["method", "budget", "month", "county", "effect"], columns="definition", values="prevalence"
    )
    rates = wide.xs("ContractedDeathZeros", level="effect")
    assert (rates["zero region"] >= rates["strict"]).all()
    assert (out / "manifest.json").exists() and (out / "summary.csv").exists()
    head = pd.read_csv(out / "headline.csv")
    assert len(head) == 8 and set(head["epsilon"]) == {10.0, 0.5}
    assert (head["median"] <= head["q90"]).all() and (head["q90"] <= head["worst"]).all()
    post = head[head["method"] == "postprocessing"]
    assert (
        post["ContractedRates_at_most_10_cases"].notna().all() or post["ContractedRates_over_100_cases"].notna().all()
    )
    assert "least populous quarter" in html


@pytest.mark.slow  # sweeps the case study over epsilon
def test_the_epsilon_sweep_locates_where_post_processing_and_each_base_swap_ranks(tmp_path):
    script = _script()
    out = tmp_path / "sweep"
    assert (
        script.main(
            [
                "-o",
                str(out),
                "--replicates",
                "3",
                "--counties",
                "Allegheny,Erie,Cameron,Forest",
                "--months",
                "2020-05",
                "--seed",
                "2",
                "--epsilons",
                "log:0.01:10:4",
            ]
        )
        == 0
    )
    sweep = pd.read_csv(out / "sweep.csv")
    assert len(sweep) == 4 * 4 and sorted(set(sweep["epsilon"])) == [0.01, 0.1, 1.0, 10.0]
    cross = pd.read_csv(out / "crossover.csv")
    assert set(cross["base"]) == {"wasserstein_naive", "wasserstein_congenial", "wasserstein_prior"}
    assert set(cross["metric"]) == {"median", "q90", "worst", "median_smallest_quarter"}
    # a located crossover lies between two grid budgets at which the two methods rank the other way round
    for r in cross[cross["crossings"] > 0].itertuples():
        post = sweep[sweep["method"] == "postprocessing"].set_index("epsilon")[r.metric]
        base = sweep[sweep["method"] == r.base].set_index("epsilon")[r.metric]
        below = max(e for e in post.index if e < r.crossover_epsilon)
        above = min(e for e in post.index if e > r.crossover_epsilon)
        assert (post[below] - base[below]) * (post[above] - base[above]) < 0
    html = (out / "report.html").read_text()
    assert "Figure 2: median relative error against the budget" in html and "Where the ranking crosses" in html
    assert "Figure 2: relative error by county size, epsilon = " in html


def test_crossover_interpolates_in_log_epsilon_and_bracket_picks_three_grid_budgets():
    script = _script()
    rows = []
    for eps, post, prior in ((0.01, 40.0, 10.0), (0.1, 10.0, 10.0 * 10**-0.5), (1.0, 1.0, 4.0)):
        rows += [
            {"method": "postprocessing", "epsilon": eps, **{m: post for m in script.METRICS}},
            {"method": "wasserstein_prior", "epsilon": eps, **{m: prior for m in script.METRICS}},
        ]
    cross = script.crossover(pd.DataFrame(rows))
    med = cross[cross["metric"] == "median"].iloc[0]
    # log ratios 0.5*log(10) at 0.1 and -log(4) at 1: the sign changes between them, at the interpolated point
    import math

    t = 0.5 * math.log(10) / (0.5 * math.log(10) + math.log(4))
    assert med["crossings"] == 1 and abs(med["crossover_epsilon"] - 10 ** (-1 + t)) < 1e-9
    assert med["winner_below"] == "Wasserstein, prior" and med["winner_above"] == "post-processing"
    grid = [0.01 * 10 ** (k / 4) for k in range(13)]
    assert script.bracket(grid, 0.5) == [grid[k] for k in (5, 7, 9)]
    assert script.bracket(grid, None) == [grid[0], grid[6], grid[12]]


@pytest.mark.slow  # runs the case study
def test_methods_restricts_the_study_and_an_unknown_method_is_refused(tmp_path):
    import pytest

    script = _script()
    with pytest.raises(SystemExit, match="unknown methods: wasserstein_typo"):
        script.main(["-o", str(tmp_path / "x"), "--methods", "wasserstein_typo", "--replicates", "1"])
    out = tmp_path / "two"
    assert (
        script.main(
            [
                "-o",
                str(out),
                "--replicates",
                "2",
                "--counties",
                "Allegheny,Cameron",
                "--months",
                "2020-05",
                "--seed",
                "3",
                "--methods",
                "postprocessing,wasserstein_prior",
            ]
        )
        == 0
    )
    assert set(pd.read_csv(out / "replicates.csv")["method"]) == {"postprocessing", "wasserstein_prior"}


def test_the_committed_sweep_has_every_method_at_every_budget_and_the_guide_quotes_it():
    """The sweep committed beside the guide is the four-method run at the 13 budgets of
    log:0.01:10:13, and the guide's table rows and crossover are its figures."""
    folder = os.path.join(ROOT, "docs", "guides", "z-pufferfish-case-study", "sweep")
    sweep = pd.read_csv(os.path.join(folder, "sweep.csv"))
    methods = {"postprocessing", "wasserstein_naive", "wasserstein_congenial", "wasserstein_prior"}
    assert set(sweep["method"]) == methods and sweep.groupby("method")["epsilon"].nunique().eq(13).all()
    cross = pd.read_csv(os.path.join(folder, "crossover.csv"))
    with open(os.path.join(ROOT, "docs", "guides", "z-pufferfish.md"), encoding="utf-8") as f:
        guide = " ".join(f.read().split())
    median = cross[(cross["base"] == "wasserstein_prior") & (cross["metric"] == "median")]["crossover_epsilon"].iloc[0]
    assert f"at ε ≈ {median:.3g} on the median" in guide
    assert (cross[cross["base"] != "wasserstein_prior"]["crossings"] == 0).all()  # "never beats" in the guide

    def cell(method, eps):
        r = sweep[(sweep["method"] == method) & (abs(sweep["epsilon"] - eps) < 1e-9)].iloc[0]
        return " / ".join(f"{v:,.0f}" for v in (r["median"], r["q90"], r["worst"]))

    row = (
        "| 0.01 | "
        + " | ".join(
            cell(m, 0.01) for m in ("postprocessing", "wasserstein_prior", "wasserstein_congenial", "wasserstein_naive")
        )
        + " |"
    )
    assert row in guide, row
