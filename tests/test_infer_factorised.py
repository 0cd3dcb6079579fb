"""Algorithm 2's factorised proposal (issue 23: `dpspec infer` on a whole case-study month).

With a Dirichlet-multinomial prior the posterior of a county's living and dead cases factorises
given the month's total; the proposal draws it by forward filtering and backward sampling within
windows, mixed with the least-squares proposal. Checked: its recorded probabilities are its own
law (against enumeration), the weighted draws match the exact posterior of a tiny release, and on
real counties the effective sample size stays near the number of proposals, where the
least-squares proposal alone collapsed."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import dpspec

from . import test_wasserstein_infer_period as period

ROOT = Path(__file__).resolve().parents[1]


def _model(spec_path, out):
    from dpspec.check.checker import check
    from dpspec.inference.model import build_model, parse_target
    from dpspec.inference.prior import make_prior
    from dpspec.inference.release import load_release
    from dpspec.run.compiler import spec_sha256

    spec = dpspec.load(str(spec_path))
    checked = check(spec)
    release = load_release(str(out), spec_sha256(spec))
    lk = checked.mechanism.likelihood(spec, checked.params, release.outputs)
    model = build_model(spec, parse_target(period.TARGET, spec), lk, release.outputs)
    return model, make_prior(None, model)


def _recorded_law_is_drawn(fac, model, x):
    """The recorded law sums to 1 over every table of the total and the draws x follow it."""
    tables = np.array(list(period._compositions(int(model.totals[0]), model.n_cells)))
    q = np.exp(fac.logpmf(tables))
    assert q.sum() == pytest.approx(1.0, abs=1e-9)
    seen = pd.Series(map(tuple, x)).value_counts()
    for t, p in zip(map(tuple, tables), q):
        if p > 0.01:
            assert abs(seen.get(t, 0) / len(x) - p) <= 4 * math.sqrt(p * (1 - p) / len(x)) + 1e-9, t
    return tables, q


def test_the_factorised_proposal_records_the_probability_of_what_it_draws(tmp_path):
    from dpspec.inference.factorised import build
    from dpspec.run.compiler import make_rng

    model, prior = _model(*period._release(tmp_path, seed=5))
    fac, why = build(model, prior)
    assert fac is not None, why
    x, logq = fac.sample(20_000, make_rng(1))
    assert np.all(x.sum(axis=1) == model.totals[0]) and np.all(x >= 0)
    assert np.allclose(fac.logpmf(x), logq)  # evaluating a draw retraces the walk that drew it
    # the recorded law is a law (sums to 1 over every table of the total), and the draws follow it
    tables, q = _recorded_law_is_drawn(fac, model, x)
    # inside the windows it is the posterior itself: prior x likelihood / q is constant there
    from dpspec.inference.sampler import _target

    ratio = _target(model, prior, tables[q > 0]) - np.log(q[q > 0])
    assert np.ptp(ratio) < 1e-9


def test_importance_with_the_factorised_proposal_matches_the_exact_posterior(tmp_path):
    spec_path, out = period._release(tmp_path, seed=5)
    released = pd.read_csv(out / "counts.csv")
    counties = ["Cameron", "Erie"]
    y = [int(released.loc[released["county"] == c, "cases"].iloc[0]) for c in counties]
    z = [int(released.loc[released["county"] == c, "died"].iloc[0]) for c in counties]
    total = sum(cases for (m, _), (cases, _) in period.DATA.items() if m == "2020-08")
    tables, post = period._exact_posterior(y, z, total, 1 / 16, 1 / 8)
    res = dpspec.infer(str(spec_path), str(out), period.TARGET, draws=4000, seed=3, method="importance")
    assert res.method == "importance" and any("factorises into 2 components" in n for n in res.notes)
    assert res.draws.ess > 0.8 * res.draws.proposals
    labels = [c["cell"] for c in res.cells]
    for j, county in enumerate(counties):
        for k, died in enumerate(("False", "True")):
            values = tables[:, 2 * j + k]
            mean = values @ post
            sd = math.sqrt(values**2 @ post - mean**2)
            got = res.cells[labels.index(f"month=2020-08, county={county}, died={died}")]["mean"]
            assert abs(got - mean) <= 4 * sd / math.sqrt(res.draws.ess), (county, died)


@pytest.mark.slow  # importance sampling on real counties
def test_on_real_counties_the_effective_sample_size_stays_near_the_proposals(tmp_path, monkeypatch):
    """Twelve counties of August 2020 at the high-privacy budget (24 latent cells): the least-squares
    proposal alone is kept for comparison; the factorised one keeps almost every proposal."""
    cases = pd.read_parquet(ROOT / "specs" / "data" / "pa_covid" / "cases.parquet")
    cases = cases[cases["month"].astype(str).isin(["2020-07", "2020-08"])]
    keep = sorted(cases["county"].astype(str).unique())[::6][:12]
    counts = (
        cases[cases["county"].astype(str).isin(keep)]
        .groupby(["month", "county"], observed=True)["died"]
        .agg(["size", "sum"])
    )
    data = {(str(m), str(c)): (int(n), int(d)) for (m, c), (n, d) in counts.iterrows()}
    monkeypatch.setattr(period, "DATA", data)
    spec_path, out = period._release(tmp_path, seed=8)
    res = dpspec.infer(str(spec_path), str(out), period.TARGET, draws=1000, seed=4, method="importance")
    assert len(res.cells) == 24 and any("factorises into 12 components" in n for n in res.notes)
    assert res.draws.ess > 0.8 * res.draws.proposals
    assert not any("is small" in n for n in res.notes)
    from dpspec.inference import factorised

    monkeypatch.setattr(factorised, "MAX_TABLE", 0)  # the factorised proposal refused: least squares alone
    alone = dpspec.infer(str(spec_path), str(out), period.TARGET, draws=1000, seed=4, method="importance")
    assert any("does not apply" in n for n in alone.notes)
    # per proposal, the least-squares proposal alone is worth a tiny fraction (it needs 20 per draw)
    assert alone.draws.ess / alone.draws.proposals < 0.1 * res.draws.ess / res.draws.proposals


def test_the_pilot_skips_the_joint_term_when_the_rows_alone_rule_rejection_out(tmp_path):
    """A congenial release's normaliser is the costly part of its likelihood and at most 0, so the
    rate without it bounds the rate from above: when that bound already exceeds the budget, the
    pilot returns it as a bound, without computing a single normaliser."""
    import attrs

    from dpspec.inference import sampler
    from dpspec.run.compiler import make_rng

    spec = period.CASE_STUDY.with_name("wasserstein_congenial_high_privacy.dps")
    model, prior = _model(*period._release(tmp_path, seed=4, spec=spec))
    block = model.blocks[0]
    assert block.likelihood.joint is not None

    def refuse(truth):
        raise AssertionError("the joint term was computed")

    cut = attrs.evolve(
        model, blocks=(attrs.evolve(block, likelihood=attrs.evolve(block.likelihood, joint=refuse)), *model.blocks[1:])
    )
    pilot = sampler.estimate_acceptance(cut, prior, make_rng(1), 2000, draws=1000, max_proposals=10)
    assert pilot.upper_bound and len(pilot.kept) == 0
    full = sampler.estimate_acceptance(model, prior, make_rng(1), 2000, draws=1000, max_proposals=10**9)
    assert not full.upper_bound and full.log10_rate <= pilot.log10_rate + 1e-12  # the bound holds


def test_a_prior_base_proposal_with_the_joint_stand_in_records_the_law_it_draws(tmp_path, monkeypatch):
    """The prior base's normaliser enters the proposal as per-answer stand-ins and its counties are
    drawn as pairs (sum, then dead cases): the recorded probabilities are a law over every table of the
    total, the draws follow it, and the pairs' law is the enumerated components' law."""
    from dpspec.inference import factorised
    from dpspec.run.compiler import make_rng

    spec = period.CASE_STUDY.with_name("wasserstein_prior_high_privacy.dps")
    model, prior = _model(*period._release(tmp_path, seed=5, spec=spec))
    assert model.blocks[0].likelihood.joint is not None
    fac, why = factorised.build(model, prior)
    assert fac is not None, why
    assert all(isinstance(c, factorised.Pair) for g in fac.groups for c in g.parts)
    x, logq = fac.sample(20_000, make_rng(2))
    assert np.all(x.sum(axis=1) == model.totals[0]) and np.all(x >= 0)
    assert np.allclose(fac.logpmf(x), logq)
    tables, q = _recorded_law_is_drawn(fac, model, x)
    monkeypatch.setattr(factorised, "_pair", lambda *a: None)  # every component enumerated instead
    enumerated, _ = factorised.build(model, prior)
    assert not any(isinstance(c, factorised.Pair) for g in enumerated.groups for c in g.parts)
    assert np.allclose(np.exp(enumerated.logpmf(tables)), q, atol=1e-12)


@pytest.mark.slow  # importance sampling on real counties
def test_on_real_counties_the_joint_stand_in_lifts_the_prior_base_effective_sample_size(tmp_path, monkeypatch):
    """Twelve counties of August 2020, prior base, high privacy: without the stand-in for the
    normaliser the proposal keeps about 10 of 1,000 proposals; with it, more than a quarter."""
    from scipy.special import logsumexp

    from dpspec.inference import factorised, sampler
    from dpspec.run.compiler import make_rng

    cases = pd.read_parquet(ROOT / "specs" / "data" / "pa_covid" / "cases.parquet")
    cases = cases[cases["month"].astype(str).isin(["2020-07", "2020-08"])]
    keep = sorted(cases["county"].astype(str).unique())[::6][:12]
    counts = (
        cases[cases["county"].astype(str).isin(keep)]
        .groupby(["month", "county"], observed=True)["died"]
        .agg(["size", "sum"])
    )
    monkeypatch.setattr(period, "DATA", {(str(m), str(c)): (int(n), int(d)) for (m, c), (n, d) in counts.iterrows()})
    spec = period.CASE_STUDY.with_name("wasserstein_prior_high_privacy.dps")
    model, prior = _model(*period._release(tmp_path, seed=8, spec=spec))
    fit = sampler._least_squares(model)

    def ess(fac):
        _, logw = sampler._mixture(model, prior, fac, 1000, make_rng(4), *fit)
        w = np.exp(logw - logsumexp(logw))
        return 1 / np.sum(w * w)

    tilted, why = factorised.build(model, prior)
    assert tilted is not None, why
    monkeypatch.setattr(factorised, "_joint_standins", lambda model, tables: tables)
    plain, _ = factorised.build(model, prior)
    before, after = ess(plain), ess(tilted)
    assert before < 50 and after > 250, (before, after)


def test_a_refused_probe_one_step_off_the_release_skips_the_stand_in_grid():
    """The plugin refuses a whole batch when it cannot certify one vector (each vector evaluated
    alone), so the vectors one step off the release are tried first: refused, the block goes
    without the stand-in at once instead of after the whole grid (~26 s at epsilon 10 on a month)."""
    from types import SimpleNamespace

    from dpspec.api import MechanismError
    from dpspec.inference.factorised import _joint_standins

    c0 = np.array([5, 3, 2])
    calls = []

    def joint(truth, refuse):
        calls.append(truth.shape[0])
        if refuse and (truth.sum(axis=1) != 10).any():
            raise MechanismError("not certified")
        return -0.5 * np.abs(truth - c0).sum(axis=1)

    table = -np.abs(np.arange(11)[:, None] - c0[None, :]).astype(float)
    for refuse in (True, False):
        calls.clear()
        lik = SimpleNamespace(joint=lambda t, refuse=refuse: joint(t, refuse), estimate=c0.astype(float))
        model = SimpleNamespace(blocks=[SimpleNamespace(likelihood=lik)], totals=np.array([10]))
        (out,) = _joint_standins(model, [table])
        if refuse:
            assert calls == [6] and out is table  # only the probe: c0 -+ 1 for each of 3 answers
        else:
            assert len(calls) == 2 and calls[1] > 6 and not np.array_equal(out, table)
