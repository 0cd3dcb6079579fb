"""Unit changes (neighbor relation) and group privacy, on hand-worked examples."""

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpspec.budget import (
    ApproxDP,
    GaussianDP,
    PureDP,
    RenyiDP,
    ZCDP,
    change_relation,
    group,
    normalize_relation,
)
from dpspec.errors import ConversionError


def test_symdiff_to_hamming_hand_worked():
    # SafeTab-style per-iteration budget: rho 4.944 under add/remove is 19.776 under change-one.
    c = change_relation(ZCDP(4.944), "symdiff", "hamming")
    assert c.result.rho == pytest.approx(19.776, rel=1e-15)
    assert c.method == "symdiff-to-hamming" and "x 4" in c.note
    assert change_relation(PureDP(1.5), "add/remove", "change-one").result == PureDP(3.0)
    assert change_relation(GaussianDP(0.75), "symdiff", "hamming").result == GaussianDP(1.5)
    # (1, 1e-6) -> (2, (1 + e) 1e-6) = (2, 3.718281828...e-6)
    c = change_relation(ApproxDP(1, 1e-6), "symdiff", "hamming")
    assert c.result.epsilon == 2.0
    assert c.result.delta == pytest.approx(3.718281828459045e-6, rel=1e-12)
    assert change_relation(ApproxDP(1, 0), "symdiff", "hamming").result == ApproxDP(2, 0)


def test_same_relation_is_identity():
    c = change_relation(ZCDP(2.63), "hamming", "change-one")
    assert c.method == "identity" and c.result == ZCDP(2.63) and c.lossless


def test_hamming_to_symdiff_does_not_exist():
    with pytest.raises(ConversionError, match="does not exist") as info:
        change_relation(ZCDP(1), "hamming", "symdiff")
    assert "different sizes" in str(info.value)


def test_renyi_unit_change_refused():
    with pytest.raises(ConversionError, match="Rényi"):
        change_relation(RenyiDP(2, 1), "symdiff", "hamming")


def test_unknown_relation():
    with pytest.raises(ConversionError, match="unknown neighbor relation"):
        normalize_relation("edit-distance")


def test_group_hand_worked():
    assert group(PureDP(1), 4).result == PureDP(4)
    assert group(ZCDP(0.5), 3).result == ZCDP(4.5)
    assert group(GaussianDP(0.5), 5).result == GaussianDP(2.5)
    # (0.5, 1e-9) for households of at most 3: (1.5, 3 e^1 1e-9)
    c = group(ApproxDP(0.5, 1e-9), 3)
    assert c.result.epsilon == 1.5
    assert c.result.delta == pytest.approx(3 * math.e * 1e-9, rel=1e-12)
    assert c.method == "group-3"
    assert group(ZCDP(2), 1).method == "identity"
    assert group(ApproxDP(10, 0.5), 5).result.delta == 1.0  # capped: delta is a probability


@pytest.mark.parametrize("k", [0, -2, 2.5, "3", True])
def test_group_rejects_bad_sizes(k):
    with pytest.raises(ConversionError):
        group(PureDP(1), k)


def test_group_renyi_refused():
    with pytest.raises(ConversionError, match="higher orders"):
        group(RenyiDP(2, 1), 2)


def test_group_two_matches_change_relation_where_exact():
    for b in (PureDP(0.7), ZCDP(1.3), GaussianDP(0.4)):
        assert group(b, 2).result == change_relation(b, "symdiff", "hamming").result
    # for (eps, delta) the change-one rule (1 + e^eps) delta is tighter than 2 e^eps delta
    b = ApproxDP(1, 1e-8)
    assert change_relation(b, "symdiff", "hamming").result.delta < group(b, 2).result.delta


@settings(max_examples=50, deadline=None)
@given(st.floats(0.01, 5), st.floats(1e-12, 1e-3), st.integers(1, 8))
def test_group_monotone_in_k(eps, delta, k):
    a, b = group(ApproxDP(eps, delta), k).result, group(ApproxDP(eps, delta), k + 1).result
    assert a.epsilon < b.epsilon and a.delta <= b.delta
    assert group(ZCDP(eps), k + 1).result.rho > group(ZCDP(eps), k).result.rho
    assert group(ApproxDP(eps, delta), k).result.delta == pytest.approx(
        min(1.0, k * math.exp((k - 1) * eps) * delta), rel=1e-12
    )
