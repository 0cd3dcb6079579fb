"""The public report reads without a glossary (issue 30): every symbol of the one-line notation
is spelled out beside it, public facts carry labels and units instead of internal keys, the
provenance names only the mechanism that ran, and conversions and sources are said in words."""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest

from dpspec.language.parser import load_text_or_path
from dpspec.report import render_all
from dpspec.run.compiler import compile_spec

ROOT = Path(__file__).resolve().parents[1]
AUDIT = ROOT / "specs" / "audit"
INTERNAL_KEYS = ("largest_stratum", "strata_of_two_or_more", "is_spec", "from_invariants", "keeps_nesting")


class _Visible(HTMLParser):
    def __init__(self):
        super().__init__()
        self.text, self._skip = [], 0

    def handle_starttag(self, tag, attrs):
        self._skip += tag in ("style", "script")

    def handle_endtag(self, tag):
        self._skip -= tag in ("style", "script")

    def handle_data(self, data):
        if not self._skip:
            self.text.append(data)


def visible(html: str) -> str:
    p = _Visible()
    p.feed(html)
    text = " ".join(" ".join(p.text).split())
    return re.sub(r" ([,.:;)])", r"\1", text)  # text split at inline tags reads as one sentence


def section(html: str, name: str) -> str:
    start = html.index(f'<section id="{name}">')
    return html[start : html.index("</section>", start)]


@pytest.fixture(scope="module")
def files():
    result = compile_spec(load_text_or_path(str(AUDIT / "added_invariants.dps")), audit=False, seed=1)
    out = render_all(result, baseline=load_text_or_path(str(AUDIT / "added_invariants.baseline.dps")))
    return {kind: text for kind, (_, text) in out.items()}


def test_every_symbol_of_the_notation_is_glossed_beside_it(files):
    model = json.loads(files["json"])
    symbols = [g["symbol"] for g in model["notation_gloss"]]
    # the glossed parts are the notation itself, in order
    assert model["notation"] == f"{symbols[0]}-DP({', '.join(symbols[1:])})"
    text = visible(section(files["html"], "notation"))
    for g in model["notation_gloss"]:
        assert g["symbol"] in text and g["meaning"] in text
    words = " ".join(g["meaning"] for g in model["notation_gloss"])
    for term in (
        "multiverse",
        "published without noise",
        "changing one household",
        "pure differential privacy",
        "smaller protects more",
    ):
        assert term in words, term
    md = files["markdown"]
    assert "Read part by part" in md and "the multiverse: only datasets that agree exactly" in md


def test_public_facts_have_labels_and_units_not_internal_keys(files):
    html, md = files["html"], files["markdown"]
    budget = visible(section(html, "budget"))
    for key in INTERNAL_KEYS:
        assert key not in budget, key
        assert key not in md.replace("\\_", "_"), key
    assert "b: households in the largest stratum" in budget
    # the stratum is named by its values, which cannot be read as a count of records
    assert "The largest stratum's match-key values (it holds the b households): block = M1a, size = 2" in budget
    assert "Strata holding at least two households" in budget
    # the alternatives are their own table with labelled columns, not a clipped nested one
    assert 'class="nested"' not in section(html, "budget")
    assert "b (households in the largest stratum)" in budget and "published by the invariants" in budget
    # the JSON keeps the raw facts (a contract) and adds the labelled ones
    model = json.loads(files["json"])
    assert model["public_facts"]["largest_stratum"] == {"block": "M1a", "size": 2}
    assert {f["key"] for f in model["public_facts_shown"]} == set(model["public_facts"])


def test_findings_name_public_facts_in_words(files):
    model = json.loads(files["json"])
    (f,) = [f for f in model["findings"] if f["rule"] == "per-universe-budget"]
    assert "largest_stratum" not in f["message"]
    assert "b = 9 (households in the largest stratum" in f["message"] and "block = M1a, size = 2" in f["message"]


def test_provenance_lists_only_the_mechanism_that_ran(files):
    prov = visible(section(files["html"], "provenance"))
    assert "Mechanism that ran swap 1.0.0" in prov
    for other in ("topdown", "safetab", "randomized_response", "declared 1.0.0"):
        assert other not in prov, other
    md_prov = files["markdown"][files["markdown"].index("## Provenance") :]
    assert md_prov.count("Mechanism") == 1 and "Mechanism that ran: swap" in md_prov
    model = json.loads(files["json"])
    assert model["provenance"]["mechanism_plugin"]["name"] == "swap"
    assert [p["name"] for p in model["provenance"]["plugins"] if p["ran"]] == ["swap"]  # the list stays (additive)


