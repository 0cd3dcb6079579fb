"""The seed-2 case study script on a few counties, months and replicates (issue 23)."""
from __future__ import annotations

import importlib.util
import os

import pandas as pd

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _script():
    spec = importlib.util.spec_from_file_location("pa_covid_case_study", os.path.join(ROOT, "scripts", "pa_covid_case_study.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_case_study_on_three_counties_writes_one_report_set(tmp_path):
    script = _script()
    out = tmp_path / "cs"
    assert script.main(["-o", str(out), "--replicates", "4", "--counties", "Allegheny,Erie,Cameron",
                        "--months", "2020-05", "--seed", "1"]) == 0
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
    # every figure is drawn (Figures 1 and 2 are box plots: Cameron low and high, then low and high)
    assert html.count("<svg") == html.count("<h2>Figure") == 10
    assert ">None<" not in html and "None</" not in html
    contractions = pd.read_csv(out / "contractions.csv")
    assert set(contractions["effect"]) == {"ContractedCaseZeros", "ContractedDeathZeros", "ContractedRates"}
    assert (out / "manifest.json").exists() and (out / "summary.csv").exists()
    head = pd.read_csv(out / "headline.csv")
    assert len(head) == 8 and set(head["epsilon"]) == {10.0, 0.5}
    assert (head["median"] <= head["q90"]).all() and (head["q90"] <= head["worst"]).all()
    post = head[head["method"] == "postprocessing"]
    assert post["ContractedRates_at_most_10_cases"].notna().all() or post["ContractedRates_over_100_cases"].notna().all()
    assert "least populous quarter" in html
