"""Composition of releases into a ledger, per-universe statements, public conditions."""

import json
import math

import pytest

from dpspec.budget import (
    ApproxDP,
    BudgetStatement,
    GaussianDP,
    PublicCondition,
    PureDP,
    LedgerRelease,
    RenyiCurve,
    RenyiDP,
    ZCDP,
    bs16_epsilon,
    cks20_epsilon,
    compose,
)
from dpspec.errors import ConversionError


def test_all_pure_sums():
    ledger = compose([LedgerRelease("a", PureDP(0.5)), LedgerRelease("b", PureDP(1.25))])
    assert ledger.total == PureDP(1.75) and ledger.premetric == "pure"
    assert all(e.conversion.method == "identity" for e in ledger.entries)


def test_pure_and_zcdp_compose_in_zcdp():
    # P.L. 94-171 style: persons 2.56 + units 0.07 = 2.63, plus a pure-eps release of 1
    ledger = compose(
        [LedgerRelease("persons", ZCDP(2.56)), LedgerRelease("units", ZCDP(0.07)), LedgerRelease("extra", PureDP(1))]
    )
    assert ledger.premetric == "zcdp"
    assert ledger.total.rho == pytest.approx(2.56 + 0.07 + 0.5, rel=1e-15)
    extra = ledger.entries[2]
    assert extra.original == PureDP(1) and extra.converted == ZCDP(0.5)
    assert extra.conversion.method == "pure-zcdp"


def test_zcdp_program_to_approx():
    ledger = compose(
        [LedgerRelease("pl94", ZCDP(2.63)), LedgerRelease("dhc", ZCDP(12.66))], to="approx", delta=1e-10, method="bs16"
    )
    assert ledger.premetric == "approx"
    assert round(float(ledger.total.epsilon), 2) == 52.82  # rho 15.29 (an exact certified bound, printed as a float)
    assert ledger.conversions[0].method == "bs16"
    assert "bs16" in ledger.method
    cks = compose([LedgerRelease("pl94", ZCDP(2.63)), LedgerRelease("dhc", ZCDP(12.66))], to="approx", delta=1e-10)
    assert round(float(cks.total.epsilon), 2) == 51.56


def test_mixed_with_approx_uses_basic_composition():
    releases = [
        LedgerRelease("tda", ZCDP(1.0)),
        LedgerRelease("pure", PureDP(1.0)),
        LedgerRelease("sparse", ApproxDP(0.5, 1e-11)),
    ]
    ledger = compose(releases, delta=1e-10, method="bs16")
    assert ledger.premetric == "approx"
    # concentrated subtotal rho = 1 + 0.5 converted with the remaining delta 9e-11
    expected = bs16_epsilon(1.5, 1e-10 - 1e-11) + 0.5
    assert ledger.total.epsilon == pytest.approx(expected, rel=1e-12)
    assert ledger.total.delta == pytest.approx(1e-10, rel=1e-12)
    assert any("basic composition" in n for n in ledger.notes)
    assert "basic composition" in ledger.method
    assert ledger.entries[2].conversion.method == "identity"


def test_pure_and_approx_need_no_delta():
    ledger = compose([LedgerRelease("a", PureDP(1)), LedgerRelease("b", ApproxDP(0.5, 1e-9))])
    assert ledger.total == ApproxDP(1.5, 1e-9)
    # a requested total delta below what the releases use is reported, not hidden
    over = compose([LedgerRelease("a", ApproxDP(1, 1e-10)), LedgerRelease("b", ApproxDP(1, 1e-10))], delta=1e-10)
    assert over.total == ApproxDP(2, 2e-10)
    assert any("above the requested total delta" in n for n in over.notes)


def test_approx_needs_delta_for_zcdp_parts():
    with pytest.raises(ConversionError, match="needs the total delta"):
        compose([LedgerRelease("a", ZCDP(1)), LedgerRelease("b", ApproxDP(0.5, 1e-9))])
    with pytest.raises(ConversionError, match="leaving none"):
        compose([LedgerRelease("a", ZCDP(1)), LedgerRelease("b", ApproxDP(0.5, 1e-9))], delta=1e-9)


def test_gdp_composes_in_quadrature():
    ledger = compose([LedgerRelease("a", GaussianDP(3)), LedgerRelease("b", GaussianDP(4))])
    assert ledger.total == GaussianDP(5.0) and ledger.premetric == "gdp"
    mixed = compose([LedgerRelease("a", GaussianDP(2)), LedgerRelease("b", ZCDP(1))])
    assert mixed.total == ZCDP(3.0)


def test_renyi_pointwise():
    ledger = compose(
        [
            LedgerRelease("a", RenyiCurve([(2, 0.1), (4, 0.3), (8, 1.0)])),
            LedgerRelease("b", RenyiDP(4, 0.2)),
            LedgerRelease("c", ZCDP(0.05)),
        ]
    )
    assert ledger.premetric == "renyi"
    assert isinstance(ledger.total, RenyiDP) and ledger.total.alpha == 4
    assert ledger.total.epsilon == pytest.approx(0.3 + 0.2 + 4 * 0.05, rel=1e-15)
    assert ledger.entries[0].converted == RenyiDP(4, 0.3)  # the curve read at the common order
    with pytest.raises(ConversionError, match="different orders"):
        compose([LedgerRelease("a", RenyiDP(2, 1)), LedgerRelease("b", RenyiDP(3, 1))])


