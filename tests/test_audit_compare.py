"""Baseline comparison: budgets only in one currency, multiverses by refinement, the other
blocks by what each spec protects."""

from __future__ import annotations

import math

import pytest

from dpspec import ir
from dpspec.audit.compare import compare, implies
from dpspec.audit.multiverse import closure, determines, refinement
from dpspec.language.parser import parse

HEADER = """
domain d "test" {
  stage edited
  geography geo { state > county > tract }
  table households unit household {
    hhid : int 1..1000
    state : category
    county : category in state
    tract : category in county
    size : int 1..9
    tenure : {owned, rented}
  }
  table persons unit person in households by hhid {
    hhid : int 1..1000
    age : int 0..120
    employed : bool
  }
}
"""


def spec(body: str, title: str = "t") -> ir.Spec:
    return parse(f'spec "{title}"\n{HEADER}\n{body}')


def rr(unit="persons : hamming", premetric="pure", budget="epsilon <= 1", invariants="count persons", extra=""):
    return spec(f"""
invariants {{ {invariants} }}
unit {unit}
premetric {premetric}
mechanism randomized_response {{ table: persons  column: employed  p: 3/4 }}
budget {budget}
{extra}
""")


def row(spec_, baseline, block):
    return compare(spec_, baseline).row(block)


# ---- currencies --------------------------------------------------------------------------


def test_zcdp_against_pure_is_compared_in_zcdp():
    base = rr(budget="epsilon <= 1")
    same = row(rr(premetric="zcdp", budget="rho <= 0.5"), base, "budget")
    assert same.verdict == "same"
    assert same.evidence["spec_converted"].rho == pytest.approx(0.5)
    assert same.evidence["baseline_converted"].rho == pytest.approx(0.5)  # eps^2 / 2
    assert "zCDP" in same.evidence["currency"]
    assert [s["method"] for s in same.evidence["baseline_steps"]] == ["pure-zcdp"]
    assert row(rr(premetric="zcdp", budget="rho <= 0.4"), base, "budget").verdict == "stronger"
    assert row(rr(premetric="zcdp", budget="rho <= 0.6"), base, "budget").verdict == "weaker"
    # The premetric block: pure implies zCDP, not the reverse.
    assert row(rr(premetric="zcdp", budget="rho <= 0.5"), base, "premetric").verdict == "weaker"


def test_add_remove_against_change_one_is_compared_in_change_one_units():
    base = rr(budget="epsilon <= 2")
    r = row(rr(unit="persons : symdiff", budget="epsilon <= 1"), base, "budget")
    assert r.verdict == "same"  # one change-one step is two add/remove steps: 2 x 1
    assert r.evidence["spec_converted"].epsilon == pytest.approx(2)
    assert r.evidence["spec_steps"][0]["method"] == "symdiff-to-hamming"
    assert "hamming" in r.evidence["currency"]
    assert row(rr(unit="persons : symdiff", budget="epsilon <= 1.5"), base, "budget").verdict == "weaker"
    # zCDP scales by 4 under the same change.
    z = row(
        rr(unit="persons : symdiff", premetric="zcdp", budget="rho <= 0.5"),
        rr(premetric="zcdp", budget="rho <= 2"),
        "budget",
    )
    assert z.verdict == "same" and z.evidence["spec_converted"].rho == pytest.approx(2)
    # The unit block calls the relations two currencies rather than ordering them.
    assert row(rr(unit="persons : symdiff"), base, "unit").verdict == "incomparable"


def test_a_bound_quoted_under_another_relation_is_converted_from_that_relation():
    r = row(rr(budget="epsilon <= 1 under symdiff"), rr(budget="epsilon <= 2"), "budget")
    assert r.verdict == "same"


def test_group_privacy_makes_person_and_household_budgets_comparable():
    base = rr(unit="households : hamming holds at most 4 persons", budget="epsilon <= 4")
    r = row(rr(budget="epsilon <= 1"), base, "budget")
    assert r.verdict == "same" and r.evidence["spec_converted"].epsilon == pytest.approx(4)
    assert row(rr(budget="epsilon <= 1"), base, "unit").verdict == "weaker"
    assert row(base, rr(budget="epsilon <= 1"), "unit").verdict == "stronger"


def test_no_common_currency_is_said_not_compared():
    base = rr(unit="households : hamming", budget="epsilon <= 4")
    r = row(rr(budget="epsilon <= 1"), base, "budget")
    assert r.verdict == "incomparable"
    assert "No common currency" in r.reason and "holds at most K persons" in r.reason
    assert "spec_converted" not in r.evidence


