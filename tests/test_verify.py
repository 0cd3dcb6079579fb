"""`dpspec verify`: lower bounds that are valid, honest claims consistent, broken ones refuted."""

from __future__ import annotations

from tests.conftest import beside

import json
import math
import os
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner
from dpspec_rr import RandomizedResponse
from dpspec_swap.plugin import PermutationSwapping

import dpspec
from dpspec.cli.main import main
from dpspec.contract.mechanism import Mechanism, NativeFlavor, NeighbourPair, ParameterSchema, ParamSpec, Release
from dpspec.run.noise import discrete_gaussian
from dpspec.verify import verify
from dpspec.verify.bounds import cp_lower, cp_upper, largest_detectable, loss_bound, runs_needed
from tests.conftest import SMALL_CSV, SMALL_SPEC, SPECS
from tests.key_files import keys_from
from tests.verify_helpers import registered, third_party_module, write_spec


# ---- deliberately broken mechanisms ---------------------------------------------------------


class TruthierRR(RandomizedResponse):
    """Claims p = the spec's p, but tells the truth with probability 7/8."""

    name = "rr_truthier"

    def run(self, spec, params, data, rng):
        return super().run(spec, {**params, "p": Fraction(7, 8)}, data, rng)


class GaussianCount(Mechanism):
    """A table's row count plus discrete Gaussian noise: rho-zCDP with sigma² = 1/(2 rho) under
    add/remove one unit (sensitivity 1)."""

    name = "gaussian_count"
    parameters = ParameterSchema(
        (
            ParamSpec("table", "table", "the counted table", required=True),
            ParamSpec("rho", "number", "the zCDP budget", required=True, low=Fraction(1, 1000), high=Fraction(100)),
        )
    )
    outputs = {"count": "the noisy count"}

    def sigma2(self, params):
        return 1 / (2 * params["rho"])

    def flavor(self, spec, params):
        return NativeFlavor(params["table"], "symdiff", "zcdp")

    def budget(self, spec, params, facts):
        from dpspec.budget import BudgetStatement, ZCDP

        return BudgetStatement.fixed(ZCDP(float(params["rho"])))

    def noisy(self, count, n, params, rng):
        return count + discrete_gaussian(self.sigma2(params), n, rng)

    def run(self, spec, params, data, rng):
        value = int(self.noisy(len(data[params["table"]]), 1, params, rng)[0])
        return Release(outputs={"count": pd.DataFrame({"count": [value]})})

    def neighbours(self, spec, params):
        from dpspec.verify.miniature import generic_pairs

        pair = generic_pairs(spec)[0]

        def batch(data, n, rng):
            return self.noisy(len(data[params["table"]]), n, params, rng)

        return [NeighbourPair(pair.label, pair.left, pair.right, batch=batch)]


class HalfVarianceGaussian(GaussianCount):
    """Claims rho, but adds discrete Gaussian noise of half the variance that rho needs."""

    name = "gaussian_count_half"

    def sigma2(self, params):
        return 1 / (4 * params["rho"])


class FailingMechanism(RandomizedResponse):
    name = "rr_failing"

    def run(self, spec, params, data, rng):
        raise KeyError("no such column in the miniature data")

    def neighbours(self, spec, params):
        return None  # the generic path runs `run`, which fails


def _rr_spec(tmp_path, mechanism="randomized_response", p="3/4"):
    text = SMALL_SPEC.replace("mechanism randomized_response", f"mechanism {mechanism}").replace("p: 3/4", f"p: {p}")
    return write_spec(tmp_path, text.replace("budget epsilon <= 1.1\n", ""), SMALL_CSV)


def _count_spec(tmp_path, mechanism, budget_line, premetric="pure"):
    text = (
        SMALL_SPEC.replace("premetric pure", f"premetric {premetric}")
        .replace("mechanism randomized_response { table: people  column: smoker  p: 3/4 }", mechanism)
        .replace("unit people : hamming", "unit people : symdiff")
        .replace("  count people\n", "")
        .replace("budget epsilon <= 1.1", budget_line)
        .replace("output responses\n  output estimate", "output count")
    )
    return write_spec(tmp_path, text, SMALL_CSV)


# ---- the bounds ----------------------------------------------------------------------------


def test_clopper_pearson_bounds_are_exact_at_the_edges():
    assert cp_lower(0, 10, 0.05) == 0.0 and cp_upper(10, 10, 0.05) == 1.0
    assert math.isclose(float(cp_lower(10, 10, 0.05)), 0.05 ** (1 / 10))
    assert math.isclose(float(cp_upper(0, 10, 0.05)), 1 - 0.05 ** (1 / 10))
    assert float(cp_lower(30, 100, 0.025)) < 0.3 < float(cp_upper(30, 100, 0.025))


