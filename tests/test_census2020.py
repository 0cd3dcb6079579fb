"""The 2020 Census composed as one specification (issue 25, items 4-5): every per-product figure
of `specs/census2020/` pinned next to its citation, the seed's 55.371 reconciled term by term,
a wrong share in a copy of a production spec caught by a pin, and the bad inputs refused with
the member and the reason."""

import json
import os
import re
from fractions import Fraction

import pytest
from click.testing import CliRunner

from dpspec.budget import ZCDP, convert
from dpspec.budget.program import program_summary
from dpspec.cli.main import main
from dpspec.errors import SpecError
from dpspec.language.parser import parse, read_source
from tests.test_registry import _fields, _prose  # the field-by-field comparison of issue 30's export test

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SPECS = os.path.join(ROOT, "specs")
US_PROGRAM = os.path.join(SPECS, "census2020", "program.dps")
DELTA = 1e-10

# Each product's figure for the program's unit (one person, change one), US, with its source.
US_RHO = {
    # P.L. 94-171 persons: global_scale 339/542 in the US-Persons production certificate
    # (DAS_2020_Redistricting_Production_Code, docs/certificates/...-US-Persons.certificate.pdf).
    "../pl94_production_topdown.dps": Fraction(542, 339) ** 2,
    # P.L. 94-171 housing units: global_scale 12343/3379 in the US-Units certificate.
    "../pl94_units_topdown.dps": Fraction(3379, 12343) ** 2,
    # DHC persons and housing units/households, each from its production spec: the production
    # strategies' per-query rhos (DAS_2020_DHC_Production_Code configs/production/dhc/person_US.ini,
    # unit_US.ini; the strategies in programs/strategies/dhcp_strategies.py, dhch_strategies.py).
    "../dhc_persons_production_topdown.dps": Fraction(24811, 5000),
    "../dhc_households_production_topdown.dps": Fraction(15401, 2000),
    # Detailed DHC-A: SafeTab-P's production levels (DAS_2020_DDHCA_Production_Code,
    # configs/safetab-p/NMFv7-2020/config.json) sum to 4.944 for add/remove one person; a change
    # of one person by the mechanism's own sensitivity is x 2.
    "../safetab_p_production.dps": 2 * Fraction("4.944"),
    # Detailed DHC-B: SafeTab-H's (DAS_2020_DDHCB_Production_Code, configs/safetab-h/NMFv5)
    # 8.895302 for add/remove one household, x 2: the published 17.79.
    "../safetab_h_production.dps": 2 * Fraction("8.895302"),
    # S-DHC: PHSafe's production budgets (DAS_2020_SDHC_Production_Code, configs/phsafe/NMFv8/us/
    # config.json) sum to 1.257281 for adding or removing one person; a change of one person by
    # the mechanism's own sensitivity (plugins/dpspec_phsafe/change_one.py) is x 2: the 2.515
    # the Bureau's figures imply.
    "../sdhc_production.dps": 2 * Fraction("1.257281"),
}
# epsilon at delta = 1e-10 by Canonne, Kamath & Steinke (2020), the certificates' conversion
US_EPSILON = {
    "../pl94_production_topdown.dps": 17.1436,  # certificate: 17849145/1041158 = 17.1436
    "../pl94_units_topdown.dps": 2.4747,
    "../dhc_persons_production_topdown.dps": 25.4193,
    "../dhc_households_production_topdown.dps": 33.2888,
    "../safetab_p_production.dps": 38.9487,
    "../safetab_h_production.dps": 56.9659,
    "../sdhc_production.dps": 16.9801,
}
# the group-privacy (rho x 4) figures the members' own ledgers state for a change of one record
GENERIC = {
    "../safetab_p_production.dps": 4 * Fraction("4.944"),  # 19.776: published for DDHC-A
    "../safetab_h_production.dps": 4 * Fraction("8.895302"),
}  # 35.581208
# PHSafe protects add/remove itself; the program's conversion to a change is its own step
GENERIC_SYMDIFF = {"../sdhc_production.dps": 4 * Fraction("1.257281")}  # 5.029124

