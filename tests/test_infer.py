"""dpspec infer: posterior inference on partially private releases (seed 2, Algorithms 1 and 2).

Statistical tests use fixed seeds and tolerances derived from the sampling error they allow.
"""

from __future__ import annotations

import json
import math
import os
import textwrap

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

import dpspec
from dpspec import ir
from dpspec.cli.main import main
from dpspec.run.compiler import make_rng
from dpspec.inference import InferError, sampler, summary
from dpspec.inference.model import build_model, parse_target
from dpspec.inference.prior import Prior, make_prior
from dpspec.contract.mechanism import CountLikelihood
from dpspec.run.noise import discrete_gaussian, discrete_gaussian_logpmf, discrete_gaussian_pmf
from dpspec.language.parser import load_text_or_path

from .conftest import SPECS

SPEC = textwrap.dedent("""\
    spec "synthetic"
    domain d "synthetic" {
      stage edited
      table persons unit person {
        area : {a, b}
        kind : {x, y}
      }
    }
    data persons from "persons.csv"
    invariants {
      count persons
    }
    unit persons : hamming
    premetric pure
    mechanism randomized_response { table: persons  column: kind  p: 3/4 }
    budget epsilon <= 1.1
    """)


def spec_with(invariant: str) -> ir.Spec:
    return load_text_or_path(SPEC.replace("count persons\n", invariant + "\n"))


def dg_block(query: ir.CountQuery, cells: pd.DataFrame, truth: np.ndarray, sigma2, rng) -> CountLikelihood:
    """Noisy answers truth + discrete Gaussian noise, with their likelihood (as TopDown states it)."""
    value = truth + discrete_gaussian(sigma2, truth.size, rng)
    log_z = float(discrete_gaussian_logpmf(sigma2, [0])[0])
    s2 = float(sigma2)

    def logpmf(t):
        d = value - np.asarray(t, dtype=float)
        return -d * d / (2 * s2) + log_z

    n = truth.size
    return CountLikelihood(query, cells, value, logpmf, np.full(n, log_z), value.astype(float), np.full(n, s2))


def microdata(counts: dict) -> pd.DataFrame:
    rows = [(a, k) for (a, k), n in counts.items() for _ in range(n)]
    return pd.DataFrame(rows, columns=["area", "kind"])


CELLS = [("a", "x"), ("a", "y"), ("b", "x"), ("b", "y")]


def synthetic_model(truth, sigma2, rng, invariant="count persons"):
    spec = spec_with(invariant)
    target = parse_target("count persons by area, kind", spec)
    cells = pd.DataFrame(CELLS, columns=["area", "kind"])
    lk = dg_block(ir.CountQuery("persons", ("area", "kind")), cells, np.asarray(truth), sigma2, rng)
    outputs = {"persons": microdata(dict(zip(CELLS, truth)))}
    return build_model(spec, target, [lk], outputs)


# ---- the likelihoods the plugins state -------------------------------------------------------


def test_discrete_gaussian_logpmf_is_the_log_of_the_pmf_and_normalized():
    x = np.arange(-60, 61)
    assert np.allclose(np.exp(discrete_gaussian_logpmf(7, x)), discrete_gaussian_pmf(7, x))
    assert math.isclose(np.exp(discrete_gaussian_logpmf(7, x)).sum(), 1.0, rel_tol=1e-12)
    assert np.isfinite(discrete_gaussian_logpmf(2, [10_000])[0])  # no underflow to -inf


def test_randomized_response_likelihood_is_the_binomial_convolution():
    from dpspec_rr.likelihood import log_likelihood_table
    from scipy.stats import binom

    n, reported, p = 20, 12, 0.75
    k0, table = log_likelihood_table(n, reported, p)
    for k in range(k0, k0 + table.size):
        brute = sum(binom.pmf(j, k, p) * binom.pmf(reported - j, n - k, 1 - p) for j in range(reported + 1))
        assert math.isclose(math.exp(table[k - k0]), brute, rel_tol=1e-9)


def test_topdown_variance_inverts_to_sigma2():
    from dpspec_topdown.likelihood import sigma2_from_variance
    from dpspec.run.noise import discrete_gaussian_variance

    for s2 in (0.3, 1.0, 4.0, 50.0, 400.0):
        assert math.isclose(sigma2_from_variance(discrete_gaussian_variance(s2)), s2, rel_tol=1e-6)