def test_bounds_recover_known_losses_from_exact_probabilities():
    from scipy.stats import norm

    assert math.isclose(float(loss_bound("pure", 0.75, 0.25)), math.log(3))
    assert math.isclose(float(loss_bound("approx", 0.75, 0.25, delta=0.05)), math.log(0.7 / 0.25))
    mu, t = 1.5, 0.4  # Gaussian shift mu: p = P(N(mu,1) >= t), q = P(N(0,1) >= t)
    assert math.isclose(float(loss_bound("gdp", norm.sf(t - mu), norm.sf(t))), mu)
    # A Gaussian with sigma = 1 and shift 1 is 1/2-zCDP: any event's bound stays below 1/2 ...
    for t in np.linspace(-2, 4, 25):
        assert float(loss_bound("zcdp", norm.sf(t - 1), norm.sf(t))) <= 0.5 + 1e-9
    # ... and tail events come close to it
    assert float(loss_bound("zcdp", norm.sf(5), norm.sf(6))) > 0.35
    assert float(loss_bound("pure", 0.2, 0.3)) == 0.0  # nothing shown: 0, not negative


def test_runs_needed_is_the_least_that_can_exceed_the_claim():
    n = runs_needed("pure", 3.0, 0.05)
    assert largest_detectable("pure", n, 0.05) > 3.0 >= largest_detectable("pure", n - 1, 0.05)


# ---- verdicts ------------------------------------------------------------------------------


def test_randomized_response_is_consistent_at_100000_runs(tmp_path):
    """Its speed is measured by benchmarks/bench_verify.py (100,000 runs per dataset), not asserted here."""
    spec = dpspec.load(_rr_spec(tmp_path))
    result = verify(spec, runs=100_000, seed=1)
    assert result.verdict == "consistent" and result.exit_code == 0
    assert result.path == "mechanism"
    assert math.isclose(result.claimed, math.log(3))
    # 100,000 runs pin the bound close below the true ln 3
    assert math.log(3) - 0.15 < result.lower_bound <= math.log(3)
    data = result.to_json()
    assert {"verdict", "claimed", "lower_bound", "confidence", "runs", "flavor"} <= set(data)
    assert data["flavor"]["premetric"] == "pure" and data["runs"] == 100_000
    assert any("Ding" in m for m in data["methods"]) and any("Clopper" in m for m in data["methods"])


def test_randomized_response_telling_the_truth_more_often_is_refuted(tmp_path):
    with registered(TruthierRR()):
        result = verify(dpspec.load(_rr_spec(tmp_path, "rr_truthier")), runs=20_000, seed=2)
    assert result.verdict == "refuted" and result.exit_code == 1
    assert math.log(3) < result.lower_bound <= math.log(7)


def test_discrete_gaussian_at_half_the_claimed_variance_is_refuted(tmp_path):
    mech = "mechanism {name} {{ table: people  rho: 1/2 }}"
    with registered(GaussianCount(), HalfVarianceGaussian()):
        honest = verify(
            dpspec.load(_count_spec(tmp_path, mech.format(name="gaussian_count"), "budget rho <= 1/2", "zcdp")),
            runs=40_000,
            seed=3,
        )
        broken = verify(
            dpspec.load(_count_spec(tmp_path, mech.format(name="gaussian_count_half"), "budget rho <= 1/2", "zcdp")),
            runs=40_000,
            seed=3,
        )
    assert honest.verdict == "consistent" and honest.flavor["premetric"] == "zcdp"
    assert honest.lower_bound <= 0.5
    assert broken.verdict == "refuted" and 0.5 < broken.lower_bound <= 1.0


@pytest.mark.parametrize(
    "premetric, words",
    [
        ("approximate delta 1e-6", "epsilon at delta = 1e-06"),
        ("renyi alpha 2", "epsilon at alpha = 2"),
        ("zcdp", "rho"),
    ],
)
def test_claims_are_tested_in_the_spec_s_own_currency(tmp_path, premetric, words):
    text = open(_rr_spec(tmp_path), encoding="utf-8").read().replace("premetric pure", f"premetric {premetric}")
    honest = verify(dpspec.load(write_spec(tmp_path, text)), runs=40_000, seed=9)
    assert honest.verdict == "consistent", honest.text()
    assert f"the {words} is at least" in honest.summary()
    with registered(TruthierRR()):
        broken = verify(
            dpspec.load(write_spec(tmp_path, text.replace("mechanism randomized_response", "mechanism rr_truthier"))),
            runs=40_000,
            seed=9,
        )
    assert broken.verdict == "refuted", broken.text()
    assert broken.flavor["premetric"] == {"approximate delta 1e-6": "approx", "renyi alpha 2": "renyi"}.get(
        premetric, premetric
    )