# S-DHC: PHSafe's production budgets (DAS_2020_SDHC_Production_Code, configs/phsafe/NMFv8/us/
# config.json, privacy_budget of PH1_num ... PH8_denom at usa and state) for adding or removing
# one person (with their unit's record changed); the seed's footnote 3 counts S-DHC among the primary products.
PHSAFE_US = (
    [0.002619] * 3
    + [0.141622, 0.016371, 0.016371]
    + [0.000022] * 3
    + [0.001170, 0.000135, 0.000135]
    + [0.002619, 0.016371]
    + [0.001061] * 3
    + [0.662976, 0.006630, 0.006630]
    + [0.002619] * 3
    + [0.141622, 0.016371, 0.016371]
    + [0.000022] * 3
    + [0.001170, 0.000135, 0.000135]
    + [0.001061, 0.006630]
    + [0.002619] * 3
    + [0.141622, 0.016371, 0.016371]
    + [0.000022] * 3
    + [0.001170, 0.000135, 0.000135]
)


def _summary(path=US_PROGRAM):
    return program_summary(parse(read_source(path), path))


@pytest.fixture(scope="module")
def us():
    return _summary()


def test_every_us_product_has_its_pinned_figure_and_a_ledger_line(us):
    by = {r["spec"]: r for r in us["releases"]}
    assert set(by) == set(US_RHO)
    for spec, rho in US_RHO.items():
        got = by[spec]["budget"]["rho"]
        assert got == pytest.approx(float(rho), rel=1e-9), spec
        eps = convert(ZCDP(got), "approx", delta=DELTA, method="cks20").result.epsilon
        assert eps == pytest.approx(US_EPSILON[spec], abs=5e-5), spec
        assert by[spec]["unit_steps"], spec  # a ledger line: member's figure -> the program's unit
    total = sum(US_RHO.values())
    assert us["total"]["rho"] == pytest.approx(float(total), rel=1e-9)
    assert round(us["total"]["rho"], 4) == 45.4870 and us["bounds_hold"]


def test_the_tight_change_one_figure_is_the_ledgers_and_says_why(us):
    """DDHC-A, DDHC-B and S-DHC: the mechanisms' own sensitivity (rho x 2) replaces group privacy's x 4."""
    by = {r["spec"]: r for r in us["releases"]}
    for spec, generic in GENERIC.items():
        r = by[spec]
        assert r["own_budget"]["rho"] == pytest.approx(float(generic))
        first = r["unit_steps"][0]
        assert first["what"] == "relation" and "the mechanism's own sensitivity" in first["method"]
        assert "leaves at most k cells and enters at most k cells" in first["method"]
    # S-DHC: PHSafe's member states add/remove (1.257281); its own change-one figure is x 2
    sdhc = by["../sdhc_production.dps"]
    assert sdhc["own_budget"]["rho"] == pytest.approx(1.257281)
    first = sdhc["unit_steps"][0]
    assert first["what"] == "relation" and "the mechanism's own sensitivity" in first["method"]
    assert "in place of group privacy's two add/remove steps (rho x 4)" in first["method"]
    assert sdhc["budget"]["rho"] == pytest.approx(float(US_RHO["../sdhc_production.dps"]))
    note = next(n for n in us["ledger"]["notes"] if n.startswith("change one record:"))
    assert "'../sdhc_production.dps' rho = 2.51456 (group privacy: 5.02912)" in note
    assert "total would be rho = 75.6802" in note  # every member by group privacy
    generic = (
        sum(GENERIC.values())
        + sum(GENERIC_SYMDIFF.values())
        + sum(v for k, v in US_RHO.items() if k not in GENERIC and k not in GENERIC_SYMDIFF)
    )
    assert round(float(generic), 4) == 75.6802
    # DDHC-B's tight figure is the published 17.79
    assert round(by["../safetab_h_production.dps"]["budget"]["rho"], 2) == 17.79
    # the members' own notes do not say the looser figure is the one the program states
    own = [n for n in us["ledger"]["notes"] if "(the spec's relation)" in n]
    assert own and all("stated below" not in n and "a program of products counts the tight one" in n for n in own)


