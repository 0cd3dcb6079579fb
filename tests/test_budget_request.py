"""convert_request: the dictionary behind `dpspec convert` and `dpspec.convert(...)`."""

import json
from fractions import Fraction

import pytest

from dpspec.budget import convert_request
from dpspec.errors import ConversionError


def test_rho_to_approx_bs16():
    out = convert_request({"rho": 15.29}, to="approx", delta=1e-10, method="bs16")
    assert set(out) == {"epsilon", "delta", "premetric", "method", "citation"}
    assert round(out["epsilon"], 2) == 52.82 and out["delta"] == 1e-10
    assert out["premetric"] == "approx" and out["method"] == "bs16"
    json.dumps(out, allow_nan=False)


def test_rho_to_approx_default_cks20():
    out = convert_request({"rho": 15.29}, delta=1e-10)  # 'to' inferred from delta
    assert out["method"] == "cks20" and round(out["epsilon"], 2) == 51.56


def test_epsilon_to_zcdp():
    out = convert_request({"epsilon": 2}, to="zcdp")
    assert out["rho"] == 2 and out["premetric"] == "zcdp" and "Bun & Steinke" in out["citation"]


def test_unit_change():
    out = convert_request({"rho": 4.944}, from_unit="symdiff", to_unit="hamming")
    assert out["rho"] == pytest.approx(19.776, rel=1e-15)
    assert out["method"] == "symdiff-to-hamming"


def test_group():
    out = convert_request({"epsilon": 1}, group=4)
    assert out == {**out, "epsilon": 4.0, "premetric": "pure", "method": "group-4"}


def test_chain_names_every_step():
    out = convert_request(
        {"rho": Fraction(1, 2)}, from_unit="add-remove", to_unit="change-one", to="approx", delta=1e-10, method="bs16"
    )
    assert out["method"] == "symdiff-to-hamming then bs16"
    assert out["epsilon"] == pytest.approx(2 + 2 * (2 * 23.025850929940457) ** 0.5, rel=1e-12)
    out = convert_request({"epsilon": 1}, to="approx", delta=1e-10, method="bs16")
    assert out["method"] == "pure-approx" and out["epsilon"] == 1 and out["delta"] == 0


def test_no_conversion_is_identity():
    assert convert_request({"mu": 1}) == {"mu": 1.0, "premetric": "gdp", "method": "identity", "citation": ""}


def test_errors():
    with pytest.raises(ConversionError):
        convert_request({"epsilon": 1, "delta": 1e-6}, to="pure")
    with pytest.raises(ConversionError):
        convert_request({"rho": 1}, from_unit="symdiff")
    with pytest.raises(ConversionError):
        convert_request({"rho": 1}, from_unit="hamming", to_unit="symdiff")
