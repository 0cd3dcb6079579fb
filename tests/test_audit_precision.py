"""Audit precision on domains the built-in examples never saw (tests/audit_cases/): each rule
fires with the right numbers where it should and stays silent on honest variations."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from dpspec import ir
from dpspec.audit import run_audit
from dpspec.budget import BudgetStatement, PureDP, ZCDP
from dpspec.errors import DataError
from dpspec.language.formatter import format_spec
from dpspec.budget.ledger import build
from dpspec.contract.mechanism import NativeFlavor
from dpspec.language.parser import parse

CASES = Path(__file__).parent / "audit_cases"
AUDIT = Path(__file__).resolve().parents[1] / "specs" / "audit"


def load(name: str, *replacements) -> ir.Spec:
    path = CASES / f"{name}.dps"
    text = path.read_text()
    for old, new in replacements:
        assert old in text, old
        text = text.replace(old, new)
    return parse(text, str(path))


def fired(findings, rule_id):
    if rule_id == "linked-unit":  # finer-unit's findings about an entity the domain links the unit to
        return [f for f in findings if f.rule == "finer-unit" and "coarser" in f.evidence]
    return [f for f in findings if f.rule == rule_id]


# ---- linked units: visits in patients, edges of users, employees in firms --------------------


def test_a_visit_level_unit_gives_the_patient_budget_by_group_privacy():
    (f,) = fired(run_audit(load("hospital_visits")), "linked-unit")
    assert f.severity == "warning"  # the patient is the person
    assert f.evidence["coarser"] == "patients" and f.evidence["k"] == 30
    # the achieved ln 3 per visit (p = 3/4), 30 ln 3 = 32.96 per patient
    assert f.evidence["group_budget"].epsilon == pytest.approx(30 * math.log(3))
    assert "not a person's protection" in f.message and "32.96" in f.message


def test_an_edge_level_zcdp_unit_scales_by_k_squared():
    (f,) = fired(run_audit(load("social_network")), "linked-unit")
    # ln 3 change-one as zCDP is (ln 3)^2 / 2; `count edges` fixes the size, so per add/remove edge
    # it is a quarter of that; a user of 50 edges: 50^2 times
    assert f.evidence["k"] == 50
    assert f.evidence["group_budget"].rho == pytest.approx(2500 * math.log(3) ** 2 / 8)


def test_an_unbounded_link_says_no_figure_follows_and_how_to_get_one():
    (f,) = fired(run_audit(load("business_register")), "linked-unit")
    assert f.severity == "info"  # the employee is the person; the firm is not
    assert f.evidence["k"] is None and "'in firms by firm_id at most K'" in f.message


def test_a_coarser_unit_or_an_unlinked_unit_is_silent():
    coarser = load(
        "hospital_visits",
        ("unit visits : hamming", "unit patients : hamming"),
        ("  count visits\n", "  count patients\n"),
    )
    assert not fired(run_audit(coarser), "linked-unit")
    assert not fired(run_audit(load("school_survey")), "linked-unit")


def test_the_link_bound_drives_the_ledger_group_step():
    spec = load("hospital_visits", ("unit visits : hamming", "unit patients : hamming"))
    ledger = build(spec, NativeFlavor("visits", "hamming", "pure"), BudgetStatement(PureDP(math.log(3))))
    assert ledger.declared.epsilon == pytest.approx(30 * math.log(3))
    assert [s.what for s in ledger.steps] == ["unit"]


def test_the_link_bound_is_parsed_formatted_and_checked_against_data(tmp_path):
    spec = load("hospital_visits")
    assert spec.domain.table("visits").link_bound == 30
    assert "unit visit in patients by pid at most 30 {" in format_spec(spec)
    from dpspec.check.data import _check_link_bound
    import pandas as pd

    frame = pd.DataFrame({"pid": ["1"] * 31 + ["2"], "ward": ["a"] * 32, "emergency": ["true"] * 32})
    with pytest.raises(DataError, match=r"1 patients pid value holds more than 30 visits rows.*1 \(31 rows\)"):
        _check_link_bound(spec.domain.table("visits"), frame, "visits.csv")
    _check_link_bound(spec.domain.table("visits"), frame.iloc[1:], "visits.csv")  # 30 rows: fine


# ---- identifiers in invariants ------------------------------------------------------------


def test_an_invariant_by_an_identifier_is_critical():
    (f,) = [
        x
        for x in fired(run_audit(load("hospital_visits_by_patient")), "fine-invariants")
        if "identifier_columns" in x.evidence
    ]
    assert f.severity == "critical" and f.evidence["identifier_columns"] == ["pid"]
    assert f.evidence["origin"] == "declared" and "links to 'patients'" in f.message


def test_a_swap_holding_an_identifier_induces_the_invariant_silently():
    found = [
        x for x in fired(run_audit(load("business_register")), "fine-invariants") if "identifier_columns" in x.evidence
    ]
    assert found and all(f.severity == "critical" and f.evidence["origin"] == "induced" for f in found)
    assert {f.evidence["mechanism"] for f in found} == {"swap"}
    assert all(f.evidence["identifier_columns"] == ["firm_id"] for f in found)


def test_identifier_names_without_a_link_count_and_ordinary_columns_do_not():
    by_name = load(
        "school_survey",
        ("    bullied  : bool", "    bullied  : bool\n    student_id : int 1..9999"),
        ("count students by school", "count students by student_id"),
    )
    (f,) = [x for x in fired(run_audit(by_name), "fine-invariants") if "identifier_columns" in x.evidence]
    assert f.evidence["identifier_columns"] == ["student_id"] and "named like an identifier" in f.message
    # a count by school or by ward is not by an identifier
    assert not [x for x in fired(run_audit(load("school_survey")), "fine-invariants") if x.severity == "critical"]
    assert not fired(run_audit(load("hospital_visits")), "fine-invariants")


# ---- redenomination: only when a quote looks comparable or smaller and protects no more -------


def test_equal_budgets_in_one_currency_are_silent():
    spec = load("hospital_visits")
    assert not fired(run_audit(spec, baseline=spec), "redenomination")


def test_a_reformatted_reordered_copy_is_silent_on_every_baseline_rule():
    spec = load("hospital_visits")
    text = format_spec(spec)
    # reorder the domain's two tables and reformat: the same release
    a, b = text.index("  table patients"), text.index("  table visits")
    end = text.index("  }\n", b) + 4
    reordered = text[:a] + text[b:end] + text[a:b] + text[end:]
    copy = parse(reordered, str(CASES / "copy.dps"))
    findings = run_audit(copy, baseline=spec)
    rules = {f.rule for f in findings}
    assert not rules & {"narrower-domain", "added-invariants", "redenomination"}
    # the baseline adds nothing: the same findings as the spec audited alone
    alone = run_audit(spec)
    assert sorted((f.rule, f.severity, f.message) for f in findings) == sorted(
        (f.rule, f.severity, f.message) for f in alone
    )


def test_a_broader_domain_or_coarser_invariants_are_silent():
    base = load("hospital_visits")
    broader = load("hospital_visits", ("    ward      : {a, b, c}", "    ward      : {a, b, c, d}"))
    coarser = load("hospital_visits_by_patient", ("count visits by pid", "count visits"))
    for spec in (broader, coarser):
        rules = {f.rule for f in run_audit(spec, baseline=load("hospital_visits_by_patient"))}
        assert not rules & {"narrower-domain", "added-invariants", "redenomination"}, rules
    assert not {f.rule for f in run_audit(broader, baseline=base)} & {"narrower-domain"}


def test_a_quote_that_looks_larger_for_the_same_protection_is_silent():
    # pure 1.1 per visit restated as rho = 1.1^2 / 2 = 0.605: smaller-looking, same protection -> warn
    zcdp = load(
        "hospital_visits", ("premetric pure", "premetric zcdp"), ("budget epsilon <= 1.1", "budget rho <= 0.605")
    )
    (f,) = fired(run_audit(zcdp, baseline=load("hospital_visits")), "redenomination")
    assert f.evidence["verdict"] in ("same", "weaker") and "looks smaller" in f.message
    # the spec protects more (p = 0.6: rho = ln(1.5)^2 / 2 = 0.08 < 0.60) with a smaller-looking figure: silent
    stronger = load(
        "hospital_visits",
        ("premetric pure", "premetric zcdp"),
        ("p: 0.75", "p: 0.6"),
        ("budget epsilon <= 1.1", "budget rho <= 0.1"),
    )
    assert not fired(run_audit(stronger, baseline=load("hospital_visits")), "redenomination")


def test_a_stronger_currency_at_an_equal_figure_is_silent():
    # issue 30: pure DP against an approximate-DP baseline at the same epsilon, both achieving the
    # same: the numbers are equal and the spec's currency is the stronger one; nothing to warn about
    pure = load("hospital_visits")
    approx = load("hospital_visits", ("premetric pure", "premetric approximate delta 1e-10"))
    assert not fired(run_audit(pure, baseline=approx), "redenomination")
    # the other way round the protection is the same too (the mechanism achieves pure DP); the
    # weaker declared premetric has its own rule
    findings = run_audit(approx, baseline=pure)
    assert not fired(findings, "redenomination") and fired(findings, "weaker-premetric")


def test_a_comparable_figure_that_protects_less_says_so_in_words_that_fit():
    # rho <= 1.2 looks comparable to epsilon <= 1.1 (within 10%) while p = 0.8 protects less
    weaker = load(
        "hospital_visits",
        ("premetric pure", "premetric zcdp"),
        ("p: 0.75", "p: 0.8"),
        ("budget epsilon <= 1.1", "budget rho <= 1.2"),
    )
    (f,) = fired(run_audit(weaker, baseline=load("hospital_visits")), "redenomination")
    assert f.evidence["verdict"] == "weaker" and "looks comparable" in f.message
    assert "smaller-looking" not in f.message and "hides weaker protection" in f.message


def test_redenomination_says_which_is_stronger_and_by_how_much():
    # p = 0.8 gives ln 4 per visit: rho = (ln 4)^2 / 2 = 0.961 against the baseline's (ln 3)^2 / 2 = 0.603,
    # quoted as rho <= 1, which looks smaller than the baseline's epsilon <= 1.1
    weaker = load(
        "hospital_visits",
        ("premetric pure", "premetric zcdp"),
        ("p: 0.75", "p: 0.8"),
        ("budget epsilon <= 1.1", "budget rho <= 1"),
    )
    (f,) = fired(run_audit(weaker, baseline=load("hospital_visits")), "redenomination")
    assert f.evidence["verdict"] == "weaker"
    assert f.evidence["spec_budget"].rho == pytest.approx(math.log(4) ** 2 / 2)
    assert f.evidence["baseline_budget"].rho == pytest.approx(math.log(3) ** 2 / 2)
    assert "the baseline's is stronger: its rho is smaller by 0.357" in f.message


# ---- add/remove bounds on a change-one unit --------------------------------------------------


def test_an_add_remove_bound_on_a_fixed_size_universe_is_checked_exactly():
    spec = load("hospital_visits", ("budget epsilon <= 1.1", "budget epsilon <= 0.55 under symdiff"))
    ledger = build(spec, NativeFlavor("visits", "hamming", "pure"), BudgetStatement(PureDP(math.log(3))))
    (check,) = ledger.bounds
    assert check.holds and check.achieved == pytest.approx(math.log(3) / 2)
    z = load(
        "hospital_visits",
        ("premetric pure", "premetric zcdp"),
        ("budget epsilon <= 1.1", "budget rho <= 0.5 under symdiff"),
    )
    (zc,) = build(z, NativeFlavor("visits", "hamming", "zcdp"), BudgetStatement(ZCDP(1.0))).bounds
    assert zc.holds and zc.achieved == pytest.approx(0.25)


def test_without_a_count_invariant_the_add_remove_bound_cannot_be_checked():
    spec = load(
        "hospital_visits",
        ("invariants {\n  count visits\n}\n", ""),
        ("budget epsilon <= 1.1", "budget epsilon <= 0.55 under symdiff"),
    )
    (check,) = build(spec, NativeFlavor("visits", "hamming", "pure"), BudgetStatement(PureDP(math.log(3)))).bounds
    assert not check.holds and math.isnan(check.achieved) and "cannot be checked" in check.currency
    # approximate DP does not scale with the distance: no exact rule even with the invariant
    approx = load(
        "hospital_visits",
        ("premetric pure", "premetric approximate delta 1e-9"),
        ("budget epsilon <= 1.1", "budget epsilon <= 0.55 under symdiff"),
    )
    from dpspec.budget import ApproxDP

    (ac,) = build(approx, NativeFlavor("visits", "hamming", "approx"), BudgetStatement(ApproxDP(1.0, 1e-9))).bounds
    assert math.isnan(ac.achieved) and "does not scale with the distance" in ac.currency


def test_compiling_a_spec_without_data_for_the_mechanism_table_is_a_data_error():
    from dpspec.run.compiler import compile_spec

    with pytest.raises(DataError, match=r"no data for table\(s\) visits, which mechanism 'randomized_response' reads"):
        compile_spec(load("hospital_visits"))


# ---- a bound missed by less than its rounding --------------------------------------------------


@pytest.mark.slow  # audits a production spec with a bound moved by less than the rounding
def test_a_bound_missed_by_less_than_the_rounding_prints_the_digits_that_show_it():
    """'rho <= 4.96' against an achieved 4.9622 once read 'the mechanism achieves 4.96': the
    message and the report's bounds table now print 4.962."""
    from dpspec.report import render_all

    path = Path(__file__).resolve().parents[1] / "specs" / "dhc_persons_production_topdown.dps"
    text = path.read_text()
    assert "budget rho <= 4.9622" in text
    spec = parse(text.replace("budget rho <= 4.9622", "budget rho <= 4.96"), str(path))
    found = fired(run_audit(spec), "bound-not-met")
    assert len(found) == 1 and "achieves 4.962 (" in found[0].message, found
    md = render_all(spec=spec)["markdown"][1]
    assert "| rho &lt;= 4.96 | 4.962 | DOES NOT HOLD |" in md
    held = render_all(spec=parse(text, str(path)))["markdown"][1]
    assert "| rho &lt;= 4.9622 | 4.96 | holds |" in held  # a bound that holds keeps the short figure


def test_format_against_puts_the_figure_on_the_right_side_of_its_bound():
    from dpspec.budget.premetrics import format_against

    assert format_against(4.9622, 4.96, False) == "4.962"
    assert format_against(4.955, 4.955, True) == "4.955"  # rounded 4.96 would read as exceeding it
    assert format_against(4.9622, 4.9622, True) == "4.96"
    assert format_against(2.5, None, True) == "2.5"


def test_public_information_says_a_release_from_the_same_people_composes():
    """The DHC persons release is held equal to the P.L. 94-171 file, itself a TopDown release of
    the same census: the finding must say the two budgets add up, not only that the P.L. 94 file
    is taken as known."""
    path = Path(__file__).resolve().parents[1] / "specs" / "dhc_persons_production_topdown.dps"
    found = fired(run_audit(parse(path.read_text(), str(path))), "public-information")
    assert len(found) == 1
    assert "one person's total privacy loss is this budget plus that release's" in found[0].message
