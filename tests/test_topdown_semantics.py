"""Per-attribute and per-geography budgets of the P.L. 94-171 production specs, pinned to the
Census Bureau's published production certificates.

Source of every pinned figure: uscensusbureau/DAS_2020_Redistricting_Production_Code,
docs/certificates/DAS-PL94171-PRODUCTION-RUN1A-202106241420-US-Persons.certificate.pdf (page 8,
"Per-attribute semantics", delta = 1e-10, "zCDP-implied epsilon") and
...-US-Units.certificate.pdf (page 7). The certificates print two decimals; their conversion is
Canonne, Kamath & Steinke (2020) Corollary 13 (source/programs/engine/curve.py), which is
dpspec's `cks20`. The same idea is the first seed paper's per-attribute analysis (Part III §4.2).
"""

import json
import os

import pytest
from click.testing import CliRunner

from dpspec.budget.budget_report import budget_summary
from dpspec.cli.main import main
from dpspec.errors import SpecError
from dpspec.language.parser import parse, read_source
from tests.key_files import keys_from

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PERSONS = os.path.join(ROOT, "specs", "pl94_production_topdown.dps")
UNITS = os.path.join(ROOT, "specs", "pl94_units_topdown.dps")

# US-Persons certificate, page 8: attribute -> epsilon; "Block-within-X" -> epsilon
US_PERSONS_ATTRIBUTES = {"hhgq": 7.24, "votingage": 7.57, "hispanic": 10.04, "cenrace": 10.08}
US_PERSONS_GEOGRAPHY = {"blockgroup": 2.93, "tract": 9.38, "county": 11.70, "state": 13.05, "nation": 16.89}
# the certificate's total: "Total zCDP-implied epsilon = 17849145/1041158 (~ 17.14)"
US_PERSONS_TOTAL = 17849145 / 1041158
# US-Units certificate, page 7
US_UNITS_ATTRIBUTES = {"h1": 2.47}
US_UNITS_GEOGRAPHY = {"blockgroup": 0.82, "tract": 1.81, "county": 2.35, "state": 2.46, "nation": 2.47}
US_UNITS_TOTAL = 1455307 / 588081


def _semantics(path):
    return budget_summary(parse(read_source(path), path))


def _pinned(summary, attributes, geography):
    sem = summary["semantics"]
    assert sem["delta"] == 1e-10 and sem["conversion"] == "cks20"
    got_a = {a["attribute"]: round(a["epsilon"], 2) for a in sem["attributes"]}
    got_g = {g["within"]: round(g["epsilon"], 2) for g in sem["geographies"]}
    return got_a, got_g


@pytest.mark.parametrize(
    "path,attributes,geography,total",
    [
        (PERSONS, US_PERSONS_ATTRIBUTES, US_PERSONS_GEOGRAPHY, US_PERSONS_TOTAL),
        (UNITS, US_UNITS_ATTRIBUTES, US_UNITS_GEOGRAPHY, US_UNITS_TOTAL),
    ],
    ids=["US-Persons", "US-Units"],
)
def test_certificate_figures(path, attributes, geography, total):
    summary = _semantics(path)
    got_a, got_g = _pinned(summary, attributes, geography)
    assert got_a == attributes
    assert got_g == geography
    cks = next(c for c in summary["conversions"] if c["premetric"] == "approx" and c["method"] == "cks20")
    # the certificate's fraction is an upper rounding of a bisection to 1e-7
    assert cks["epsilon"] == pytest.approx(total, abs=1e-6)


def test_exact_rhos_and_queries():
    """Exact accounting: hhgq is spent by hhgq, hhinstlevels and every query crossing hhgq
    (here only detailed) at each of the six levels; the geography rhos nest and the nation's
    excludes only the nation's own level."""
    sem = _semantics(PERSONS)["semantics"]
    hhgq = next(a for a in sem["attributes"] if a["attribute"] == "hhgq")
    assert {q["query"] for q in hhgq["queries"]} == {"hhgq", "hhinstlevels", "detailed"}  # as the allocation names them
    assert len(hhgq["queries"]) == 18
    rhos = [g["rho"] for g in sem["geographies"]]
    assert rhos == sorted(rhos)
    nation = sem["geographies"][-1]
    assert nation["levels"] == ["state", "county", "tract", "blockgroup", "block"]
    from fractions import Fraction as F

    rho = F(542, 339) ** 2
    assert F(nation["rho_exact"]) == rho * (1 - F(104, 4099))
    assert F(sem["geographies"][0]["rho_exact"]) == rho * F(165, 4099)


