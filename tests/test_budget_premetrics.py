"""Premetric values: construction, validation, names, printing, parsing from parameters."""

import math
from fractions import Fraction

import pytest

from dpspec.budget import (
    ApproxDP,
    GaussianDP,
    InvalidBudget,
    PureDP,
    RenyiCurve,
    RenyiDP,
    ZCDP,
    budget_from_params,
    normalize_kind,
)
from dpspec.errors import ConversionError


def test_kinds_and_paper_names():
    cases = [
        (PureDP(1), "pure", "multiplicative distance (MULT)"),
        (ApproxDP(1, 1e-6), "approx", "delta-approximate multiplicative divergence"),
        (ZCDP(2.63), "zcdp", "normalized Rényi metric (zCDP)"),
        (RenyiDP(2, 0.5), "renyi", "Rényi divergence of order alpha"),
        (RenyiCurve([(2, 0.5), (4, 1.0)]), "renyi", "Rényi divergence of order alpha"),
        (GaussianDP(1.5), "gdp", "Gaussian differential privacy"),
    ]
    for budget, kind, name in cases:
        assert budget.kind == kind
        assert budget.paper_name == name


def test_params_and_str():
    assert ZCDP(2.63).params() == {"rho": 2.63}
    assert str(ZCDP(2.63)) == "rho = 2.63"
    assert ApproxDP(17.9, 1e-10).params() == {"epsilon": 17.9, "delta": 1e-10}
    assert str(ApproxDP(17.9, 1e-10)) == "(epsilon = 17.9, delta = 1e-10)"
    assert str(PureDP(15.4263)) == "epsilon = 15.43"
    assert str(GaussianDP(0.5)) == "mu = 0.5"
    assert str(RenyiDP(2, 1)) == "(alpha = 2, epsilon = 1)"
    assert str(PureDP(math.inf)) == "epsilon = inf"
    assert RenyiCurve([(4, 1.0), (2, 0.5)]).params() == {"alpha": [2.0, 4.0], "epsilon": [0.5, 1.0]}


def test_budgets_are_stored_exactly_and_a_float_is_read_as_the_binary_number_it_is():
    rho = Fraction(542, 339) ** 2
    z = ZCDP(rho)
    assert isinstance(z.rho, Fraction) and z.rho == rho
    assert z.to_json() == {"premetric": "zcdp", "rho": float(rho), "rho_exact": "293764/114921"}
    assert ApproxDP("1/2", "1e-10") == ApproxDP(Fraction(1, 2), Fraction(1, 10**10))
    assert ApproxDP(0.5, 1e-10).delta == Fraction(1e-10) != Fraction(1, 10**10)
    assert ZCDP(0.5).to_json() == {"premetric": "zcdp", "rho": 0.5}  # a float states it: no companion


def test_frozen_and_hashable():
    z = ZCDP(1)
    with pytest.raises(AttributeError):
        z.rho = 2
    assert len({ZCDP(1), ZCDP(1.0), ZCDP(Fraction(1))}) == 1


def test_is_finite():
    assert PureDP(1).is_finite
    assert not PureDP(math.inf).is_finite
    assert not ApproxDP(1, 1).is_finite  # delta = 1 promises nothing
    assert not ZCDP(math.inf).is_finite
    assert RenyiDP(math.inf, 1).is_finite  # order infinity is pure DP
    assert not GaussianDP(math.inf).is_finite


@pytest.mark.parametrize(
    "make",
    [
        lambda: PureDP(-1),
        lambda: ApproxDP(1, 1.5),
        lambda: ApproxDP(1, -1e-9),
        lambda: ZCDP(-0.1),
        lambda: RenyiDP(1, 1),
        lambda: RenyiDP(0.5, 1),
        lambda: GaussianDP(-1),
        lambda: PureDP(float("nan")),
        lambda: PureDP("abc"),
        lambda: PureDP(True),
        lambda: RenyiCurve([]),
    ],
)
def test_invalid_values_raise_user_errors(make):
    with pytest.raises(InvalidBudget) as info:
        make()
    assert isinstance(info.value, ConversionError)


def test_budget_from_params():
    assert budget_from_params({"rho": 15.29}) == ZCDP(15.29)
    assert budget_from_params({"epsilon": 2}) == PureDP(2)
    assert budget_from_params({"eps": 2}) == PureDP(2)
    assert budget_from_params({"epsilon": 17.9, "delta": 1e-10}) == ApproxDP(17.9, 1e-10)
    assert budget_from_params({"mu": 1}) == GaussianDP(1)
    assert budget_from_params({"alpha": 2, "epsilon": 0.5}) == RenyiDP(2, 0.5)
    assert budget_from_params({"alpha": [2, 8], "epsilon": [0.5, 3]}) == RenyiCurve([(2, 0.5), (8, 3)])
    assert budget_from_params({"premetric": "approx", "epsilon": 1}) == ApproxDP(1, 0)
    assert budget_from_params({"rho": Fraction(1, 3)}).rho == Fraction(1, 3)  # exact
    assert budget_from_params({"rho": 1, "delta": None}) == ZCDP(1)


@pytest.mark.parametrize(
    "params",
    [
        {},
        {"rho": 1, "mu": 2},
        {"delta": 1e-5},
        {"premetric": "zcdp", "epsilon": 1},
        {"alpha": [2, 3], "epsilon": [1]},
        {"premetric": "nonsense", "rho": 1},
    ],
)
def test_budget_from_params_rejects(params):
    with pytest.raises(ConversionError):
        budget_from_params(params)


def test_normalize_kind_aliases():
    assert normalize_kind("zCDP") == "zcdp"
    assert normalize_kind("RDP") == "renyi"
    assert normalize_kind("approximate") == "approx"
    with pytest.raises(ConversionError):
        normalize_kind("hockey-stick")