# ---- the model and the prior -------------------------------------------------------------------


def test_prior_draws_match_the_public_total_and_the_dirichlet_multinomial_mean():
    rng = make_rng(1)
    model = synthetic_model([3, 5, 10, 2], 4, rng)
    prior = Prior(np.array([1.0, 2.0, 3.0, 4.0]), "test")
    x = prior.sample(model, 20_000, rng)
    assert np.all(x.sum(axis=1) == 20)
    # E[x_c] = N alpha_c / A; sd of a mean of 20,000 draws is below 0.04
    assert np.allclose(x.mean(axis=0), 20 * np.array([1, 2, 3, 4]) / 10, atol=0.2)
    lp = prior.logpmf(model, np.array([[2, 4, 6, 8], [2, 4, 6, 9], [-1, 5, 8, 8]]))
    assert np.isfinite(lp[0]) and lp[1] == -np.inf and lp[2] == -np.inf


@pytest.mark.slow  # a statistical test: 100 and 60 posterior draws over truths from the prior, about 5 s each
@pytest.mark.parametrize("method,trials", [("rejection", 100), ("importance", 60)])
def test_coverage_on_truths_drawn_from_the_prior(method, trials):
    """Bayesian calibration: if truths come from the prior, the 90% intervals cover them as often
    as their posterior mass says (about 90%, a little more for discrete counts)."""
    rng = make_rng(2015)
    prior_alpha = np.ones(4)
    covered, mass, n_cells = 0, 0.0, 0
    for _ in range(trials):
        theta = rng.dirichlet(prior_alpha)
        truth = rng.multinomial(20, theta)
        model = synthetic_model(truth, 4, rng)
        prior = Prior(prior_alpha, "uniform")
        if method == "rejection":  # exact rejection, or importance when too costly
            draws, _, _ = sampler.sample(model, prior, 400, rng, max_proposals=200_000, pilot_draws=2000)
        else:
            draws = sampler.importance(model, prior, 400, rng, proposals=2000)
        s = summary.summarize(draws.x, draws.weights)
        inside_draws = (draws.x >= s["q05"]) & (draws.x <= s["q95"])
        covered += int(np.sum((truth >= s["q05"]) & (truth <= s["q95"])))
        mass += float((inside_draws * draws.weights[:, None]).sum())
        n_cells += 4
    rate, expected = covered / n_cells, mass / n_cells
    sd = math.sqrt(expected * (1 - expected) / n_cells) * 2  # cells of one table are dependent: doubled
    assert 0.88 <= expected <= 0.97
    assert abs(rate - expected) < 4 * sd + 0.01, (rate, expected, sd)


def test_rejection_and_importance_agree():
    rng = make_rng(7)
    model = synthetic_model([2, 9, 6, 3], 6, rng)
    prior = make_prior(None, model)
    rej = sampler.rejection(model, prior, 6000, rng)
    imp = sampler.importance(model, prior, 6000, rng)
    assert rej is not None and rej.method == "rejection"
    assert imp.ess > 2000
    s_rej, s_imp = summary.summarize(rej.x, rej.weights), summary.summarize(imp.x, imp.weights)
    sd = rej.x.std(axis=0)
    # two independent Monte Carlo estimates of the same posterior mean
    err = 4 * sd * math.sqrt(1 / 6000 + 1 / imp.ess)
    assert np.all(np.abs(s_rej["mean"] - s_imp["mean"]) < err + 1e-9)
    assert np.all(np.abs(s_rej["median"] - s_imp["median"]) <= 1)
    assert np.all(np.abs(s_rej["q975"] - s_imp["q975"]) <= 2)


