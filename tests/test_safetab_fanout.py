"""SafeTab's budget statement names the fan-out it derives from the bundled code -> iteration
mapping (not a constant): k per iteration level and geography granularity, and the noise
variance k / (2 rho) of every measured (table, geography, iteration level, stage)."""

from __future__ import annotations

import math
from fractions import Fraction as F

import pytest

import dpspec
from dpspec.budget.budget_report import budget_summary
from dpspec.run.compiler import compile_spec
from dpspec.run.noise import discrete_gaussian_variance
from dpspec_safetab.design import sigma2
from tests.safetab_helpers import H_SPEC, P_SPEC
from tests.safetab_helpers import variant as _variant


def _fan_note(summary) -> str:
    return next(n for n in summary["native"]["notes"] if n.startswith("sensitivity"))


@pytest.mark.parametrize("spec", [P_SPEC, H_SPEC])
def test_production_fanout_is_read_from_the_mapping(spec):
    s = budget_summary(dpspec.load(str(spec)))
    assert "k = 9 at every iteration level and geography granularity" in _fan_note(s)
    assert "the declared max_groups, equal to the mapping's bound" in _fan_note(s)
    assert "h_r = 1 and h_e = 1" in _fan_note(s) and "r = 8, the most race codes of one record" in _fan_note(s)
    measured = [c for c in s["native"]["components"] if c["stage"] != "not measured"]
    assert measured and all(c["fanout"] == 9 for c in measured)
    for c in measured:  # the variance is k / (2 rho) of that stage's exact rho
        assert c["noise_variance"] == pytest.approx(float(F(9) / (2 * F(c["rho_exact"]))), rel=1e-8)
    assert all("fanout" not in c for c in s["native"]["components"] if c["stage"] == "not measured")


def test_fewer_race_codes_per_record_lower_the_fanout(tmp_path):
    """r = 4 instead of 8: production's bound h_r * max(2, r) + h_e falls from 9 to 5, and the
    noise variance of every stage with it (the budget rho itself is unchanged)."""
    path = _variant(tmp_path, "max_race_codes: 8\n  max_groups: 9", "max_race_codes: 4")  # k derived, not declared
    path.write_text(path.read_text().replace("QRACE5, QRACE6, QRACE7, QRACE8", "").replace("QRACE4, ", "QRACE4"))
    s = budget_summary(dpspec.load(str(path)))
    assert "k = 5 at every iteration level" in _fan_note(s) and "r = 4" in _fan_note(s)
    nation = next(
        c
        for c in s["native"]["components"]
        if c["geography"] == "nation" and c["stage"] == "stage 1" and c["iteration_level"] == 1
    )
    assert nation["fanout"] == 5 and nation["noise_variance"] == pytest.approx(5 / (2 * 0.0008))
    assert s["native"]["budget"]["rho"] == pytest.approx(4.944)


def test_a_declared_larger_fanout_is_used_and_said(tmp_path):
    path = _variant(tmp_path, "max_groups: 9", "max_groups: 12")
    s = budget_summary(dpspec.load(str(path)))
    assert "k = 12 at every iteration level" in _fan_note(s)
    assert "the declared max_groups, above the mapping's bound 9" in _fan_note(s)
    assert {c["fanout"] for c in s["native"]["components"] if "fanout" in c} == {12}


def test_a_declared_smaller_fanout_is_said_to_need_the_data_to_respect_it(tmp_path):
    s = budget_summary(dpspec.load(str(_variant(tmp_path, "max_groups: 9", "max_groups: 4"))))
    assert "k = 4 at every iteration level" in _fan_note(s)
    assert "below the mapping's bound 9" in _fan_note(s) and "a record in more groups is a data error" in _fan_note(s)


@pytest.mark.slow  # many SafeTab draws to estimate a variance
def test_a_doubled_fanout_doubles_the_realized_noise_variance(tmp_path):
    """End to end: declaring k = 18 instead of 9 must double every noise variance, measured on
    the released nation and state stage-2 counts (about 6,000 cells, 4 standard errors)."""
    spec = dpspec.load(str(_variant(tmp_path, "max_groups: 9", "max_groups: 18")))
    result = compile_spec(spec, seed=21, audit=False)
    errs = [
        e
        for e in result.release.internal["errors"]
        if e["geography"] in ("nation", "state") and e["level"] == 2 and e["role"] in ("total", "cell")
    ]
    n = sum(e["n"] for e in errs)
    mse = sum(e["sum_sq_error"] for e in errs) / n
    var18 = discrete_gaussian_variance(sigma2(18, F(2134, 1000) * F(9, 10)))
    assert n > 5000 and result.release.facts["fanout"]["level2 detailed"]["fanout_used"] == 18
    assert abs(mse - var18) < 4 * var18 * math.sqrt(2 / n)  # 4.69; k = 9 would give 2.34