def test_too_few_runs_is_inconclusive_and_says_how_many(tmp_path):
    result = verify(dpspec.load(_rr_spec(tmp_path)), runs=10, seed=4)
    assert result.verdict == "inconclusive" and result.exit_code == 4
    assert result.runs_needed is not None and result.runs_needed > 10
    assert f"{result.runs_needed:,}" in result.summary()
    again = verify(dpspec.load(_rr_spec(tmp_path)), runs=result.runs_needed, seed=4)
    assert again.verdict != "inconclusive"


@pytest.mark.slow  # verifies a test plugin over many runs
def test_third_party_plugin_is_verified_through_the_generic_path(tmp_path):
    module = third_party_module()
    mech = module.GeometricCount()
    with registered(mech):
        path = _count_spec(
            tmp_path, "mechanism geometric_count { table: people  epsilon: 1/2 }", "budget epsilon <= 0.5"
        )
        result = verify(dpspec.load(path), runs=1500, seed=5)
        assert result.path == "generic" and result.verdict == "consistent", result.text()
        assert result.lower_bound <= 0.5

        class Understated(module.GeometricCount):
            name = "geometric_understated"

            def budget(self, spec, params, facts):  # claims a tenth of what its noise gives
                from dpspec.budget import BudgetStatement, PureDP

                return BudgetStatement.fixed(PureDP(float(params["epsilon"]) / 10))

    with registered(Understated()):
        path = _count_spec(tmp_path, "mechanism geometric_understated { table: people  epsilon: 2 }", "")
        result = verify(dpspec.load(path), runs=1500, seed=5)
    assert result.path == "generic" and result.verdict == "refuted", result.text()
    assert 0.2 < result.lower_bound <= 2.0


@pytest.mark.slow  # seeded repetitions of a verification
def test_lower_bound_is_valid_over_seeded_repetitions(tmp_path):
    """Randomized response with p = 3/4 has epsilon exactly ln 3, attained by the event the
    verifier finds; the 90% lower bound may exceed it in at most about 10% of repetitions."""
    spec = dpspec.load(_rr_spec(tmp_path))
    reps = 80
    bounds = [verify(spec, runs=3000, seed=1000 + i, confidence=0.9).lower_bound for i in range(reps)]
    above = sum(b > math.log(3) for b in bounds)
    # expected at most 8; 16 is beyond the 99.8% quantile of Binomial(80, 0.1)
    assert above <= 16, above
    assert np.mean(bounds) > 0.8 * math.log(3)  # and the bound is informative, not trivially valid


# ---- bad input -----------------------------------------------------------------------------


def test_cli_exit_codes_and_json(tmp_path):
    path = _rr_spec(tmp_path)
    ok = CliRunner().invoke(main, ["verify", path, "--runs", "20000", "--seed", "1", "--json"])
    assert ok.exit_code == 0, ok.output
    data = json.loads(ok.stdout)
    assert data["verdict"] == "consistent" and data["confidence"] == 0.95 and data["runs"] == 20000
    few = CliRunner().invoke(main, ["verify", path, "--runs", "10", "--seed", "1"])
    assert few.exit_code == 4 and "inconclusive" in few.output
    with registered(TruthierRR()):
        bad = CliRunner().invoke(main, ["verify", _rr_spec(tmp_path, "rr_truthier"), "--runs", "20000", "--seed", "1"])
    assert bad.exit_code == 1 and bad.output.startswith("refuted")


@pytest.mark.parametrize(
    "case, words",
    [
        ("no-mechanism", "names no mechanism"),
        ("infinite", "infinite claim"),
    ],
)
def test_bad_input_is_a_message_not_a_traceback(tmp_path, case, words):
    if case == "no-mechanism":
        text = SMALL_SPEC.replace("mechanism randomized_response { table: people  column: smoker  p: 3/4 }\n", "")
        text = text.replace("budget epsilon <= 1.1\n", "").replace("  output responses\n  output estimate\n", "")
        path = write_spec(tmp_path, text, SMALL_CSV)
    else:
        path = _rr_spec(tmp_path, p="1")
    out = CliRunner().invoke(main, ["verify", path, "--runs", "50"])
    assert out.exit_code == 1, out.output
    assert words in out.output and "Traceback" not in out.output
    assert "internal error" not in out.output


