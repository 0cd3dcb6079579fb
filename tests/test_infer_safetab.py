"""SafeTab's likelihood for `dpspec infer`: exact, normalized over every release a group can get
(published detail, values, suppression), and a target it cannot inform is a message."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner
from dpspec_safetab.likelihood import DiscreteGaussianTails, safetab_likelihoods
from scipy.special import logsumexp

import dpspec
from dpspec.api import check, discrete_gaussian_logpmf
from dpspec.cli.main import main

ROOT = Path(__file__).resolve().parents[1]
P_SPEC = ROOT / "specs" / "safetab_p_production.dps"


def test_tails_match_sums_of_the_pmf():
    tails = DiscreteGaussianTails(31)
    support = np.arange(-400, 401)
    logp = discrete_gaussian_logpmf(31, support)
    for lo, hi in [(-np.inf, -30), (-np.inf, 0), (-3, 4), (10, 40), (25, np.inf), (-np.inf, np.inf)]:
        inside = (support > lo) & (support <= hi)
        assert math.isclose(
            float(tails.log_between(lo, hi)), float(logsumexp(logp[inside])), rel_tol=1e-9, abs_tol=1e-12
        )
    assert float(tails.log_between(5, 5)) == -np.inf


@pytest.fixture(scope="module")
def p_design():
    spec = dpspec.load(str(P_SPEC))
    checked = check(spec)
    mech, params = checked.mechanism, checked.params
    design = mech.design(spec, params)
    sel = mech._iteration_table(spec, params).selection(2, "coarse")
    group = str(sel[~sel["detailed_only"]]["iteration"].iloc[0])
    return spec, mech, params, design, group


def _release(design, group, values):
    """Tract-level, level-2 rows of table t1 for one group: tract v<i> publishes the total
    values[i]; tract 'absent' publishes another group only; tract r<k> publishes rung k."""
    details = design.tables[0].details
    variables = ["QSEX", "AGE4", "AGE9", "AGE23"]
    rows = []

    def row(geocode, grp, detail, count):
        rows.append(
            {
                "table": "t1",
                "geography": "tract",
                "geocode": geocode,
                "group": grp,
                "group_level": 2,
                "detail": detail,
                **{v: "*" for v in variables},
                "count": count,
            }
        )

    for i, v in enumerate(values):
        row(f"v{i}", group, "total", int(v))
    row("absent", "1004", "total", 50)
    for k in range(1, len(details)):
        row(f"r{k}", group, details[k].name, 1000)  # the sum of its cells: adds nothing
    return {"counts": pd.DataFrame(rows)}


def _likelihoods(monkeypatch, spec, mech, params, release):
    """The likelihoods of a release whose tracts (v0, absent, r1, ...) stand for the declared ones."""
    import dpspec_safetab.likelihood as lk

    real = lk.declared_units
    tracts = tuple(sorted(release["counts"]["geocode"].astype(str).unique()))
    monkeypatch.setattr(lk, "declared_units", lambda s, t, levels: {**real(s, t, levels), "tract": tracts})
    return safetab_likelihoods(mech, spec, params, release)


@pytest.mark.slow  # sums a SafeTab group's release probabilities over its outcomes
@pytest.mark.parametrize("truth", [0, 3, 960, 975])
def test_a_group_s_release_probabilities_sum_to_one(p_design, truth, monkeypatch):
    """For a tract-level group with true total t, the published outcomes (rung 0 with total v
    above the suppression threshold, suppressed, or rung 1..3 with cells) have probabilities
    P(rung | t) pmf(v - t), P(rung 0 | t) F(thr - t), P(rung k | t): they must sum to 1."""
    spec, mech, params, design, group = p_design
    values = np.arange(max(truth - 250, 0), truth + 251)  # 45 standard deviations either side
    likelihoods = _likelihoods(monkeypatch, spec, mech, params, _release(design, group, values))
    (totals,) = [lk for lk in likelihoods if lk.description.startswith("t1 tract level2:")]
    mine = (totals.cells["group"] == group).to_numpy()
    tract = totals.cells["tract"].to_numpy()
    lp = totals.logpmf(np.full((1, len(totals.value)), truth))[0]
    published = mine & np.char.startswith(tract.astype(str), "v")
    # values at or below the suppression threshold are never published (such a row cannot occur)
    keep = totals.value[published] > _threshold(mech, spec, design)
    mass = np.exp(lp[published])[keep].sum() + np.exp(lp[mine & (tract == "absent")]).sum()
    mass += np.exp(lp[mine & np.char.startswith(tract.astype(str), "r")]).sum()
    assert math.isclose(mass, 1.0, rel_tol=1e-9), mass
    assert np.all(lp <= totals.log_max + 1e-12)


def _threshold(mech, spec, design):
    from dpspec_safetab.engine import suppression_threshold
    from dpspec_safetab.tabulate import fanout_of

    cell = design.tables[0].cell("tract", 2)
    k, _ = fanout_of(design, mech._iteration_table(spec, check(spec).params), 2, "coarse")
    return suppression_threshold(mech.noise_sigma2(k, dict(design.stages(cell))["stage 2"]), design.suppression)


@pytest.mark.slow  # SafeTab likelihoods over many candidate records
def test_the_likelihood_prefers_the_truth_direction(p_design, monkeypatch):
    """A published total v is most likely under t = v; an absent (suppressed) group is more
    likely small than large; a group published at rung 3 is more likely above the last threshold."""
    spec, mech, params, design, group = p_design
    likelihoods = _likelihoods(monkeypatch, spec, mech, params, _release(design, group, [40]))
    (totals,) = [lk for lk in likelihoods if lk.description.startswith("t1 tract level2:")]
    cells = totals.cells.assign(i=np.arange(len(totals.value)))
    at = {t: cells[(cells["group"] == group) & (cells["tract"] == t)]["i"].iloc[0] for t in ("v0", "absent", "r3")}
    grid = np.r_[0:200, 1000, 5000, 19000:21000:10]
    lp = totals.logpmf(np.repeat(grid[:, None], len(totals.value), axis=1))
    assert grid[np.argmax(lp[:, at["v0"]])] == 40
    assert lp[0, at["absent"]] > lp[30, at["absent"]] > lp[200, at["absent"]] == -np.inf
    assert grid[np.argmax(lp[:, at["r3"]])] >= 19971 - 100


def _declared_tracts(spec, params):
    from dpspec_safetab.geography import declared_units

    return declared_units(spec, params["table"], ["tract"])["tract"]


def test_a_declared_tract_the_release_never_names_is_conditioned_on_as_suppressed(p_design):
    """The keys are the declared units, not the release's: a tract whose every group was
    suppressed appears nowhere in the release, yet its groups' absence is a factor (the
    probability that their totals were suppressed), as for a tract the release does name."""
    spec, mech, params, design, group = p_design
    tracts = _declared_tracts(spec, params)
    named, silent = tracts[:-1], tracts[-1]
    release = {
        "counts": pd.DataFrame(
            [
                {
                    "table": "t1",
                    "geography": "tract",
                    "geocode": t,
                    "group": group,
                    "group_level": 2,
                    "detail": "total",
                    **{v: "*" for v in ("QSEX", "AGE4", "AGE9", "AGE23")},
                    "count": 40,
                }
                for t in named
            ]
        )
    }
    (totals,) = [
        lk for lk in safetab_likelihoods(mech, spec, params, release) if lk.description.startswith("t1 tract level2:")
    ]
    assert set(totals.cells["tract"]) == set(tracts)
    cells = totals.cells.reset_index(drop=True)
    other = str(cells.loc[cells["group"] != group, "group"].iloc[0])
    at = {
        t: int(np.flatnonzero(((cells["tract"] == t) & (cells["group"] == other)).to_numpy())[0])
        for t in (named[0], silent)
    }
    lp = totals.logpmf(np.repeat(np.array([[0], [500]]), len(totals.value), axis=1))
    # the silent tract's groups are suppressed exactly like the named tract's other groups
    assert lp[0, at[silent]] == lp[0, at[named[0]]] > lp[1, at[silent]]


def test_a_release_naming_an_undeclared_tract_is_a_data_error(p_design):
    spec, mech, params, design, group = p_design
    release = _release(design, group, [40])
    with pytest.raises(dpspec.errors.DataError, match="the release names tract 'v0'.*does not declare"):
        safetab_likelihoods(mech, spec, params, release)


@pytest.mark.slow  # compiles the production SafeTab-P spec and infers on it
def test_infer_on_safetab_says_why_no_target_is_informed(tmp_path):
    out = tmp_path / "release"
    made = CliRunner().invoke(main, ["compile", str(P_SPEC), "-o", str(out), "--seed", "3"])
    assert (out / "manifest.json").exists(), made.output  # exit 1: the known-seed finding is critical
    res = CliRunner().invoke(main, ["infer", str(P_SPEC), str(out), "--target", "count persons by county"])
    assert res.exit_code == 1 and "Traceback" not in res.output
    assert "does not inform" in res.output and "'group' is not a column of table 'persons'" in res.output
    assert "and 2" in res.output and "more" in res.output  # the left-out list is summarized, not 27 lines


def test_the_rung_probabilities_match_the_mechanism_s_choice():
    """P(rung r | t) as the likelihood computes it against the frequencies of the mechanism's
    own stage-1 draw and `choose_detail`, for totals around the thresholds (off-by-one check)."""
    from dpspec_safetab.engine import add_noise, choose_detail
    from dpspec_safetab.likelihood import _rung_bounds

    from dpspec.api import make_rng

    thresholds, sigma2, n = (971, 4971, 19971), 283, 200_000
    tails = DiscreteGaussianTails(sigma2)
    rng = make_rng(12)
    for t in (940, 970, 971, 990, 4971):
        rungs = choose_detail(add_noise(np.full(n, t), sigma2, rng), thresholds)
        for r in range(4):
            lo, hi = _rung_bounds(thresholds, r)
            p = float(np.exp(tails.log_between(lo - t, hi - t)))
            freq = float(np.mean(rungs == r))
            assert abs(freq - p) <= 4 * math.sqrt(p * (1 - p) / n) + 1e-9, (t, r, freq, p)