def test_household_and_unit_products_keep_their_guarantee_for_one_person(us):
    by = {r["spec"]: r for r in us["releases"]}
    h = [s["method"] for s in by["../safetab_h_production.dps"]["unit_steps"]]
    assert any("is a change to one households" in m for m in h)
    units = [s["method"] for s in by["../dhc_households_production_topdown.dps"]["unit_steps"]]
    assert any("the composed unit holds at most 1 units record(s): the same record, as is" in m for m in units)
    assert us["unit"]["description"] == (
        "one person (change one), with their household (table households), "
        "at most 1 housing_unit record(s) of table units"
    )


def test_the_seeds_55_371_reconciled_term_by_term(us):
    """Bailie, Gong & Meng, Part III §4.2: rho = 55.371, epsilon = 126.78 at delta = 1e-10. It is the
    sum of the published per-product figures: P.L. 94 and DHC as one (15.29), DDHC-A at group
    privacy (19.776), DDHC-B at its tight figure (17.79) and S-DHC (PHSafe, x 2: 2.515)."""
    by = {r["spec"]: r["budget"]["rho"] for r in us["releases"]}
    pl94_dhc = sum(
        by[s]
        for s in (
            "../pl94_production_topdown.dps",
            "../pl94_units_topdown.dps",
            "../dhc_persons_production_topdown.dps",
            "../dhc_households_production_topdown.dps",
        )
    )
    assert round(pl94_dhc, 4) == 15.2939 and round(pl94_dhc, 2) == 15.29  # the published 15.29
    sdhc_add_remove = sum(Fraction(str(x)) for x in PHSAFE_US)
    assert sdhc_add_remove == Fraction(1257281, 1000000)
    sdhc = 2 * sdhc_add_remove  # the published figure's rule, x 2: 2.514562, published as 2.515
    ddhc_a_published = float(GENERIC["../safetab_p_production.dps"])
    seed = round(pl94_dhc, 2) + ddhc_a_published + round(by["../safetab_h_production.dps"], 2) + round(float(sdhc), 3)
    assert seed == pytest.approx(55.371, abs=1e-9)
    assert round(float(convert(ZCDP(55.371), "approx", delta=DELTA, method="bs16").result.epsilon), 2) == 126.78
    # where this program differs, exactly: DDHC-A's rule (+9.888) and rounding; S-DHC's rule is the same
    ours = us["total"]["rho"]
    assert round(ours, 4) == 45.4870
    ddhc_a = ddhc_a_published - by["../safetab_p_production.dps"]
    assert ddhc_a == pytest.approx(9.888) and by["../sdhc_production.dps"] == pytest.approx(float(sdhc))
    rounding = 55.371 - (ours + ddhc_a)
    assert round(rounding, 4) == -0.0040  # 15.2939 -> 15.29, 17.790604 -> 17.79, 2.514562 -> 2.515
    assert round(ours + ddhc_a, 4) == 55.3750


def _copy_with_absolute_data(src, dst, edit=None):
    text = read_source(src)
    if edit:
        old, new = edit
        assert old in text
        text = text.replace(old, new, 1)
    base = os.path.dirname(src)
    text = re.sub(r'"(data/[^"]+)"', lambda m: '"' + os.path.join(base, m.group(1)) + '"', text)
    dst.write_text(text)


def _program_copy(tmp_path, edits):
    """A copy of the US program whose members are copies of the production specs, `edits` applied."""
    program = read_source(US_PROGRAM)
    (tmp_path / "census2020").mkdir()
    (tmp_path / "registry").mkdir()
    for rel in US_RHO:
        name = rel[3:]
        _copy_with_absolute_data(os.path.join(SPECS, name), tmp_path / name, edits.get(rel))
    path = tmp_path / "census2020" / "program.dps"
    path.write_text(program)
    return _summary(str(path))