def test_impossible_target():
    with pytest.raises(ConversionError, match="does not exist"):
        compose([LedgerRelease("a", ZCDP(1))], to="pure")


def test_parallel_states_take_the_max():
    states = {"MA": 0.8, "NY": 1.1, "CA": 0.9}
    releases = [LedgerRelease(f"tda-{s}", ZCDP(r), universe=s, parallel_group="states") for s, r in states.items()]
    releases.append(LedgerRelease("tda-MA-extra", ZCDP(0.4), universe="MA", parallel_group="states"))
    releases.append(LedgerRelease("national", ZCDP(0.5)))
    ledger = compose(releases)
    # MA: 0.8 + 0.4 = 1.2 beats NY 1.1; then the national release adds sequentially
    assert ledger.total.rho == pytest.approx(1.2 + 0.5, rel=1e-15)
    assert any("parallel group 'states'" in n and "McSherry" in n for n in ledger.notes)
    assert "parallel composition" in ledger.method


def test_parallel_group_in_approx():
    releases = [
        LedgerRelease("a", ApproxDP(1, 1e-9), universe="x", parallel_group="g"),
        LedgerRelease("b", ApproxDP(2, 1e-10), universe="y", parallel_group="g"),
        LedgerRelease("c", ApproxDP(0.5, 1e-9)),
    ]
    ledger = compose(releases)
    assert ledger.total.epsilon == 2.5
    assert ledger.total.delta == pytest.approx(2e-9, rel=1e-12)


def test_parallel_needs_universe():
    with pytest.raises(ConversionError, match="universe"):
        compose([LedgerRelease("a", PureDP(1), parallel_group="g")])


def test_per_universe_statement_and_worst_case():
    swap = BudgetStatement(
        actual=PureDP(15.43),
        worst=PureDP(16.2),
        per_universe=True,
        depends_on={"b": 264331},
        notes=("eps depends on b",),
    )
    ledger = compose([LedgerRelease("swap", swap), LedgerRelease("table", PureDP(1))])
    assert ledger.total == PureDP(16.43)
    assert ledger.worst.epsilon == pytest.approx(17.2)
    assert ledger.per_universe and ledger.depends_on == {"b": 264331}
    assert "eps depends on b" in ledger.notes
    unknown = BudgetStatement(actual=PureDP(1), per_universe=True)
    assert compose([LedgerRelease("u", unknown)]).worst is None


def test_fixed_statement_worst_is_actual():
    s = BudgetStatement(actual=ZCDP(2.63))
    assert s.worst_case == ZCDP(2.63)
    assert BudgetStatement.fixed({"rho": 1}).worst == ZCDP(1)
    converted, c_actual, c_worst = BudgetStatement(ZCDP(15.29), ZCDP(55.371), True).convert(
        "approx", delta=1e-10, method="bs16"
    )
    assert round(float(converted.actual.epsilon), 2) == 52.82 and round(float(converted.worst.epsilon), 2) == 126.78
    assert "worst case" in str(converted)


def test_public_conditions_cost_nothing():
    pub = PublicCondition("2010 state totals", "Census 2010 SF1")
    stmt = BudgetStatement(actual=ZCDP(1), public=(PublicCondition("state populations"),))
    ledger = compose([LedgerRelease("a", stmt)], public=[pub, "a mandated total"])
    assert ledger.total == ZCDP(1)
    assert [p.description for p in ledger.public] == ["2010 state totals", "a mandated total", "state populations"]


def test_ledger_json():
    ledger = compose([LedgerRelease("a", ZCDP(1)), LedgerRelease("b", PureDP(1)), LedgerRelease("c", PureDP(math.inf))])
    data = ledger.to_json()
    text = json.dumps(data, allow_nan=False)
    assert data["total"] == {"premetric": "zcdp", "rho": "inf"}
    assert [e["name"] for e in data["entries"]] == ["a", "b", "c"]
    assert data["entries"][1]["conversion"]["method"] == "pure-zcdp"
    assert "sequential composition" in text


def test_releases_from_dicts_and_params():
    ledger = compose([{"name": "a", "budget": {"rho": 1}}, {"name": "b", "budget": {"epsilon": 2}}])
    assert ledger.total == ZCDP(3.0)


def test_total_in_other_premetric():
    ledger = compose([LedgerRelease("a", ZCDP(10)), LedgerRelease("b", ZCDP(5.29))])
    assert ledger.total_in("approx", delta=1e-10).result.epsilon == cks20_epsilon(15.29, 1e-10)


def test_parallel_group_mixing_zcdp_and_approx():
    releases = [
        LedgerRelease("MA", ZCDP(1.0), universe="MA", parallel_group="states"),
        LedgerRelease("NY", ApproxDP(1.0, 1e-11), universe="NY", parallel_group="states"),
        LedgerRelease("national", ZCDP(0.5)),
    ]
    ledger = compose(releases, delta=1e-10, method="bs16")
    # zCDP part: max(MA) + national = 1.5, converted at the remaining 9e-11; NY added by basic composition
    assert ledger.total.epsilon == pytest.approx(bs16_epsilon(1.5, 9e-11) + 1.0, rel=1e-12)
    assert ledger.total.delta == pytest.approx(1e-10, rel=1e-12)
    assert [e.converted.kind for e in ledger.entries] == ["zcdp", "approx", "zcdp"]
