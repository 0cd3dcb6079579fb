"""The public report shows how TopDown's budget is split (per level, per query) and the
per-geounit budgets the optimized spine moves, the same exact fractions `dpspec budget --json`
lists: an oversight reader should not need the JSON to see who spends what."""

from __future__ import annotations

import json
import os
from fractions import Fraction

import pytest

from dpspec.budget.budget_report import budget_summary
from dpspec.language.parser import parse, read_source
from dpspec.report import render_all

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DHC = os.path.join(ROOT, "specs", "dhc_persons_production_topdown.dps")


def _reports(path):
    out = render_all(spec=parse(read_source(path), path))
    return out["markdown"][1], out["html"][1], json.loads(out["json"][1])


def test_allocation_and_spine_classes_match_the_budget_json():
    md, html, data = _reports(DHC)
    summary = budget_summary(parse(read_source(DHC), DHC))
    al = data["budget"]["spending"]
    assert Fraction(al["total_exact"]) == Fraction(24811, 5000)
    # every (level, query) row of `dpspec budget --json`, with its exact rho
    assert [(q["level"], q["query"], q["rho_exact"]) for q in al["queries"]] == [
        (r["level"], r["query"], r["rho_exact"]) for r in summary["allocation"]
    ]
    # level shares as the spec states them (dhcp_strategies.py: each level's sum over 49622)
    assert {lv["level"]: lv["share"] for lv in al["levels"]}["blockgroup"] == "50/577"
    assert "| blockgroup | 0.43 | 50/577 |" in md
    # a class-j geounit spends the shares of its level down to its chain's end, as the budget
    # JSON's per-query rows add up
    per_class = {}
    for c in summary["spine"]["bypass"]["classes"]:
        key = (c["level"], c["through"])
        per_class[key] = per_class.get(key, Fraction(0)) + Fraction(c["rho_exact"])
    assert {(c["level"], c["through"]): Fraction(c["rho_exact"]) for c in al["bypass"]} == per_class
    county_to_block = next(c for c in al["bypass"] if (c["level"], c["through"]) == ("county", "block"))
    levels = {lv["level"]: Fraction(lv["rho_exact"]) for lv in al["levels"]}
    assert Fraction(county_to_block["rho_exact"]) == sum(
        levels[lv] for lv in ("county", "prim", "tsg", "tsubset", "blockgroup", "block")
    )
    assert "| county | block | 17843/24811 | 3.5686 | 3.57 |" in md
    assert "Budgets the spine moves" in md and "Budgets the spine moves" in html
    assert "AIAN spine: every state, county, prim, tsg, tsubset, blockgroup unit is measured as two geounits" in md
    assert '<td data-label="Query">gq_constr_groups * age_10_groups</td>' in html


def test_no_allocation_section_for_a_mechanism_without_one():
    md, html, data = _reports(os.path.join(ROOT, "specs", "acs_ma_vision_rr.dps"))
    assert data["budget"]["spending"] is None
    assert "### Allocation" not in md and 'id="allocation"' not in html


def test_joint_queries_are_named_as_the_spec_writes_them():
    """The households' queries once came out with their factors reordered ('hisp * hhtenshort_2lev
    * multig' for the spec's 'multig * hisp * hhtenshort_2lev', 'detailed' spelled out), so a
    reader could not find them in the spec's passes."""
    path = os.path.join(ROOT, "specs", "dhc_households_production_topdown.dps")
    text = read_source(path)
    rows = budget_summary(parse(text, path))["allocation"]
    joint = [r["query"] for r in rows if r["query"].startswith("households: ")]
    assert joint and all(f'"{q}"' in text for q in joint), [q for q in joint if f'"{q}"' not in text]
    assert "households: multig * hisp * hhtenshort_2lev" in joint and "households: detailed" in joint


@pytest.mark.slow  # compiles and reports the production specs
def test_the_budget_notes_say_what_the_guarantee_covers():
    """Which records one unit's change covers, what the release repeats exactly, which cells the
    domain rules out and which constraints cost nothing: in the budget notes (and so the report)."""
    persons = budget_summary(parse(read_source(DHC), DHC))["native"]["notes"]
    assert any(
        n.startswith(
            "equal_to 'pl94': the release's hhgq8lev * votingage * hispanic * cenrace equals the "
            "public table 'pl94' at every block"
        )
        for n in persons
    )
    assert any(n.startswith("structural zeros of 'persons': 32 cell sets (relgq0_lt15,") for n in persons)
    assert any(
        n.startswith("constraints hhgq_total_ub, hhgq_total_lb are not in the least-squares fits") for n in persons
    )
    path = os.path.join(ROOT, "specs", "dhc_households_production_topdown.dps")
    households = budget_summary(parse(read_source(path), path))["native"]["notes"]
    assert any("covers a change of one 'units' record together with one 'households' record" in n for n in households)
    assert any(n.startswith("structural zeros of 'households': 22 cell sets") for n in households)
    plain = budget_summary(
        parse(
            read_source(os.path.join(ROOT, "specs", "acs_national_topdown.dps")),
            os.path.join(ROOT, "specs", "acs_national_topdown.dps"),
        )
    )["native"]["notes"]
    assert not any(n.startswith(("equal_to", "structural zeros", "constraints", "the table")) for n in plain)