def test_the_copy_reproduces_the_pins(tmp_path):
    s = _program_copy(tmp_path, {})
    assert s["total"]["rho"] == pytest.approx(float(sum(US_RHO.values())), rel=1e-9)


@pytest.mark.parametrize(
    "member,total,wrong_total",
    [
        ("../safetab_p_production.dps", "total_rho: 4.944", "total_rho: 5.044"),
        ("../safetab_h_production.dps", "total_rho: 8.895302", "total_rho: 8.995302"),
    ],
)
def test_a_wrong_share_in_a_production_spec_breaks_a_pin(tmp_path, member, total, wrong_total):
    """The nation's level-2 budget moved up by 0.1 (and the declared total with it, so the copy
    still checks): the member's pinned figure and the census total no longer match."""
    text = read_source(os.path.join(SPECS, member[3:]))
    m = re.search(r"nation: \{\s*level1: ([0-9.]+)\s*level2: ([0-9.]+)", text)
    assert m, "the spec's nation budgets"
    level2 = m.group(2)
    bumped = format(float(Fraction(level2) + Fraction(1, 10)), ".6g")
    edited = text.replace(m.group(0), m.group(0)[: m.start(2) - m.start(0)] + bumped, 1).replace(total, wrong_total, 1)
    assert edited != text
    s = _program_copy(tmp_path, {member: (text, edited)})
    got = next(r["budget"]["rho"] for r in s["releases"] if r["spec"] == member)
    assert got != pytest.approx(float(US_RHO[member]), rel=1e-9)
    assert s["total"]["rho"] != pytest.approx(float(sum(US_RHO.values())), rel=1e-9)


def test_cli_prints_the_ledger():
    r = CliRunner().invoke(main, ["budget", US_PROGRAM])
    assert r.exit_code == 0, r.output
    assert "total: zcdp: rho = 45.487" in r.output
    assert "multiverse (the union of the members' invariants): count persons by state; " in r.output
    assert "declared rho <= 55.371: holds" in r.output
    # the composed total in (epsilon, delta), by the certificates' conversion and by the seed's
    assert "at delta = 1e-10: epsilon = 108.5760 by cks20" in r.output and "110.2135 by bs16" in r.output
    assert "relation: rho = 19.78 -> rho = 9.89  [the mechanism's own sensitivity" in r.output


# ---- Puerto Rico: a separate run over disjoint persons ---------------------------------------

PR_PROGRAM = os.path.join(SPECS, "census2020", "program_pr.dps")
PR_RHO = {
    # PR-Persons and PR-Units certificates: Puerto Rico's level and query shares, the US global rho
    "pr/pl94_production_topdown_pr.dps": Fraction(542, 339) ** 2,
    "pr/pl94_units_topdown_pr.dps": Fraction(3379, 12343) ** 2,
    # DHC persons, the Puerto Rico strategy (specs/dhc_persons_production_topdown_pr.dps)
    "../dhc_persons_production_topdown_pr.dps": Fraction(24811, 5000),
    # DHC housing units and households, the Puerto Rico DHCH strategy
    # (specs/dhc_households_production_topdown_pr.dps)
    "../dhc_households_production_topdown_pr.dps": Fraction(15401, 2000),
    # privacy_budget_p_level_{1,2}_pr_{state,county,tract,place} (NMFv7-2020): 2.643, x 2
    "pr/safetab_p_production_pr.dps": 2 * Fraction("2.643"),
    # privacy_budget_h_t{3,4}_level_{1,2}_pr_* (NMFv5): 4.754134, x 2
    "pr/safetab_h_production_pr.dps": 2 * Fraction("4.754134"),
    # configs/phsafe/NMFv8/pr/config.json: 1.226649 (states only), x 2 (the mechanism's own)
    "../sdhc_production_pr.dps": 2 * Fraction("1.226649"),
}
PR_EPSILON = {
    "pr/pl94_production_topdown_pr.dps": 17.1436,
    "pr/pl94_units_topdown_pr.dps": 2.4747,
    "../dhc_persons_production_topdown_pr.dps": 25.4193,
    "../dhc_households_production_topdown_pr.dps": 33.2888,
    "pr/safetab_p_production_pr.dps": 26.4126,
    "pr/safetab_h_production_pr.dps": 37.9957,
    "../sdhc_production_pr.dps": 16.7380,
}