def test_a_wrong_share_breaks_a_pinned_figure(tmp_path):
    """Moving 200/4097 of the block level from detailed to total (shares still summing to 1,
    the total rho unchanged) changes the per-attribute figures: the pins catch it."""
    text = read_source(PERSONS)
    wrong = text.replace("      total: 5/4097\n      cenrace: 9/4097", "      total: 205/4097\n      cenrace: 9/4097")
    wrong = wrong.replace("      detailed: 3945/4097", "      detailed: 3745/4097")
    assert wrong.count("205/4097") == 1 and "3745/4097" in wrong
    summary = budget_summary(parse(keys_from(wrong, os.path.dirname(PERSONS)), str(tmp_path / "wrong.dps")))
    got_a, got_g = _pinned(summary, US_PERSONS_ATTRIBUTES, US_PERSONS_GEOGRAPHY)
    assert got_a != US_PERSONS_ATTRIBUTES  # the pin fails on the wrong copy
    assert got_g == US_PERSONS_GEOGRAPHY  # level shares untouched: geography unchanged


def test_wrong_level_share_breaks_the_geography_pin(tmp_path):
    text = read_source(PERSONS)
    wrong = text.replace(
        "    tract: 687/4099\n    blockgroup: 1256/4099", "    tract: 887/4099\n    blockgroup: 1056/4099"
    )
    assert wrong != text
    summary = budget_summary(parse(keys_from(wrong, os.path.dirname(PERSONS)), str(tmp_path / "wrong.dps")))
    _, got_g = _pinned(summary, US_PERSONS_ATTRIBUTES, US_PERSONS_GEOGRAPHY)
    assert got_g != US_PERSONS_GEOGRAPHY
    assert got_g["blockgroup"] == US_PERSONS_GEOGRAPHY["blockgroup"]  # the block level is unchanged


def test_cli_text_and_json():
    r = CliRunner().invoke(main, ["budget", "--per-attribute", PERSONS])
    assert r.exit_code == 0, r.output
    assert "attribute cenrace: rho = 1.0088, epsilon = 10.08" in r.output
    assert "a block within its tract: rho = 0.8862, epsilon = 9.38" in r.output
    r = CliRunner().invoke(main, ["budget", "--json", UNITS])
    data = json.loads(r.output)
    assert [g["description"] for g in data["semantics"]["geographies"]][0] == "a block within its blockgroup"
    assert data["semantics"]["geographies"][-1]["description"] == "a block within the nation"
    assert "allocation" in data and "bounds" in data  # additive: the old keys stay


def test_delta_option_changes_the_figures():
    r = CliRunner().invoke(main, ["budget", "--json", "--delta", "1e-6", UNITS])
    sem = json.loads(r.output)["semantics"]
    assert sem["delta"] == 1e-6
    assert sem["attributes"][0]["epsilon"] < 2.47


def test_per_attribute_request_without_attribute_structure_is_refused():
    rr = os.path.join(ROOT, "specs", "acs_ma_vision_rr.dps")
    r = CliRunner().invoke(main, ["budget", "--per-attribute", rr])
    assert r.exit_code == 1
    assert "mechanism 'randomized_response' has no attribute structure" in r.output
    assert "acs_ma_vision_rr.dps" in r.output
    # without the request its budget is printed as before, with no semantics key
    r = CliRunner().invoke(main, ["budget", "--json", rr])
    assert r.exit_code == 0 and "semantics" not in json.loads(r.output)
    program = os.path.join(ROOT, "specs", "pl94_program", "program.dps")
    with pytest.raises(SpecError, match="not a program"):
        budget_summary(parse(read_source(program), program), per_attribute=True)


def test_semantics_of_an_unmeasured_level_and_a_one_group_recode():
    """A recode putting every category in one group distinguishes nothing: it spends no
    attribute's budget; a level without a share adds nothing to the geographies above it."""
    text = read_source(PERSONS)
    one = text.replace(
        "      household: [0]\n      institutional: [1, 2, 3, 4]\n      noninstitutional: [5, 6, 7]",
        "      all: [0, 1, 2, 3, 4, 5, 6, 7]",
    )
    assert one != text
    sem = budget_summary(parse(one, PERSONS))["semantics"]
    hhgq = next(a for a in sem["attributes"] if a["attribute"] == "hhgq")
    assert "hhinstlevels" not in {q["query"] for q in hhgq["queries"]}
    assert round(hhgq["epsilon"], 2) < US_PERSONS_ATTRIBUTES["hhgq"]