def test_conditioning_on_public_totals_narrows_intervals():
    """Over 8 seeds the 95% intervals given the area totals are about 0.82 times as wide as given
    the grand total alone (1.0 would mean the finer public totals were ignored)."""
    truth = [40, 10, 25, 25]
    widths = []
    for seed in range(8):
        coarse = synthetic_model(truth, 30, make_rng(seed), "count persons")
        fine = synthetic_model(truth, 30, make_rng(seed), "count persons by area")  # same noise (same seed)
        assert list(fine.totals) == [50, 50] and list(coarse.totals) == [100]
        pair = []
        for model in (coarse, fine):
            d = sampler.importance(model, make_prior(None, model), 2000, make_rng(seed + 100))
            s = summary.summarize(d.x, d.weights)
            pair.append(float(np.sum(s["q975"] - s["q025"])))
        widths.append(pair)
    coarse_w, fine_w = np.mean(widths, axis=0)
    assert all(f < c for c, f in widths), widths
    assert fine_w < 0.9 * coarse_w, widths


def test_public_statistics_released_elsewhere_condition_too_and_must_nest():
    rng = make_rng(9)
    cells = pd.DataFrame(CELLS, columns=["area", "kind"])
    truth = np.array([4, 6, 7, 3])
    lk = dg_block(ir.CountQuery("persons", ("area", "kind")), cells, truth, 4, rng)
    outputs = {"persons": microdata(dict(zip(CELLS, truth)))}
    spec = spec_with('count persons\n}\npublic {\n  count persons by area released "an earlier census"')
    model = build_model(spec, parse_target("count persons by area, kind", spec), [lk], outputs)
    assert list(model.totals) == [10, 10] and model.group_query.columns == ("area",)
    crossed = spec_with('count persons by area\n}\npublic {\n  count persons by kind released "a survey"')
    with pytest.raises(InferError, match="not nested"):
        build_model(crossed, parse_target("count persons by area, kind", crossed), [lk], outputs)


def test_contractions_are_counted_on_a_hand_made_case():
    post = np.array([0, 0, 5, 10, 0, 7])
    lower = np.array([0, 0, 3, 4, 0, 7])
    upper = np.array([3, 0, 8, 10, 6, 7])
    found = summary.contractions(post, lower, upper, 0, np.array([10, 10, 10, 10, 12, 7]))
    assert list(found["zeros"]) == [0, 4]  # cell 1: the posterior agrees that 0 is all there is
    assert list(found["bounds"]) == [3]  # cell 5 sits at its bound, but nothing else is plausible
    rates = summary.contractions(np.array([0.0, 1.0, 0.5]), np.array([0.0, 0.7, 0.2]), np.array([0.2, 1.0, 0.9]), 0, 1)
    assert list(rates["zeros"]) == [0] and list(rates["bounds"]) == [1]


def test_weighted_quantiles_match_numpy_for_uniform_weights():
    x = np.arange(100).reshape(-1, 1)
    q = summary.weighted_quantiles(x, np.full(100, 0.01), [0.05, 0.5, 0.95])
    assert list(q[:, 0]) == [4, 49, 94]


# ---- end to end on the bundled example, and bad input -----------------------------------------


def compile_to(spec: str, out, seed: int) -> None:
    from dpspec.publish.output import write_result

    write_result(dpspec.compile(spec, seed=seed), str(out))


@pytest.fixture(scope="module")
def hispanic_release(tmp_path_factory):
    out = tmp_path_factory.mktemp("hisp")
    spec = os.path.join(SPECS, "acs_ma_hispanic_topdown.dps")
    compile_to(spec, out, 5)
    return spec, out


def test_infer_on_the_bundled_topdown_release(hispanic_release, tmp_path):
    spec, release = hispanic_release
    res = CliRunner().invoke(
        main,
        [
            "infer",
            spec,
            str(release),
            "--target",
            "count persons by PUMA, HISP",
            "--draws",
            "500",
            "--seed",
            "1",
            "--json",
            "-o",
            str(tmp_path),
        ],
    )
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert data["method"] == "importance" and data["method_requested"] == "rejection"
    assert data["log10_acceptance_rate_estimate"] < -100 and "too large for exact rejection" in data["notes"][0]
    assert data["effective_sample_size"] > 200  # of 10,000 proposals (about 900 with this release)
    assert len(data["cells"]) == 25
    truth = pd.read_csv(os.path.join(SPECS, "data/acs/ma2019.csv"), dtype=str).groupby(["PUMA", "HISP"]).size()
    inside = [c["q025"] <= truth.get((c["PUMA"], c["HISP"]), 0) <= c["q975"] for c in data["cells"]]
    assert sum(inside) >= 21  # 95% intervals: at most a few of 25 may miss
    # contractions are exactly the cells published as 0 whose 95% interval reaches above 0
    zeros = [c["cell"] for c in data["cells"] if c["post_processed"] == 0 and c["q975"] > 0]
    assert data["contractions"]["zeros"] == zeros
    html = (tmp_path / "report.html").read_text()
    assert "Content-Security-Policy" in html and "<svg" in html and "<script" not in html
    assert (tmp_path / "draws.csv").exists() and (tmp_path / "report.md").exists()