def test_every_puerto_rico_product_has_its_pinned_figure():
    s = _summary(PR_PROGRAM)
    by = {r["spec"]: r["budget"]["rho"] for r in s["releases"]}
    assert set(by) == set(PR_RHO)
    for spec, rho in PR_RHO.items():
        assert by[spec] == pytest.approx(float(rho), rel=1e-9), spec
        eps = convert(ZCDP(by[spec]), "approx", delta=DELTA, method="cks20").result.epsilon
        assert eps == pytest.approx(PR_EPSILON[spec], abs=5e-5), spec
    assert s["total"]["rho"] == pytest.approx(float(sum(PR_RHO.values())), rel=1e-9)
    assert round(s["total"]["rho"], 4) == 32.5414 and s["bounds_hold"]
    total = convert(ZCDP(s["total"]["rho"]), "approx", delta=DELTA, method="cks20").result.epsilon
    assert f"epsilon = {float(total):.4f} by cks20" in " ".join(s["ledger"]["notes"])


# ---- bad input -----------------------------------------------------------------------------


def _census_program(
    tmp_path,
    includes,
    same_as="pl94_synthetic_state, dhc_synthetic, cef, safetab_state, sdhc_synthetic",
    stage="edited",
):
    text = read_source(US_PROGRAM)
    head, rest = text.split('\nprogram "', 1)
    inc = "\n".join(f'  include "{p}"' for p in includes)
    rest = re.sub(r"\{\n(  include [^\n]+\n)+\}", "{\n" + inc + "\n}", rest, count=1)
    rest = rest.replace(
        "same as pl94_synthetic_state, dhc_synthetic, cef, safetab_state, sdhc_synthetic", f"same as {same_as}"
    )
    rest = rest.replace("stage edited", f"stage {stage}")
    path = tmp_path / "program.dps"
    path.write_text('program "' + rest)
    return parse(path.read_text(), str(path))


def test_a_member_of_another_domain_is_refused_naming_it(tmp_path):
    acs = os.path.join(SPECS, "acs_ma_vision_rr.dps")
    pl94 = os.path.join(SPECS, "pl94_production_topdown.dps")
    with pytest.raises(SpecError) as err:
        program_summary(_census_program(tmp_path, [pl94, acs]))
    text = str(err.value)
    assert f"'{acs}' protects domain 'acs2019_ma', which the program's domain 'cef2020' does not name" in text
    assert "it is not this census" in text


def test_a_member_at_another_stage_is_refused(tmp_path):
    pl94 = os.path.join(SPECS, "pl94_production_topdown.dps")
    with pytest.raises(SpecError, match="at stage edited, not the program's stage raw"):
        program_summary(_census_program(tmp_path, [pl94], stage="raw"))


def test_a_member_without_a_unit_relation_is_refused_naming_it(tmp_path):
    """A product on group-quarters facilities: the census's tables hold no facility record."""
    text = read_source(os.path.join(SPECS, "registry", "dhc_persons.dps"))
    text = text.replace("unit persons : hamming", "unit gq_facilities : hamming").replace(
        "table: persons", "table: gq_facilities"
    )
    (tmp_path / "gq.dps").write_text(text)
    with pytest.raises(SpecError) as err:
        program_summary(_census_program(tmp_path, [str(tmp_path / "gq.dps")]))
    assert (
        "protects gq_facility records (table gq_facilities), and no table of the program's domain 'cef2020' "
        "has that unit" in str(err.value)
    )
    assert "no unit relation to the program's unit" in str(err.value)


def test_same_as_belongs_to_a_program(tmp_path):
    text = read_source(os.path.join(SPECS, "registry", "dhc_persons.dps")).replace(
        "stage edited", "stage edited\n  same as x"
    )
    path = tmp_path / "s.dps"
    path.write_text(text)
    r = CliRunner().invoke(main, ["check", str(path)])
    assert r.exit_code == 1 and "'same as' belongs in a program's domain" in r.output