def test_reports_show_the_per_attribute_table():
    """The public report (HTML, Markdown, report.json) carries the same figures; a mechanism
    without attribute structure gets no such section."""
    from dpspec.report import render_all

    out = render_all(spec=parse(read_source(UNITS), UNITS))
    md, html, data = out["markdown"][1], out["html"][1], json.loads(out["json"][1])
    assert "| attribute h1 | 11417641/152349649 | 2.47 | 6 queries |" in md
    assert "<td>a block within its tract</td>" in html and "<td>1.81</td>" in html
    assert [round(g["epsilon"], 2) for g in data["budget"]["semantics"]["geographies"]] == list(
        US_UNITS_GEOGRAPHY.values()
    )
    rr = os.path.join(ROOT, "specs", "acs_ma_vision_rr.dps")
    out = render_all(spec=parse(read_source(rr), rr))
    assert "Per attribute and per geography" not in out["markdown"][1]
    assert json.loads(out["json"][1])["budget"]["semantics"] is None


# Puerto Rico runs (PR-Persons certificate page 7, PR-Units page 7): no US level; the persons
# strategy has its own query shares (ProductionCandidate..._PR in the certificate's table).
PR_QUERIES = [
    "total",
    "cenrace",
    "hispanic",
    "votingage",
    "hhinstlevels",
    "hhgq",
    "hispanic * cenrace",
    "votingage * cenrace",
    "votingage * hispanic",
    "votingage * hispanic * cenrace",
    "detailed",
]
PR_PERSONS_SHARES = {
    "state": [None, "11/108", "11/108", "11/108", "11/108", "11/108", "53/513", "53/513", "11/108", "56/513", "25/342"],
    "county": ["3126/4097"] + ["10/4097"] * 5 + ["28/4097", "28/4097", "10/4097", "101/4097", "754/4097"],
    "tract": [
        "1467/4102",
        "13/4102",
        "1/586",
        "1/586",
        "1/586",
        "1/586",
        "866/2051",
        "15/2051",
        "1/586",
        "50/2051",
        "725/4102",
    ],
    "blockgroup": ["1876/4103"] + ["4/4103"] * 5 + ["749/4103", "10/4103", "4/4103", "27/4103", "1417/4103"],
    "block": ["5/4097", "9/4097"] + ["5/4097"] * 4 + ["21/4097", "21/4097", "5/4097", "71/4097", "3945/4097"],
}
PR_PERSONS_LEVELS = {
    "state": "689/4099",
    "county": "695/4099",
    "tract": "772/4099",
    "blockgroup": "1778/4099",
    "block": "165/4099",
}
PR_PERSONS_ATTRIBUTES = {"hhgq": 8.69, "votingage": 9.49, "hispanic": 11.65, "cenrace": 11.69}
PR_PERSONS_GEOGRAPHY = {"blockgroup": 2.93, "tract": 11.18, "county": 13.51, "state": 15.41}
PR_UNITS_LEVELS = {
    "state": "5047/876580",
    "county": "18746/219145",
    "tract": "94451/262974",
    "blockgroup": "281911/657435",
    "block": "99/820",
}
PR_UNITS_GEOGRAPHY = {"blockgroup": 0.82, "tract": 1.81, "county": 2.35, "state": 2.47}


def _block(name, body: dict) -> str:
    return f"  {name}: {{\n" + "".join(f"    {k}: {v}\n" for k, v in body.items()) + "  }\n"


def _puerto_rico(text, levels, queries=None):
    """The US spec with Puerto Rico's level (and query) shares: the mechanism's budget blocks replaced."""
    start = text.index("  levels: {")
    end = text.index("\n  }\n", text.index("  queries: {") if queries else start) + 5
    new = _block("levels", levels)
    if queries:
        new += (
            "  queries: {\n"
            + "".join(
                f"    {lv}: {{\n" + "".join(f"      {q}: {v}\n" for q, v in zip(PR_QUERIES, vals) if v) + "    }\n"
                for lv, vals in queries.items()
            )
            + "  }\n"
        )
        text = text.replace("    state: [total]\n", "", 1)  # PR measures no state total
        text = text.replace("budget epsilon <= 17.15 with delta = 1e-10 by cks20\n", "")
        nation = text.index("    nation: {\n      pass1:")
        text = text[:nation] + text[text.index("    }\n", nation) + 6 :]
        start = text.index("  levels: {")
        end = text.index("\n  }\n", text.index("  queries: {")) + 5
    return text[:start] + new + text[end:]


@pytest.mark.parametrize("which", ["PR-Persons", "PR-Units"])
def test_puerto_rico_certificate_figures(which):
    if which == "PR-Persons":
        text = _puerto_rico(read_source(PERSONS), PR_PERSONS_LEVELS, PR_PERSONS_SHARES)
        attributes, geography, path = PR_PERSONS_ATTRIBUTES, PR_PERSONS_GEOGRAPHY, PERSONS
    else:
        text = _puerto_rico(read_source(UNITS), PR_UNITS_LEVELS)
        attributes, geography, path = US_UNITS_ATTRIBUTES, PR_UNITS_GEOGRAPHY, UNITS
    summary = budget_summary(parse(text, path))
    got_a, got_g = _pinned(summary, attributes, geography)
    assert got_a == attributes
    assert {k: got_g[k] for k in geography} == geography  # the certificate stops at the state


