"""`dpspec infer` on the case study's releases (issue 23, item 5): a bundled `specs/pa_covid/` spec
(naive base, with a `period`) run on a tiny two-month file; the previous month's counts are Z,
constants of the model, and the released month's cases and deaths are the target, deaths <= cases
by construction. The posterior is checked against an exact enumeration of every latent table."""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import dpspec

from .test_wasserstein import _compositions

ROOT = Path(__file__).resolve().parents[1]
CASE_STUDY = ROOT / "specs" / "pa_covid" / "wasserstein_naive_high_privacy.dps"
TARGET = "count cases by month, county, died"
# (month, county) -> (cases, deaths): the previous month is Z, the released month is the target
DATA = {
    ("2020-07", "Cameron"): (2, 0),
    ("2020-07", "Erie"): (3, 1),
    ("2020-08", "Cameron"): (1, 1),
    ("2020-08", "Erie"): (3, 1),
}


def _release(tmp_path, seed, spec=CASE_STUDY):
    from dpspec.publish.output import write_result

    text = spec.read_text().replace('data cases from "../data/pa_covid/cases.parquet"', 'data cases from "cases.csv"')
    assert 'data cases from "cases.csv"' in text and 'release_period: "2020-08"' in text
    # a release has every declared county: the file's are declared, and no others (the exact
    # posterior enumerates every latent table); the six declared months stay, four of them empty
    counties = sorted({county for _, county in DATA})
    text = re.sub(
        r'county : category values from "[^"]+"', "county : {%s}" % ", ".join(f'"{c}"' for c in counties), text
    )
    text = re.sub(r'^  keys "[^"]+" released "[^"]+"\n', "", text, flags=re.M)
    assert "county : {" in text
    src = tmp_path / "src"
    src.mkdir()
    rows = ["month,county,died"]
    for (month, county), (cases, deaths) in DATA.items():
        rows += [f"{month},{county},{'true' if i < deaths else 'false'}" for i in range(cases)]
    (src / "cases.csv").write_text("\n".join(rows) + "\n")
    (src / "s.dps").write_text(text)
    out = tmp_path / "out"
    write_result(dpspec.compile(str(src / "s.dps"), seed=seed), str(out))
    return src / "s.dps", out


def _log_norm(center, r, upper=None):
    """log sum_{k=0}^{upper} exp(-r |k - center|), summed term by term (upper None: to convergence)."""
    top = upper if upper is not None else center + int(60 / r) + 1
    return math.log(sum(math.exp(-r * abs(k - center)) for k in range(top + 1)))


def _exact_posterior(y, z, total, r_c, r_o):
    """Every latent table of the released month (cells: county x died, summing to the public
    total; infer's default prior makes each equally likely) with its posterior probability."""
    tables = np.array(list(_compositions(total, 2 * len(y))))  # columns: (c0 alive, c0 dead, c1 alive, ...)
    logp = []
    for t in tables:
        lp = 0.0
        for i in range(len(y)):
            cases, deaths = t[2 * i] + t[2 * i + 1], t[2 * i + 1]
            lp += -r_c * abs(y[i] - cases) - _log_norm(cases, r_c)
            lp += -r_o * abs(z[i] - deaths) - _log_norm(deaths, r_o, y[i])  # deaths drawn on 0..released cases
        logp.append(lp)
    p = np.exp(np.array(logp) - max(logp))
    return tables, p / p.sum()