def test_per_attribute_request_for_a_mechanism_without_attribute_structure():
    r = CliRunner().invoke(main, ["budget", "--per-attribute", os.path.join(SPECS, "safetab_h_production.dps")])
    assert r.exit_code == 1
    assert "safetab" in r.output and "attribute" in r.output


# ---- the report: the ledger for an oversight reader ------------------------------------------


@pytest.mark.slow  # renders the Census 2020 ledger report in three formats
def test_the_report_lays_the_ledger_out_in_html_markdown_and_json():
    from dpspec.report import render_all

    out = render_all(spec=parse(read_source(US_PROGRAM), US_PROGRAM))
    html, md, data = out["html"][1], out["markdown"][1], json.loads(out["json"][1])
    program = data["program"]
    assert data["title"] == "The 2020 Census, United States: every primary product, composed per person"
    assert [r["spec"] for r in program["ledger"]] == list(US_RHO)
    ddhc_b = program["ledger"][5]
    assert ddhc_b["own_unit"] == "change one record of table households" and ddhc_b["own_budget_text"] == "rho = 35.58"
    assert [st["what"] for st in ddhc_b["steps"]] == ["relation", "unit"] and ddhc_b["budget_text"] == "rho = 17.79"
    assert ddhc_b["epsilon_text"] == "epsilon = 56.97 at delta = 1e-10 (cks20)"
    assert program["unit"]["description"].startswith("one person (change one), with their household")
    assert program["domain"]["same_as"] == [
        "pl94_synthetic_state",
        "dhc_synthetic",
        "dhch_synthetic",
        "cef",
        "safetab_state",
        "sdhc_synthetic",
    ]
    assert {
        "statistic": "count persons by state",
        "members": ["../pl94_production_topdown.dps", "../dhc_persons_production_topdown.dps"],
    } in program["invariants"]
    assert {
        "statistic": "count units by block",
        "members": ["../pl94_units_topdown.dps", "../dhc_households_production_topdown.dps"],
    } in program["invariants"]
    for text in (html, md):
        assert "The ledger: which product spent what, on which unit, with which conversion" in text
        assert "own sensitivity: a changed household leaves at most k cells" in text
        assert "a changed person (any record, any household)" in text  # S-DHC's own change-one step
    assert "Published exactly (the composed multiverse" in html


def test_the_ledger_is_escaped(tmp_path):
    from dpspec.report import render_all

    text = read_source(os.path.join(SPECS, "registry", "dhc_persons.dps"))
    evil = text.replace(
        'spec "2020 Census Demographic and Housing Characteristics File: person tables"',
        'spec "<script>alert(1)</script> persons"',
    )
    assert evil != text
    (tmp_path / "evil.dps").write_text(evil)
    program = _census_program(tmp_path, [str(tmp_path / "evil.dps")])
    out = render_all(spec=program)
    html, md = out["html"][1], out["markdown"][1]
    assert "<script>alert(1)</script>" not in html and "&lt;script&gt;alert(1)&lt;/script&gt; persons" in html
    assert "<script>alert(1)</script>" not in md


# ---- the registry entries, re-derived from the production specs -----------------------------

REGISTRY = os.path.join(SPECS, "registry")
# each registry entry and the production spec it is re-derived from
REDERIVED = [
    ("pl94_persons", "pl94_production_topdown.dps"),
    ("dhc_persons", "dhc_persons_production_topdown.dps"),
    ("dhc_households", "dhc_households_production_topdown.dps"),
    ("ddhc_a", "safetab_p_production.dps"),
]