def test_a_plugin_crashing_on_miniature_data_is_an_internal_error_naming_it(tmp_path):
    """A KeyError in a mechanism's own code is a bug (exit 3, as everywhere), not the spec's fault."""
    path = _rr_spec(tmp_path, "rr_failing")
    with registered(FailingMechanism()):
        out = CliRunner().invoke(main, ["verify", path, "--runs", "50"])
    assert out.exit_code == 3, out.output
    assert "internal error" in out.output and "failed on miniature data" in out.output
    assert "KeyError" in out.output and "rr_failing" in out.output and "Traceback" not in out.output


def test_a_refuted_claim_is_a_critical_audit_finding(tmp_path):
    path = _rr_spec(tmp_path, "rr_truthier")
    with registered(TruthierRR()):
        made = CliRunner().invoke(main, ["verify", path, "--runs", "20000", "--seed", "1", "--json"])
        (tmp_path / "v.json").write_text(made.stdout)
        audited = CliRunner().invoke(main, ["audit", path, "--verify", str(tmp_path / "v.json"), "--json"])
    assert audited.exit_code == 1, audited.output
    findings = json.loads(audited.stdout)["findings"]
    top = findings[0]
    assert top["rule"] == "empirical-verification" and top["severity"] == "critical"
    assert "95%" in top["message"] and "20,000 runs" in top["message"]
    assert top["evidence"]["verdict"] == "refuted"


def test_compile_shows_the_verification_and_rejects_a_result_for_another_spec(tmp_path):
    path = _rr_spec(tmp_path)
    made = CliRunner().invoke(main, ["verify", path, "--runs", "4000", "--seed", "1", "--json"])
    (tmp_path / "v.json").write_text(made.stdout)
    out = CliRunner().invoke(main, ["compile", path, "-o", str(beside(tmp_path)), "--verify", str(tmp_path / "v.json")])
    assert out.exit_code == 0, out.output
    assert "[info] empirical-verification: the claimed budget passed an empirical test: consistent" in out.output
    report = (beside(tmp_path) / "report.html").read_text()
    assert "empirical-verification" in report and "4,000 runs per dataset" in report
    assert "does not prove the claim" in report
    other = _rr_spec(tmp_path, p="2/3")
    wrong = CliRunner().invoke(main, ["audit", other, "--verify", str(tmp_path / "v.json")])
    assert wrong.exit_code == 1 and "made for another spec" in wrong.output


# ---- the built-in mechanisms -----------------------------------------------------------------


class SwapLeavingPairsInPlace(PermutationSwapping):
    """Swapping whose 'derangement' leaves both records of a selected pair as fixed points."""

    name = "swap_fixed_points"

    def run(self, spec, params, data, rng):
        from dpspec_swap import algorithm

        honest = algorithm.uniform_derangements

        def leaky(sizes, rng):
            perm = honest(sizes, rng)
            sizes = np.asarray(sizes, dtype=np.int64)
            pairs = (np.cumsum(sizes) - sizes)[sizes == 2]
            perm[pairs], perm[pairs + 1] = pairs, pairs + 1
            return perm

        algorithm.uniform_derangements = leaky
        try:
            return super().run(spec, params, data, rng)
        finally:
            algorithm.uniform_derangements = honest


def _bundled(name, tmp_path=None, mechanism=None):
    path = os.path.join(SPECS, name)
    if mechanism is None:
        return dpspec.load(path)
    text = keys_from(open(path, encoding="utf-8").read(), SPECS).replace(
        "mechanism swap {", f"mechanism {mechanism} {{"
    )
    return dpspec.load(write_spec(tmp_path, text))


def test_swapping_is_consistent_on_a_two_record_stratum():
    result = verify(_bundled("ma1940_swap.dps"), runs=50_000, seed=6)
    assert result.verdict == "consistent" and result.path == "mechanism", result.text()
    (pair,) = result.pairs
    assert pair.distance == 2
    # the theorem's eps_D for b = 2 at p = 0.05, doubled for the distance-2 pair
    assert math.isclose(result.claimed, 2 * (math.log(3) - math.log(0.05 / 0.95)))
    assert 0 < result.lower_bound <= 2 * math.log(0.95 / 0.05)  # the pair's true loss: (1-s)/s = 1/o²


def test_swapping_that_leaves_fixed_points_is_refuted(tmp_path):
    with registered(SwapLeavingPairsInPlace()):
        result = verify(_bundled("ma1940_swap.dps", tmp_path, "swap_fixed_points"), runs=50_000, seed=7)
    assert result.verdict == "refuted", result.text()
    assert result.lower_bound > result.claimed