@pytest.mark.slow  # rejection sampling of a rate target
def test_rate_target_and_randomized_response_rejection(tmp_path):
    spec = os.path.join(SPECS, "acs_ma_vision_rr.dps")
    compile_to(spec, tmp_path, 3)
    r = dpspec.infer(spec, str(tmp_path), "count persons by DEYE", draws=500, seed=2)
    assert r.method == "rejection" and 0 < r.draws.acceptance < 1
    assert np.all(r.samples.sum(axis=1) == 7634)
    truth = int((pd.read_csv(os.path.join(SPECS, "data/acs/ma2019.csv"), dtype=str)["DEYE"] == "1").sum())
    assert r.cells[0]["q025"] <= truth <= r.cells[0]["q975"]
    # a likelihood that is not Gaussian: importance sampling agrees with exact rejection
    imp = dpspec.infer(spec, str(tmp_path), "count persons by DEYE", draws=500, seed=3, method="importance")
    sd = r.samples[:, 0].std()
    assert abs(imp.cells[0]["mean"] - r.cells[0]["mean"]) < 4 * sd * math.sqrt(1 / 500 + 1 / imp.draws.ess)
    rates = dpspec.infer(spec, str(tmp_path), "count persons by DEYE", draws=300, seed=2, rate=True)
    assert all(0 <= c["q025"] <= c["q975"] <= 1 for c in rates.cells)
    with pytest.raises(InferError, match="does not inform"):
        dpspec.infer(spec, str(tmp_path), "count persons by PUMA", seed=1)


def test_bad_input_is_a_message_not_a_traceback(hispanic_release, tmp_path):
    spec, release = hispanic_release
    run = lambda *a: CliRunner().invoke(main, ["infer", spec, str(release), *a])  # noqa: E731
    cases = {
        ("--target", "count persons by PUMAA"): "did you mean 'PUMA'",
        ("--target", "persons by PUMA"): "expected a count query",
        ("--target", "count persons", "--prior", "dirichlet-multinomial:-1"): "positive number",
        ("--target", "count persons", "--prior", "nonexistent.csv"): "neither",
    }
    for args, message in cases.items():
        res = run(*args)
        assert res.exit_code == 1 and message in res.output and "Traceback" not in res.output, (args, res.output)
    prior = tmp_path / "prior.csv"
    prior.write_text(
        "PUMA,HISP,alpha\n"
        + "".join(f"{p},{h},0\n" for p in ["25-00503", "25-00703", "25-01000", "25-01300", "25-02800"] for h in "01234")
    )
    res = run("--target", "count persons by PUMA, HISP", "--prior", str(prior))
    assert res.exit_code == 1 and "contradicts the public information" in res.output
    other = CliRunner().invoke(
        main, ["infer", os.path.join(SPECS, "acs_ma_vision_rr.dps"), str(release), "--target", "count persons by DEYE"]
    )
    assert other.exit_code == 1 and "different" in other.output
    assert CliRunner().invoke(main, ["infer", spec, str(tmp_path), "--target", "count persons"]).exit_code == 1


def test_a_mechanism_without_a_likelihood_is_refused(tmp_path):
    spec = load_text_or_path(os.path.join(SPECS, "ma1940_swap.dps"))
    from dpspec.run.compiler import spec_sha256

    (tmp_path / "manifest.json").write_text(json.dumps({"outputs": {}, "spec": {"sha256": spec_sha256(spec)}}))
    with pytest.raises(InferError, match="does not state the likelihood"):
        dpspec.infer(spec, str(tmp_path), "count households by county", seed=1)