def test_infer_on_a_case_study_release_matches_the_exact_posterior_and_deaths_stay_below_cases(tmp_path):
    from dpspec.check.checker import check

    spec_path, out = _release(tmp_path, seed=5)
    released = pd.read_csv(out / "counts.csv")
    assert set(released["month"]) == {"2020-08"}  # the previous month is Z, not released
    counties = ["Cameron", "Erie"]
    y = [int(released.loc[released["county"] == c, "cases"].iloc[0]) for c in counties]
    z = [int(released.loc[released["county"] == c, "died"].iloc[0]) for c in counties]
    assert all(0 <= d <= c for c, d in zip(y, z))  # the release itself: deaths <= cases
    spec = dpspec.load(str(spec_path))
    checked = check(spec)
    r_c, r_o = (float(r) for r in checked.mechanism.rates(spec, checked.params))
    assert (r_c, r_o) == (1 / 16, 1 / 16)  # epsilon 0.5 split evenly; sensitivities 2 and 2 (both given the total)
    total = sum(cases for (m, _), (cases, _) in DATA.items() if m == "2020-08")
    tables, post = _exact_posterior(y, z, total, r_c, r_o)

    draws = 6000
    res = dpspec.infer(str(spec_path), str(out), TARGET, draws=draws, seed=11, method="rejection")
    assert res.method == "rejection"
    assert any("2020-07" not in u and "earlier period's counts" in u for u in res.used)  # Z's other month: constants
    labels = [c["cell"] for c in res.cells]
    assert len(labels) == 4 and all(label.startswith("month=2020-08, ") for label in labels)
    col = {(c, d): labels.index(f"month=2020-08, county={c}, died={d}") for c in counties for d in ("False", "True")}
    x = res.samples
    assert np.all(x.sum(axis=1) == total)  # the public total holds in every draw
    for j, county in enumerate(counties):
        for k, died in enumerate(("False", "True")):
            values = tables[:, 2 * j + k]
            mean = values @ post
            sd = math.sqrt(values**2 @ post - mean**2)
            assert abs(x[:, col[(county, died)]].mean() - mean) <= 4 * sd / math.sqrt(draws), (county, died)

    # the rate deaths / cases: every posterior draw in [0, 1] (deaths <= cases by construction),
    # and its posterior mean matches the exact one over the tables with at least one case
    rated = dpspec.infer(str(spec_path), str(out), TARGET, draws=draws, seed=11, method="rejection", rate=True)
    for j, county in enumerate(counties):
        cases = tables[:, 2 * j] + tables[:, 2 * j + 1]
        some = cases > 0
        exact_rate = (tables[some, 2 * j + 1] / cases[some]) @ (post[some] / post[some].sum())
        dead = rated.samples[:, col[(county, "True")]]
        alive = rated.samples[:, col[(county, "False")]]
        cases_drawn = dead + alive
        rate = dead[cases_drawn > 0] / cases_drawn[cases_drawn > 0]
        assert np.all((rate >= 0) & (rate <= 1))
        cell = rated.cells[col[(county, "True")]]
        assert 0 <= cell["q025"] <= cell["q975"] <= 1
        assert cell["mean"] == pytest.approx(exact_rate, abs=0.05)


def test_the_contracted_rate_of_a_release_is_visible_from_its_posterior(tmp_path):
    """Erie's released deaths equal its released cases (rate 1, the paper's ContractedRates:
    deaths drawn on 0..released cases pile up at the bound); the posterior rate, conditioned on
    cases and deaths together, puts most of its mass well below 1."""
    spec_path, out = _release(tmp_path, seed=8)
    released = pd.read_csv(out / "counts.csv").set_index("county")
    cases, deaths = int(released.loc["Erie", "cases"]), int(released.loc["Erie", "died"])
    assert cases > 0 and deaths == cases  # this seed's release contracts Erie's rate to 1 (truth: 1 of 3)
    res = dpspec.infer(str(spec_path), str(out), TARGET, draws=4000, seed=3, method="rejection", rate=True)
    cell = next(c for c in res.cells if c["cell"] == "month=2020-08, county=Erie, died=True")
    assert cell["mean"] < 0.8 and cell["q025"] < 0.5 <= cell["q975"] <= 1
    # infer flags it itself: the release determines a table (alive = cases - deaths, dead = deaths)
    # whose rate 1 sits at a bound the posterior's 95% interval extends below
    assert cell["post_processed"] == 1.0
    assert res.contractions["checked"] and "month=2020-08, county=Erie, died=True" in res.contractions["bounds"]
    assert "month=2020-08, county=Cameron, died=True" not in res.contractions["bounds"]  # released 11 of 16


def test_the_truncated_normalizer_stays_finite_far_above_the_released_count():
    """The deaths' law on 0..released cases, for a latent death count thousands above it (a
    Pennsylvania-sized posterior proposes such tables): log-space sum against the closed form, so
    the likelihood stays below its bound instead of overflowing to +inf."""
    from scipy.special import logsumexp

    from dpspec_wasserstein.likelihood import _log_norm

    r = 2.5
    for center, upper in [(0, 3), (2, 3), (3, 3), (5, 3), (4000, 3), (10, 0), (90, 2255)]:
        want = logsumexp(-r * np.abs(np.arange(upper + 1) - center))
        assert _log_norm(np.array([center]), r, np.array([upper]))[0] == pytest.approx(want, rel=1e-12, abs=1e-12)