def test_topdown_is_consistent_on_a_miniature_geography():
    result = verify(_bundled("acs_national_topdown.dps"), runs=4_000, seed=8)
    assert result.verdict == "consistent" and result.path == "mechanism", result.text()
    assert result.flavor["premetric"] == "zcdp" and result.claimed == 2.0
    assert 0 < result.lower_bound <= 2.0


@pytest.mark.slow  # verifies TopDown over many runs
def test_topdown_measuring_at_half_the_variance_is_refuted(tmp_path):
    """TopDown's pair draws its noisy measurements from the mechanism's allocation; an
    allocation whose discrete Gaussian variances are half what the claimed rho needs doubles
    the pair's loss, and 100,000 runs show it above the claim (the honest allocation: below)."""
    import attrs
    from dpspec_topdown.plugin import TopDown

    class HalfVarianceTopDown(TopDown):
        name = "topdown_half"

        def _allocation(self, spec, params):
            alloc = super()._allocation(spec, params)
            return attrs.evolve(alloc, queries=tuple(attrs.evolve(q, sigma2=q.sigma2 / 2) for q in alloc.queries))

    text = open(os.path.join(SPECS, "acs_national_topdown.dps"), encoding="utf-8").read()
    text = text.replace('"data/', f'"{SPECS}/data/').replace("mechanism topdown {", "mechanism topdown_half {")
    with registered(HalfVarianceTopDown()):
        broken = verify(dpspec.load(write_spec(tmp_path, text)), runs=100_000, seed=8)
    honest = verify(_bundled("acs_national_topdown.dps"), runs=40_000, seed=8)
    assert honest.verdict == "consistent" and honest.lower_bound <= 2.0, honest.text()
    assert broken.verdict == "refuted" and broken.claimed == 2.0 and 2.0 < broken.lower_bound <= 4.0, broken.text()


@pytest.mark.slow  # seeded repetitions of a verification
@pytest.mark.parametrize("kind", ["gdp", "zcdp"])
def test_gaussian_lower_bounds_are_valid_over_seeded_repetitions(kind):
    """A Gaussian shift of mu is mu-GDP and mu²/2-zCDP exactly; the 90% lower bound from the
    event selection and test may exceed the truth in at most about 10% of repetitions."""
    from dpspec.verify.events import best_event

    mu, reps, n = 2.0, 100, 4000
    truth = mu if kind == "gdp" else mu * mu / 2
    rng = np.random.default_rng(11)
    bounds = []
    for _ in range(reps):
        left, right = rng.normal(mu, 1.0, n), rng.normal(0.0, 1.0, n)
        bounds.append(best_event(left[:, None], right[:, None], kind, 0.1).lower_bound)
    above = sum(b > truth for b in bounds)
    # expected at most 10; 20 is beyond the 99.8% quantile of Binomial(100, 0.1)
    assert above <= 20, above
    assert np.mean(bounds) > 0.5 * truth  # and the bound is informative, not trivially valid


def test_production_topdown_with_its_recode_is_verified():
    """The production strategy measures recode queries (hhinstlevels of hhgq): the neighbours
    count them from the recoded records (a KeyError before)."""
    spec = dpspec.load(os.path.join(SPECS, "pl94_production_topdown.dps"))
    result = verify(spec, runs=1000, seed=2)
    assert result.path == "mechanism" and result.verdict == "consistent", result.text()
    assert 0 < result.lower_bound < result.claimed


@pytest.mark.parametrize("key, value", [("relation", "symdiff"), ("unit", "households")])
def test_a_verification_result_whose_flavor_is_not_the_specs_is_refused(tmp_path, key, value):
    """`compile --verify` reads no release, only this file: its hash is its own word, so the flavor it
    tested must also be the spec's (a bound in another currency would be quoted as this spec's)."""
    path = _rr_spec(tmp_path)
    made = CliRunner().invoke(main, ["verify", path, "--runs", "4000", "--seed", "1", "--json"])
    data = json.loads(made.stdout)
    data["flavor"][key] = value
    (tmp_path / "v.json").write_text(json.dumps(data))
    out = CliRunner().invoke(main, ["compile", path, "-o", str(beside(tmp_path)), "--verify", str(tmp_path / "v.json")])
    assert out.exit_code == 1 and f"tests {key} '{value}'" in out.output and "internal error" not in out.output, (
        out.output
    )
    assert not beside(tmp_path).exists()