def test_a_report_without_a_run_says_the_mechanism_did_not_run():
    spec = load_text_or_path(str(AUDIT / "added_invariants.dps"))
    html = render_all(spec=spec)["html"][1]
    assert "Mechanism the spec names (not run) swap" in visible(section(html, "provenance"))


def test_conversions_and_the_theorem_are_said_in_words(files):
    budget = visible(section(files["html"], "budget"))
    assert (
        "pure-zcdp, then bs16: pure epsilon to zCDP rho (rho = epsilon²/2); then zCDP rho to (epsilon, delta) by Bun & Steinke 2016"
        in budget
    )
    assert "delta (δ) is the probability that the epsilon bound may fail" in budget
    assert "pure DP (MULT), changing one record of table households (hamming)" in budget
    # the theorem's symbols: what ln and o are, which paper, which p
    assert re.search(
        r"Theorem II\.1 of Bailie, Gong & Meng .*where ln is the natural logarithm and o = p/\(1-p\) the odds "
        r"that a unit is selected for swapping; here p = 0\.05",
        budget,
    )
    plain = visible(section(files["html"], "plain-words"))
    assert "from the ledger" not in plain and "achieved by the mechanism, as dpspec computes it" in plain
    assert "its power is the share of true cases it detects" in plain
    # the bounds' currency in words, not the ledger's shorthand
    assert "pure DP (MULT), change one unit (hamming)" in budget and "pure, hamming" not in budget


def test_findings_say_what_their_rule_catches_and_what_severities_mean(files):
    findings = visible(section(files["html"], "findings"))
    assert "Critical: the stated protection is false or not met" in findings
    model = json.loads(files["json"])
    (f,) = [f for f in model["findings"] if f["rule"] == "added-invariants"]
    assert f["title"] and f["title"] in findings
    assert f"({f['rule']}) **{f['title']}.**" in files["markdown"].replace("\\-", "-")


def test_the_budget_says_what_a_flavor_is_and_the_swap_table_has_words_for_its_symbols(files):
    budget = visible(section(files["html"], "budget"))
    assert "A budget is a number in a currency: its flavor, the four other building blocks" in budget
    html = files["html"]
    assert "eps at p" not in html and "epsilon at swap rate p = 0.05" in html
    assert "b (units in the largest stratum)" in html


def test_a_bound_quoted_in_another_currency_is_spelled_out():
    from dpspec.language import describe

    spec = load_text_or_path(str(AUDIT / "redenomination.dps"))
    answer = dict((q, a) for q, _, a in describe.five_questions(spec))["How much protection?"]
    assert answer == (
        "epsilon <= 0.55 under symdiff (quoted for adding or removing one unit; changing a unit "
        "is a removal and an addition)"
    )
    where = dict(describe.notation_glossary(spec))["D[#persons]"]
    assert "#T is the number of rows of table T" in where and "×" not in where


def test_noise_notes_say_what_sensitivity_and_their_symbols_are():
    """TopDown's and SafeTab's budget notes gloss the L2 sensitivity and their symbols in words."""
    from dpspec.check.checker import check

    for name, words in (
        (
            "acs_national_topdown",
            ("the sum of the squared changes one record can make", "rho_q being that query's share of rho"),
        ),
        (
            "safetab_p_production",
            (
                "how much one record can change the counts",
                "rho_stage being the stage's share of rho",
                "the most race codes of one record",
            ),
        ),
    ):
        spec = load_text_or_path(str(ROOT / "specs" / f"{name}.dps"))
        checked = check(spec)
        notes = " ".join(checked.mechanism.budget(spec, checked.params, {}).notes)
        for w in words:
            assert w in notes, (name, w)


def test_mechanism_descriptions_gloss_their_terms(files):
    mech = visible(section(files["html"], "mechanism"))
    assert "derangement (a shuffle in which no selected unit keeps its own values)" in mech
    from dpspec.contract import plugins

    described = {m["name"]: m["description"] for m in plugins.describe_mechanisms()}
    assert "discrete Gaussian (bell-shaped)" in described["topdown"] and "least squares" in described["topdown"]
    assert "discrete Gaussian (bell-shaped)" in described["safetab"]