@pytest.mark.parametrize("name", ["wasserstein_congenial_high_privacy", "wasserstein_prior_low_privacy"])
def test_infer_runs_on_the_congenial_and_prior_case_study_specs_of_a_few_counties(tmp_path, name):
    """Their normalizer couples the counties (a Pennsylvania month takes the windowed one, tested in
    test_wasserstein_likelihood.py); on two counties the exact convolution is small. The prior spec releases the previous month's counts (`output
    base`) its likelihood rebuilds the concentrations from."""
    spec_path, out = _release(tmp_path, seed=4, spec=CASE_STUDY.with_name(name + ".dps"))
    res = dpspec.infer(str(spec_path), str(out), TARGET, draws=500, seed=2, rate=True)
    assert [c["cell"] for c in res.cells] == [
        f"month=2020-08, county={c}, died={d}" for c in ("Cameron", "Erie") for d in ("False", "True")
    ]
    assert np.all(res.samples >= 0) and np.all(res.samples.sum(axis=1) == 4)  # the month's public total
    assert all(0 <= c["q025"] <= c["mean"] <= c["q975"] <= 1 for c in res.cells)  # rates: deaths <= cases
    assert any("earlier period's counts" in u for u in res.used)


def test_algorithm_1_runs_for_the_prior_base_where_the_parts_bound_made_it_fall_back(tmp_path):
    """The prior base's rejection bound is the likelihood at c = y (log_max_total), not the parts'
    prod w(y): on the two-county release at epsilon 10 the estimated acceptance rises from about
    0.001 to about 0.07, so 500 draws fit in 20,000 proposals and Algorithm 1 runs instead of
    falling back to importance sampling."""
    spec_path, out = _release(tmp_path, seed=4, spec=CASE_STUDY.with_name("wasserstein_prior_low_privacy.dps"))
    res = dpspec.infer(str(spec_path), str(out), TARGET, draws=500, seed=2, max_proposals=20_000)
    assert res.method == "rejection" and res.acceptance_estimate > 0.02
    assert np.all(res.samples.sum(axis=1) == 4)


@pytest.mark.parametrize("shift", [0.0, -3.0])
def test_algorithm_1_on_a_prior_base_release_matches_the_exact_posterior(tmp_path, monkeypatch, shift):
    """Rejection under the bound at c = y on the prior base's two-county release (epsilon 10): the
    posterior means of the four cells match the exact posterior, enumerated here over every table
    with the Dirichlet-multinomial weights C(k + a - 1, k), a = July's counts + 1, and the
    normaliser over every split of the total. Control: a bound 3 below the maximum (invalid: the
    likelihood near c = y is accepted with probability 1, flattened) moves a mean off."""
    import dpspec_wasserstein.likelihood as wl

    from dpspec.check.checker import check

    exact_bound = wl._likelihood_at_release
    monkeypatch.setattr(wl, "_likelihood_at_release", lambda *a: exact_bound(*a) + shift)
    spec_path, out = _release(tmp_path, seed=5, spec=CASE_STUDY.with_name("wasserstein_prior_low_privacy.dps"))
    released = pd.read_csv(out / "counts.csv")
    counties = ["Cameron", "Erie"]
    y = [int(released.loc[released["county"] == c, "cases"].iloc[0]) for c in counties]
    z = [int(released.loc[released["county"] == c, "died"].iloc[0]) for c in counties]
    spec = dpspec.load(str(spec_path))
    checked = check(spec)
    r_c, r_o = (float(r) for r in checked.mechanism.rates(spec, checked.params))
    alpha = [DATA[("2020-07", c)][0] + 1 for c in counties]
    total = sum(cases for (m, _), (cases, _) in DATA.items() if m == "2020-08")
    assert sum(y) == total

    def weight(v, cases):
        return math.prod(math.comb(v[i] + alpha[i] - 1, v[i]) * math.exp(-r_c * abs(v[i] - cases[i])) for i in range(2))

    splits = list(_compositions(total, 2))
    tables = np.array(list(_compositions(total, 4)))
    logp = []
    for t in tables:
        cases = [t[0] + t[1], t[2] + t[3]]
        lp = math.log(weight(y, cases) / sum(weight(v, cases) for v in splits))
        for i in range(2):
            lp += -r_o * abs(z[i] - t[2 * i + 1]) - _log_norm(t[2 * i + 1], r_o, y[i])
        logp.append(lp)
    post = np.exp(np.array(logp) - max(logp))
    post /= post.sum()
    draws = 6000
    res = dpspec.infer(str(spec_path), str(out), TARGET, draws=draws, seed=11, method="rejection")
    assert res.method == "rejection"
    labels = [c["cell"] for c in res.cells]
    gaps = []
    for j, county in enumerate(counties):
        for k, died in enumerate(("False", "True")):
            values = tables[:, 2 * j + k]
            mean = values @ post
            sd = math.sqrt(values**2 @ post - mean**2)
            got = res.samples[:, labels.index(f"month=2020-08, county={county}, died={died}")].mean()
            gaps.append(abs(got - mean) / (4 * sd / math.sqrt(draws)))
    assert (max(gaps) <= 1) if shift == 0 else (max(gaps) > 1), gaps