def test_approximate_budgets_are_compared_at_one_delta():
    base = rr(premetric="approximate delta 1e-6", budget="epsilon <= 1")
    # pure 1 is (1, 0): the same epsilon at a smaller delta.
    assert row(rr(budget="epsilon <= 1"), base, "budget").verdict == "stronger"
    assert row(rr(budget="epsilon <= 2"), base, "budget").verdict == "incomparable"  # (2, 0) against (1, 1e-6)
    zcdp = row(rr(premetric="zcdp", budget="rho <= 0.01"), base, "budget")
    assert zcdp.evidence["spec_converted"].delta == pytest.approx(1e-6)
    assert zcdp.verdict == "stronger"  # rho = 0.01 is about eps = 0.5 at delta = 1e-6 (cks20)


def test_achieved_budgets_are_preferred_to_stated_bounds():
    from dpspec.audit.context import build_context

    ctx = build_context(rr(budget="epsilon <= 5"), baseline=rr(budget="epsilon <= 1"))
    r = ctx.comparison.row("budget")
    assert r.verdict == "same"  # both achieve ln 3, whatever they state
    assert r.evidence["spec_converted"].epsilon == pytest.approx(math.log(3))


# ---- the refinement order of multiverses ---------------------------------------------------


def q(*cols, table="households"):
    return ir.CountQuery(table, tuple(cols))


DOMAIN = spec("").domain


@pytest.mark.parametrize(
    ("mine", "theirs", "order"),
    [
        ([q("county", "size")], [q("state", "size")], "finer"),  # county determines state (nested)
        ([q("tract")], [q("state"), q("county")], "finer"),  # through two levels of the hierarchy
        ([q("state", "size")], [q("county", "size")], "coarser"),
        ([q("county", "size")], [q("size", "county")], "same"),  # column order does not matter
        ([q("size", "tenure")], [q("size"), q("tenure")], "finer"),  # a joint table fixes its margins
        ([q("size")], [q("tenure")], "incomparable"),
        ([q("size")], [q("size", table="persons")], "incomparable"),  # different tables
        ([], [q()], "coarser"),  # no invariants: one universe, coarser than any partition
        ([], [], "same"),
    ],
)
def test_refinement(mine, theirs, order):
    assert refinement(mine, theirs, DOMAIN) == order


def test_closure_adds_every_ancestor_column():
    assert set(closure(q("tract", "size"), DOMAIN).columns) == {"tract", "county", "state", "size"}
    assert determines([q("tract", "size")], q("state"), DOMAIN)
    assert not determines([q("state", "size")], q("county"), DOMAIN)


def test_geography_alone_nests_levels():
    plain = parse(
        "domain d { geography g { region > district } table t unit u { region : category  district : category } }"
    ).domain
    assert refinement([q("district", table="t")], [q("region", table="t")], plain) == "finer"


def test_multiverse_row_uses_the_refinement_order():
    coarse = rr(invariants="count persons")
    fine = rr(invariants="count persons  count persons by age")
    assert row(fine, coarse, "multiverse").verdict == "weaker"
    assert row(coarse, fine, "multiverse").verdict == "stronger"
    assert row(fine, fine, "multiverse").verdict == "same"
    other = rr(invariants="count persons by employed")
    assert row(fine, other, "multiverse").verdict == "incomparable"


# ---- premetrics and domains ----------------------------------------------------------------


def p(text):
    return parse(f"premetric {text}").premetric


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        ("pure", "approximate delta 1e-9", True),
        ("approximate delta 1e-9", "pure", False),
        ("zcdp", "approximate delta 1e-9", True),
        ("approximate delta 1e-9", "zcdp", False),
        ("approximate delta 1e-9", "approximate delta 1e-6", True),
        ("approximate delta 1e-6", "approximate delta 1e-9", False),
        ("gdp", "zcdp", True),
        ("zcdp", "gdp", False),
    ],
)
def test_premetric_implication(a, b, expected):
    assert implies(p(a), p(b)) is expected


def test_coarse_events_make_the_premetric_weaker():
    assert row(rr(premetric='pure on events "x"'), rr(), "premetric").verdict == "weaker"


def test_domain_order():
    later = parse(rr().text.replace("stage edited", "stage imputed"))
    assert row(later, rr(), "domain").verdict == "weaker"
    assert row(rr(), later, "domain").verdict == "stronger"
    dropped = parse(rr().text.replace("    age : int 0..120\n", ""))
    assert row(dropped, rr(), "domain").verdict == "weaker"
    narrowed = parse(rr().text.replace("size : int 1..9", "size : int 1..5"))
    assert row(narrowed, rr(), "domain").verdict == "weaker"
    mixed = parse(later.text.replace("    age : int 0..120\n", "    age : int 0..120\n    sex : {f, m}\n"))
    r = row(mixed, rr(), "domain")
    assert r.verdict == "incomparable" and "starts later" in r.reason and "adds persons.sex" in r.reason
