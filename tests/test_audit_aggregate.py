"""The audit on the aggregate mechanism (tests/audit_cases/staff_pay.dps): clipping bounds read off
the data, one query's share quoted as the total, and a finer unit fire with their numbers; the
honest spec stays silent on the first two."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

import dpspec
from dpspec.audit import run_audit
from dpspec.language.parser import parse

CASES = Path(__file__).parent / "audit_cases"
# the confidential extremes of staff_pay.csv's pay column (the case's own made-up data)
PAY_MIN, PAY_MAX = 22, 178


def load(*replacements):
    path = CASES / "staff_pay.dps"
    text = path.read_text()
    for old, new in replacements:
        assert old in text, old
        text = text.replace(old, new)
    return parse(text, str(path))


def fired(findings, rule_id):
    return [f for f in findings if f.rule == rule_id]


def test_the_case_data_has_the_extremes_the_tests_use():
    import pandas as pd

    pay = pd.read_csv(CASES / "staff_pay.csv")["pay"]
    assert (pay.min(), pay.max()) == (PAY_MIN, PAY_MAX)


def test_honest_bounds_and_a_total_budget_are_silent():
    findings = run_audit(load())
    assert not fired(findings, "clipping-from-data") and not fired(findings, "per-query-budget")


def test_bounds_equal_to_the_datas_min_and_max_are_flagged():
    spec = load(("bounds: [10, 200]", f"bounds: [{PAY_MIN}, {PAY_MAX}]"))
    (f,) = fired(run_audit(spec), "clipping-from-data")
    assert f.severity == "warning" and f.evidence["query"] == "mean_pay"
    assert f.evidence["ends_from_data"] == ["low", "high"]
    assert f"clips staff.pay to [{PAY_MIN}, {PAY_MAX}]" in f.message and "smallest and largest values" in f.message


def test_one_end_from_the_data_and_the_other_at_the_declared_limit_is_flagged():
    spec = load(("bounds: [10, 200]", f"bounds: [0, {PAY_MAX}]"))
    (f,) = fired(run_audit(spec), "clipping-from-data")
    assert f.evidence["ends_from_data"] == ["high"] and f.evidence["ends_at_declared_limits"] == ["low"]


@pytest.mark.parametrize("bounds", ["[0, 500]", f"[{PAY_MIN}, 200]", f"[10, {PAY_MAX + 1}]"])
def test_the_declared_range_or_a_single_coincidence_is_silent(bounds):
    # the column's declared range is public; one end at the data's extreme and the other at a
    # declared figure that is neither the data's nor the domain's is not evidence enough
    spec = load(("bounds: [10, 200]", f"bounds: {bounds}"))
    assert not fired(run_audit(spec), "clipping-from-data")


def test_a_compiled_release_is_judged_from_its_run_without_reading_the_data_again():
    spec = load(("bounds: [10, 200]", f"bounds: [{PAY_MIN}, {PAY_MAX}]"))
    result = dpspec.compile(spec, seed=3)
    assert result.release.internal["observed_ranges"] == {"staff.pay": (PAY_MIN, PAY_MAX)}
    assert fired(result.findings, "clipping-from-data")
    honest = dpspec.compile(load(), seed=3)
    assert not fired(honest.findings, "clipping-from-data")


def test_a_title_quoting_one_querys_share_is_flagged_with_the_total():
    spec = load(('spec "Staff pay by office"', 'spec "Staff pay by office at epsilon 0.5"'))
    (f,) = fired(run_audit(spec), "per-query-budget")
    assert f.evidence["stated"] == 0.5 and f.evidence["total"] == pytest.approx(1.0)
    assert sorted(f.evidence["matches"]) == ["headcount", "mean_pay"]
    assert "understates the loss 2-fold" in f.message


def test_a_budget_bound_at_one_querys_share_is_flagged_beside_the_unmet_bound():
    spec = load(
        ("budget epsilon <= 1", "budget epsilon <= 0.25"),
        ("      statistic: count\n", "      statistic: count\n      share: 1/4\n"),
        ("      bounds: [10, 200]\n", "      bounds: [10, 200]\n      share: 3/4\n"),
    )
    findings = run_audit(spec)
    (f,) = fired(findings, "per-query-budget")
    assert f.evidence["matches"] == ["headcount"] and "4-fold" in f.message
    assert fired(findings, "bound-not-met")  # the ledger refuses the bound too; this rule says why it looks right


def test_a_figure_equal_to_the_total_or_to_no_share_is_silent():
    assert not fired(
        run_audit(load(('spec "Staff pay by office"', 'spec "Staff pay at epsilon 1"'))), "per-query-budget"
    )
    assert not fired(
        run_audit(load(('spec "Staff pay by office"', 'spec "Staff pay at epsilon 0.3"'))), "per-query-budget"
    )
    one = load(
        ("    mean_pay: {\n      statistic: mean\n      column: pay\n      bounds: [10, 200]\n    }\n", ""),
        ('spec "Staff pay by office"', 'spec "Staff pay at epsilon 1"'),
    )
    assert not fired(run_audit(one), "per-query-budget")  # one query: its share is the total


def test_the_existing_finer_unit_rule_gives_the_teams_budget_by_group_privacy():
    (f,) = [x for x in fired(run_audit(load()), "finer-unit") if "coarser" in x.evidence]
    assert f.evidence["coarser"] == "teams" and f.evidence["k"] == 12
    assert f.evidence["group_budget"].epsilon == pytest.approx(12.0)
    assert f.severity == "info"  # a team is not a person: the employee, the protected unit, is
    assert math.isclose(float(f.evidence["budget"].epsilon), 1.0)