DHC_PERSONS = os.path.join(ROOT, "specs", "dhc_persons_production_topdown.dps")


@pytest.mark.parametrize("path", [PERSONS, DHC_PERSONS], ids=["pl94", "dhc-persons"])
def test_a_move_across_the_aian_line_costs_every_split_level(path):
    """On the AIAN spine each state and every level below it but the block is measured as two
    parts, each nested in its parent's part on the same side: two blocks on opposite sides of
    the line, even in one block group, lie in different parts at every split level, so a move
    between them spends the state level and everything below (the nation's figure here, since
    the nation is not split); the 'within' rows (the certificates') hold on one side only."""
    from fractions import Fraction

    summary = budget_summary(parse(read_source(path), path))
    per_level = {}
    for row in summary["allocation"]:
        per_level[row["level"]] = per_level.get(row["level"], Fraction(0)) + Fraction(row["rho_exact"])
    sem = summary["semantics"]
    across = sem["across_split"]
    levels = list(per_level)  # nation first
    assert across["split_levels"][0] == "state" and across["finest"] == "block"
    assert Fraction(across["rho_exact"]) == sum(per_level[lv] for lv in levels[levels.index("state") :])
    blockgroup = next(g for g in sem["geographies"] if g["within"] == "blockgroup")
    assert Fraction(across["rho_exact"]) > 10 * Fraction(blockgroup["rho_exact"])
    assert "other side of the AIAN line" in across["description"]


def test_no_across_split_figure_without_the_aian_spine(tmp_path):
    text = read_source(PERSONS)
    plain = text.replace("    aian: aian\n", "")
    assert plain != text
    sem = budget_summary(parse(keys_from(plain, os.path.dirname(PERSONS)), str(tmp_path / "plain.dps")))["semantics"]
    assert "across_split" not in sem


def test_report_shows_the_across_split_row():
    from dpspec.report import render_all

    out = render_all(spec=parse(read_source(PERSONS), PERSONS))
    md, html = out["markdown"][1], out["html"][1]
    assert "| a block on the other side of the AIAN line, even in the same blockgroup" in md
    assert "<td>a block on the other side of the AIAN line" in html


def test_attribute_queries_are_named_as_the_allocation_names_them():
    summary = budget_summary(parse(read_source(DHC_PERSONS), DHC_PERSONS))
    named = {(r["level"], r["query"]) for r in summary["allocation"]}
    for a in summary["semantics"]["attributes"]:
        assert {(q["level"], q["query"]) for q in a["queries"]} <= named, a["attribute"]


def test_a_joint_tables_attributes_are_listed_and_tied_attributes_spend_both_tables():
    """DHC households: the households' attributes once had no per-attribute figure at all, and the
    units' tenure showed only the units' own queries (rho 0.8833). The owned cross constraint
    ties the households' ten to the units' tenure at every unit, so a valid neighbour that changes
    a unit's tenure changes its household's too: the figure spends both tables' queries."""
    from fractions import Fraction

    path = os.path.join(ROOT, "specs", "dhc_households_production_topdown.dps")
    summary = budget_summary(parse(read_source(path), path))
    sem = {a["attribute"]: a for a in summary["semantics"]["attributes"]}
    rows = summary["allocation"]
    units_only = sum(Fraction(r["rho_exact"]) for r in rows if not r["query"].startswith("households: "))
    assert Fraction(sem["tenvacgq"]["rho_exact"]) > units_only
    assert sem["tenvacgq"]["tied_to"] == ["households: ten"] and sem["households: ten"]["tied_to"] == ["tenvacgq"]
    # every households query reads tenure (hhtenshort_2lev, ten or detailed): tenure spends all of rho
    assert (
        Fraction(sem["tenvacgq"]["rho_exact"]) == sum(Fraction(r["rho_exact"]) for r in rows) == Fraction(15401, 2000)
    )
    # an attribute no cross constraint ties spends its own table's queries that distinguish it
    elderly = [r for r in rows if r["query"] in ("households: detailed",) or "elderly" in r["query"]]
    assert Fraction(sem["households: elderly"]["rho_exact"]) == sum(Fraction(r["rho_exact"]) for r in elderly)
    assert "tied_to" not in sem["households: elderly"]
    named = {(r["level"], r["query"]) for r in rows}
    assert {(q["level"], q["query"]) for q in sem["households: sex"]["queries"]} <= named
