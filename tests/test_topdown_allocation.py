"""Budget allocation: exact shares, per-query rho and variance, the production figure."""

from fractions import Fraction

import pytest

from dpspec.errors import SpecError
from dpspec_topdown.measurement.allocation import allocate, check_shares, query_name

PROD_SHARES = {
    "nation": Fraction(104, 4099),
    "state": Fraction(1440, 4099),
    "county": Fraction(447, 4099),
    "tract": Fraction(687, 4099),
    "blockgroup": Fraction(1256, 4099),
    "block": Fraction(165, 4099),
}
PROD_RHO = Fraction(542, 339) ** 2


def _strategy(levels, queries=(((), Fraction(1, 4)), (("hhgq",), Fraction(3, 4)))):
    return {lv: list(queries) for lv in levels}


def test_production_pl94_person_allocation():
    alloc = allocate(PROD_RHO, PROD_SHARES, _strategy(PROD_SHARES), "hamming")
    assert alloc.total_rho == PROD_RHO
    assert round(float(alloc.total_rho), 3) == 2.556
    assert f"{float(alloc.total_rho):.3g}" == "2.56"
    # the noise really costs no more than declared (sigma² may only be rounded up)
    assert alloc.rho_spent <= alloc.total_rho
    assert float(alloc.total_rho - alloc.rho_spent) < 1e-6
    state_rho = sum(q.rho for q in alloc.for_level("state"))
    assert state_rho == PROD_RHO * Fraction(1440, 4099)


def test_sigma2_is_s2_over_two_rho_q():
    strategy = _strategy(["a"], [((), Fraction(1, 2)), (("x",), Fraction(1, 2))])
    ham = allocate(Fraction(1), {"a": 1}, strategy, "hamming")
    sym = allocate(Fraction(1), {"a": 1}, strategy, "symdiff")
    for qh, qs in zip(ham.queries, sym.queries):
        assert qh.rho == qs.rho == Fraction(1, 2)
        assert qs.sigma2 == Fraction(1, 2 * qs.rho) == 1  # s² = 1 under add/remove one person
        assert qh.sigma2 == 2 * qs.sigma2  # s² = 2 under change one person
        assert qh.rho_spent == qh.rho


def test_level_shares_must_sum_to_one():
    bad = dict(PROD_SHARES, block=Fraction(166, 4099))
    with pytest.raises(SpecError) as err:
        allocate(PROD_RHO, bad, _strategy(bad), "hamming")
    msg = str(err.value)
    assert "sum to 4100/4099" in msg and "block=166/4099" in msg and "level budget shares" in msg


def test_query_shares_must_sum_to_one():
    strategy = _strategy(["a"], [((), Fraction(1, 3)), (("x",), Fraction(1, 3))])
    with pytest.raises(SpecError) as err:
        allocate(Fraction(1), {"a": 1}, strategy, "symdiff")
    assert "'a'" in str(err.value) and "total=1/3" in str(err.value) and "x=1/3" in str(err.value)
    assert "2/3" in str(err.value)


def test_decimal_strings_and_floats_are_read_exactly():
    shares = check_shares({"a": "0.1", "b": 0.2, "c": Fraction(7, 10)}, "test")
    assert sum(shares.values()) == 1


def test_nonpositive_share_and_unknown_relation_and_level_mismatch():
    with pytest.raises(SpecError, match="positive"):
        check_shares({"a": 0, "b": 1}, "test")
    with pytest.raises(SpecError, match="relation"):
        allocate(Fraction(1), {"a": 1}, _strategy(["a"]), "bounded")
    with pytest.raises(SpecError, match="same levels"):
        allocate(Fraction(1), {"a": 1}, _strategy(["a", "b"]), "hamming")
    with pytest.raises(SpecError, match="positive"):
        allocate(Fraction(0), {"a": 1}, _strategy(["a"]), "hamming")


def test_query_names():
    assert query_name(()) == "total"
    assert query_name(("votingage", "hispanic")) == "votingage * hispanic"
