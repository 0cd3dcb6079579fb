"""Swapping's whole budget curve (issue 28): its minimum over the rate and the inverse map.

Theorem II.1 falls with p up to the point where ln(o) = ln(b+1)/2 and rises after it; every
epsilon above that minimum is attained at exactly two rates. Each is checked by mapping back
through the theorem itself (`psa_epsilon`), never against a copy of the formula.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from click.testing import CliRunner

from dpspec.api import MechanismError
from dpspec.cli.main import main
from dpspec_swap.theorem import minimum_epsilon, psa_epsilon, rates_for_epsilon

B_1940 = 264_331


def run(*args):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def test_the_1940_minimum_is_about_6_24():
    least, at = minimum_epsilon(B_1940)
    assert round(least, 2) == 6.24
    assert psa_epsilon(B_1940, at) == pytest.approx(least, rel=1e-9)
    assert float(at) == pytest.approx(math.sqrt(B_1940 + 1) / (1 + math.sqrt(B_1940 + 1)))


@pytest.mark.parametrize("b", [1, 2, 7, 1000, B_1940, 13_700_000])
def test_no_rate_on_a_fine_grid_beats_the_minimum(b):
    least, at = minimum_epsilon(b)
    at = float(at)
    grid = np.concatenate([np.linspace(1e-4, 1 - 1e-4, 2001), [at * (1 - 1e-6), at * (1 + 1e-7)]])
    values = [psa_epsilon(b, float(p)) for p in grid if 0 < p < 1]
    assert min(values) >= least - 1e-9
    assert min(values) == pytest.approx(least, abs=1e-3)  # and the grid comes close to it


@pytest.mark.parametrize("b", [1, 40, B_1940])
@pytest.mark.parametrize("above", [0.0, 1e-6, 0.5, 3.0, 9.0, 20.0])
def test_both_rates_map_back_to_the_epsilon_asked(b, above):
    least, at = minimum_epsilon(b)
    target = least + above
    low, high = rates_for_epsilon(b, target)
    assert 0 < low <= at <= high < 1
    assert psa_epsilon(b, low) == pytest.approx(target, rel=1e-12)
    assert psa_epsilon(b, high) == pytest.approx(target, rel=1e-12)
    if above == 0:
        assert low == pytest.approx(high)


def test_the_lower_rate_is_on_the_p_below_half_branch_for_large_epsilon():
    low, high = rates_for_epsilon(B_1940, 15.4294)
    assert float(low) == pytest.approx(0.05, rel=1e-4)  # the seed's worked example, inverted
    assert high > 0.5


def test_below_the_minimum_and_b_zero_are_refused():
    with pytest.raises(MechanismError, match="smallest attainable"):
        rates_for_epsilon(B_1940, 6.0)
    with pytest.raises(MechanismError, match="every rate gives epsilon = 0"):
        rates_for_epsilon(0, 1.0)
    assert minimum_epsilon(0) == (0.0, None)


def test_cli_prints_minimum_and_both_rates():
    res = run("swap", "epsilon", "--b", str(B_1940), "--epsilon", "10")
    assert res.exit_code == 0, res.output
    assert "smallest epsilon over all rates: ln(b+1)/2 = 6.2425" in res.output
    assert "epsilon 10 is given by two rates: 0.923081 and 0.999955" in res.output
    out = json.loads(run("swap", "epsilon", "--b", str(B_1940), "--epsilon", "10", "--rate", "0.05", "--json").output)
    assert set(out) == {"format_version", "b", "epsilon", "rates", "minimum_epsilon", "minimum_rate", "rows"}
    from tests.test_swap_cli import assert_valid

    assert_valid("epsilon", out)
    assert [psa_epsilon(B_1940, r) for r in out["rates"]] == pytest.approx([10, 10], rel=1e-9)
    assert round(out["rows"][0]["epsilon"], 2) == 15.43


def test_cli_refuses_an_epsilon_below_the_minimum():
    res = CliRunner().invoke(main, ["swap", "epsilon", "--b", str(B_1940), "--epsilon", "5"])
    assert res.exit_code == 1
    assert "smallest attainable is ln(b+1)/2 = 6.24248" in res.output
    res = CliRunner().invoke(main, ["swap", "epsilon", "--b", "10"])
    assert res.exit_code == 2