def test_a_program_says_how_its_budgets_compose_and_quotes_each_in_words():
    spec = load_text_or_path(str(ROOT / "specs" / "acs_program" / "program.dps"))
    files = render_all(spec=spec)
    program = visible(section(files["html"][1], "program"))
    assert "Budgets of several releases of the same data add up (sequential composition)" in program
    assert "count once, at the largest of them (parallel composition)" in program
    assert "premetric pure" not in program and "ACS 2019 MA: hearing difficulty epsilon = 0.693 states" in program
    assert (
        "| ma\\_hearing\\_rr.dps | ACS 2019 MA: hearing difficulty | epsilon = 0.693 | states |" in files["markdown"][1]
    )


def test_the_summary_uses_no_term_before_it_is_explained(files):
    summary = files["html"][
        files["html"].index('<div class="summary"') : files["html"].index('<section id="questions">')
    ]
    text = visible(summary)
    assert "flavor" not in text and "Budget achieved, in the spec's terms" in text
    assert "Budget achieved, in the spec's terms: epsilon = 5.25" in files["markdown"]


def test_the_multiverse_answer_is_sentences_when_it_has_no_invariants_but_public_information():
    """'(no invariants)' ended without a full stop, so 'Conditioned on ...' ran on into it."""
    from dpspec.language import describe

    spec = load_text_or_path(str(ROOT / "specs" / "pa_covid" / "postprocessing_high_privacy.dps"))
    where = dict((q, a) for q, _, a in describe.five_questions(spec))["Where does protection extend?"]
    assert where.startswith("among all datasets of the domain (no invariants). Conditioned on public information: ")


def test_show_reads_a_production_topdown_spec_in_a_line_a_reviewer_can_read():
    """The DHC persons spec's mechanism line was 21,000 characters of Python dicts: blocks now
    read by their entries (shares in full), the IR whole being `dpspec show --json`'s."""
    from dpspec.language import describe

    spec = load_text_or_path(str(ROOT / "specs" / "dhc_persons_production_topdown_pr.dps"))
    line = next(t for t in describe.describe_spec(spec).splitlines() if t.startswith("mechanism topdown:"))
    assert len(line) < 2000
    assert "levels: {state: 6571/24811, county: 2560/24811," in line
    assert "recodes: {age_18_64_116, age_38_groups," in line and ", ... 3 more}" in line
    assert "failsafe: {minimal_schema: ['relgq']}" in line and "rho: 4.9622" in line


@pytest.mark.slow  # compiles and reports every member of a program
def test_a_program_report_states_the_composed_guarantee_not_its_first_members():
    """The census program's one-line form and five questions once showed its first member's
    domain, invariants and bound ('rho <= 2.56' under a composed total of 45.49 and a declared
    'rho <= 55.371'): they now state the program's own domain and bound and every member's
    invariants."""
    path = ROOT / "specs" / "census2020" / "program.dps"
    out = render_all(spec=load_text_or_path(str(path)))
    data = json.loads(out["json"][1])
    answers = {q["block"]: q["answer"] for q in data["questions"]}
    assert answers["budget"] == "rho <= 55.371"
    assert answers["domain"].startswith("2020 Census Edited File")
    assert "count units by block, gqhh_vect" in answers["multiverse"]  # the DHC households member's
    assert "count persons by state" in answers["multiverse"]  # the P.L. 94 member's
    assert data["notation"].startswith("45.49-DP(X_edited(cef2020), D[")


def test_who_is_protected_marks_a_public_table_as_not_protected():
    """The DHC persons domain holds the P.L. 94-171 table the release is held equal to: it is
    public information, not data this spec protects, and the answer says so."""
    path = ROOT / "specs" / "dhc_persons_production_topdown.dps"
    data = json.loads(render_all(spec=load_text_or_path(str(path)))["json"][1])
    who = next(q["answer"] for q in data["questions"] if q["block"] == "domain")
    assert "pl94 (11 columns, one row per person; public: a release taken as known, not protected here)" in who
    assert "persons (13 columns, one row per person)," in who