@pytest.mark.parametrize("entry,production", REDERIVED)
def test_registry_entry_rederived_from_its_production_spec(entry, production, tmp_path):
    """`dpspec export --registry` on the production spec, with the entry's curator notes (the
    spec's own, or the entry's import's when the spec carries none): every field equals the
    bundled entry's but the name (the spec runs on a synthetic stand-in) and rho (exact, against
    the digits it is published with)."""
    import yaml

    src = os.path.join(SPECS, production)
    text = read_source(src)
    if "\nnotes {" not in text:
        imported = read_source(os.path.join(REGISTRY, entry + ".dps"))
        start = imported.index("\nnotes {")
        text = text.rstrip("\n") + "\n" + imported[start : imported.index("\n}\n", start) + 3]
    copy = tmp_path / production
    copy.write_text(re.sub(r'"(data/[^"]+)"', lambda m: '"' + os.path.join(SPECS, m.group(1)) + '"', text))
    out = tmp_path / "entry.yaml"
    r = CliRunner().invoke(main, ["export", "--registry", str(copy), "-o", str(out)])
    assert r.exit_code == 0, r.output
    exported = dict(_fields(yaml.safe_load(out.read_text(encoding="utf-8"))))
    bundled = dict(_fields(yaml.safe_load(open(os.path.join(REGISTRY, entry + ".yaml"), encoding="utf-8"))))
    assert set(exported) == set(bundled)
    name, rho = ("deployment", "basic", "name"), ("deployment", "privacy_loss", "privacy_parameters", "rho")
    digits = len(str(bundled[rho]).split(".")[1])
    assert round(exported[rho], digits) == bundled[rho]
    for path in set(bundled) - {name, rho}:
        assert _prose(exported[path]) == _prose(bundled[path]), path


@pytest.mark.parametrize("entry,production", REDERIVED)
def test_every_registry_bound_holds_for_its_production_spec(entry, production):
    from dpspec.budget.budget_report import budget_summary

    achieved = budget_summary(parse(read_source(os.path.join(SPECS, production)), os.path.join(SPECS, production)))
    imported = parse(read_source(os.path.join(REGISTRY, entry + ".dps")), os.path.join(REGISTRY, entry + ".dps"))
    assert achieved["budget"]["premetric"] == "zcdp" and imported.budgets
    for bound in imported.budgets:
        assert bound.quantity == "rho" and bound.op == "<="
        assert achieved["budget"]["rho"] <= float(bound.value) * (1 + 1e-12), (entry, bound.describe())


def test_the_programs_premetric_block_is_the_composed_premetric(tmp_path):
    """`premetric renyi alpha 10`: every member restated in it (zCDP rho -> RDP alpha x rho)."""
    members = [os.path.join(SPECS, "pl94_production_topdown.dps"), os.path.join(SPECS, "safetab_h_production.dps")]
    _census_program(tmp_path, members)
    path = tmp_path / "program.dps"
    path.write_text(
        path.read_text().replace("premetric zcdp", "premetric renyi alpha 10").replace("budget rho <= 55.371", "")
    )
    s = program_summary(parse(path.read_text(), str(path)))
    rho = float(US_RHO["../pl94_production_topdown.dps"] + US_RHO["../safetab_h_production.dps"])
    assert s["total"]["premetric"] == "renyi" and s["total"]["epsilon"] == pytest.approx(10 * rho)


def test_without_a_composed_unit_the_programs_domain_still_names_its_members(tmp_path):
    p, s = os.path.join(SPECS, "pl94_production_topdown.dps"), os.path.join(SPECS, "safetab_p_production.dps")
    text = (
        f'program "x" {{\n  include "{p}"\n  include "{s}"\n}}\n\n'
        'domain cef2020 "c" {\n  stage edited\n  same as SAME\n  table persons unit person {\n    hhid : int 1..9\n  }\n}\n'
    )
    path = tmp_path / "program.dps"
    path.write_text(text.replace("SAME", "pl94_synthetic_state, safetab_state"))
    total = program_summary(parse(path.read_text(), str(path)))["total"]["rho"]
    assert total == pytest.approx(float(US_RHO["../pl94_production_topdown.dps"] + 4 * Fraction("4.944")))
    path.write_text(text.replace("SAME", "pl94_synthetic_state"))
    with pytest.raises(SpecError, match="protect different domains \\(cef2020, safetab_state\\)"):
        program_summary(parse(path.read_text(), str(path)))
