"""The privacy-theatrics rules: each fires on its example in specs/audit/ and is silent on a
clean spec; findings carry the numbers; the audit runs on specs that fail the check."""

from __future__ import annotations

import json
import math
from pathlib import Path

import attrs
import pytest

from dpspec.audit import Finding, Rule, all_rules, audit, run_audit
from dpspec.audit.base import SEVERITIES, by_severity
from dpspec.check.checker import check
from dpspec.run.compiler import compile_spec
from dpspec.errors import SpecError
from dpspec.language.parser import load_text_or_path, parse

AUDIT = Path(__file__).resolve().parents[1] / "specs" / "audit"
DESIGN_RULES = (
    "finer-unit",
    "added-invariants",
    "fine-invariants",
    "undeclared-invariants",
    "weaker-premetric",
    "coarse-events",
    "narrower-domain",
    "redenomination",
    "data-dependent-design",
    "uncomposed-releases",
    "infinite-budget",
    "per-universe-budget",
    "public-information",
    "clipping-from-data",
    "per-query-budget",
)


def load(name: str):
    return load_text_or_path(str(AUDIT / f"{name}.dps"))


def variant(name: str, *replacements) -> object:
    """An example spec with text replaced, parsed as if it sat in specs/audit (for its data)."""
    path = AUDIT / f"{name}.dps"
    text = path.read_text()
    for old, new in replacements:
        assert old in text, old
        text = text.replace(old, new)
    return parse(text, str(path))


def fired(findings, rule_id) -> list[Finding]:
    return [f for f in findings if f.rule == rule_id]


# ---- registration and the Finding/Rule objects -------------------------------------------


def test_every_design_rule_is_registered_through_the_hook():
    ids = {r.id for r in all_rules()}
    assert set(DESIGN_RULES) <= ids
    for r in all_rules():
        assert r.severity in SEVERITIES and r.title and r.description


def test_finding_is_frozen_and_serializes_evidence():
    from dpspec.budget import PureDP

    f = Finding("x", "warning", "msg", {"budget": PureDP(math.inf), "delta": 0.5, "items": ("a", "b")})
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        f.message = "other"
    data = json.loads(json.dumps(f.to_json(), allow_nan=False))
    assert data["evidence"]["budget"] == {"premetric": "pure", "epsilon": "inf"}
    assert data["evidence"]["items"] == ["a", "b"]
    with pytest.raises(ValueError):
        Finding("x", "fatal", "msg")


def test_findings_are_ordered_most_severe_first():
    fs = [Finding("b", "info", "m"), Finding("a", "critical", "m"), Finding("c", "warning", "m")]
    assert [f.severity for f in by_severity(fs)] == ["critical", "warning", "info"]


def test_rules_needing_a_baseline_are_skipped_and_listed():
    outcome = audit(load("clean"))
    skipped = {rule for rule, _ in outcome.skipped}
    assert {"added-invariants", "narrower-domain"} <= skipped
    assert "finer-unit" in outcome.rules_run  # it also judges links to coarser entities alone
    assert "fine-invariants" in outcome.rules_run


# ---- the clean spec ---------------------------------------------------------------------


def test_no_rule_fires_on_the_clean_spec_alone_or_against_itself():
    clean = load("clean")
    assert run_audit(clean) == []
    assert run_audit(clean, baseline=load("clean")) == []
    result = compile_spec(clean, audit=False)
    assert run_audit(clean, result=result, baseline=clean) == []


# ---- each rule on its example ------------------------------------------------------------

EXAMPLES = [
    # rule, example, baseline, expected severity
    ("finer-unit", "finer_unit", "finer_unit.baseline", "warning"),
    ("added-invariants", "added_invariants", "added_invariants.baseline", "warning"),
    ("fine-invariants", "added_invariants", None, "warning"),
    ("undeclared-invariants", "undeclared_invariants", None, "critical"),
    ("weaker-premetric", "large_delta", None, "critical"),
    ("coarse-events", "coarse_events", None, "warning"),
    ("narrower-domain", "narrower_domain", "narrower_domain.baseline", "warning"),
    ("redenomination", "redenomination", None, "warning"),
    ("data-dependent-design", "data_dependent", None, "critical"),
    ("uncomposed-releases", "uncomposed", None, "warning"),
    ("infinite-budget", "infinite_budget", None, "critical"),
    ("per-universe-budget", "added_invariants", None, "warning"),
    ("public-information", "public_information", None, "info"),
    ("clipping-from-data", "clipping_from_data", None, "warning"),
    ("per-query-budget", "per_query_budget", None, "warning"),
]


@pytest.mark.parametrize(("rule_id", "example", "baseline", "severity"), EXAMPLES, ids=[e[0] for e in EXAMPLES])
def test_rule_fires_on_its_example_and_not_on_its_baseline(rule_id, example, baseline, severity):
    base = load(baseline) if baseline else None
    hits = fired(run_audit(load(example), baseline=base), rule_id)
    assert hits, f"{rule_id} did not fire on {example}"
    assert hits[0].severity == severity
    assert hits[0].message[0].isupper() and len(hits[0].message) > 60
    json.dumps([h.to_json() for h in hits], allow_nan=False)
    if baseline:
        assert not fired(run_audit(base, baseline=base), rule_id)


@pytest.mark.parametrize("rule_id", DESIGN_RULES)
def test_rule_is_silent_on_the_clean_spec(rule_id):
    assert not fired(run_audit(load("clean"), baseline=load("clean")), rule_id)


def test_every_design_rule_has_an_example():
    assert {e[0] for e in EXAMPLES} == set(DESIGN_RULES)


# ---- the numbers in the messages ---------------------------------------------------------


def test_finer_unit_reports_the_group_privacy_budget():
    (f,) = fired(run_audit(load("finer_unit"), baseline=load("finer_unit.baseline")), "finer-unit")
    eps = math.log(3)
    assert f.evidence["k"] == 6
    assert f.evidence["budget"].epsilon == pytest.approx(eps)
    assert f.evidence["group_budget"].epsilon == pytest.approx(6 * eps)
    assert "6.59" in f.message and "household" in f.message


def test_finer_unit_without_a_bound_says_no_group_figure_exists():
    base = variant(
        "finer_unit.baseline", ("unit households : hamming holds at most 6 persons", "unit households : hamming")
    )
    (f,) = fired(run_audit(load("finer_unit"), baseline=base, compute_budget=False), "finer-unit")
    assert f.evidence["k"] is None and "holds at most K" in f.message


def test_added_invariants_names_the_extra_statistic_and_both_budgets():
    (f,) = fired(run_audit(load("added_invariants"), baseline=load("added_invariants.baseline")), "added-invariants")
    assert f.evidence["extra_invariants"] == ["count households by block, size, tenure"]
    assert f.evidence["order"] == "finer"
    # b = 9 (block x size) against b = 37 (county x size) at p = 0.05: ln(b+1) + ln(19).
    assert f.evidence["spec_budget"].epsilon == pytest.approx(math.log(10) + math.log(19))
    assert f.evidence["baseline_budget"].epsilon == pytest.approx(math.log(38) + math.log(19))


def test_fine_invariants_is_info_when_the_finest_level_has_an_ordinary_name():
    spec = variant(
        "clean", ("invariants {\n  count persons\n}", "invariants { count persons  count households by county }")
    )
    spec = attrs.evolve(
        spec,
        domain=attrs.evolve(spec.domain, geography=attrs.evolve(spec.domain.geography, levels=("state", "county"))),
    )
    (f,) = fired(run_audit(spec, compute_budget=False), "fine-invariants")
    assert f.severity == "info" and f.evidence["invariants"] == [
        {"invariant": "count households by county", "level": "county"}
    ]


def test_undeclared_invariants_runs_on_a_spec_the_checker_rejects():
    spec = load("undeclared_invariants")
    with pytest.raises(SpecError):
        check(spec)
    outcome = audit(spec)
    (f,) = fired(outcome.findings, "undeclared-invariants")
    assert f.evidence["undeclared"] == ["count households by size, block"]
    assert "epsilon <= 7" in f.message and "infinite" in f.message
    assert outcome.check_problems


def test_undeclared_invariants_accepts_invariants_implied_through_nesting():
    # The swap induces 'count households by size, block'; a count by block, size, tenure fixes it.
    spec = variant(
        "undeclared_invariants",
        (
            "count households by county, size, tenure",
            "count households by county, size, tenure\n  count households by block, size, tenure",
        ),
    )
    assert not fired(run_audit(spec, compute_budget=False), "undeclared-invariants")


def test_weaker_premetric_compares_delta_with_one_over_n():
    (f,) = fired(run_audit(load("large_delta")), "weaker-premetric")
    assert f.evidence["n"] == 667  # the invariants publish the number of persons
    assert f.evidence["expected_records_exposed"] == pytest.approx(6.67)
    small = variant("large_delta", ("delta 0.01", "delta 1e-10"), ("with delta = 0.01", "with delta = 1e-10"))
    (g,) = fired(run_audit(small), "weaker-premetric")
    assert g.severity == "info"
    unknown = variant(
        "large_delta",
        ("invariants {\n  count persons\n}", "invariants { }"),
        ("delta 0.01", "delta 1e-5"),
        ("with delta = 0.01", "with delta = 1e-5"),
    )
    (h,) = fired(run_audit(unknown, compute_budget=False), "weaker-premetric")
    assert h.severity == "warning" and h.evidence["n"] is None


def test_weaker_premetric_reads_n_from_a_compiled_release():
    spec = load("large_delta")
    result = compile_spec(spec, audit=False)
    (f,) = fired(run_audit(spec, result=result), "weaker-premetric")
    assert f.severity == "critical" and f.evidence["n"] == 667


def test_redenomination_flags_bounds_under_another_relation_and_mixed_conversions():
    (f,) = [x for x in fired(run_audit(load("redenomination")), "redenomination") if "quoted_under" in x.evidence]
    assert {k: f.evidence[k] for k in ("bound", "quoted_under", "unit_relation")} == {
        "bound": "epsilon <= 0.55 under symdiff",
        "quoted_under": "symdiff",
        "unit_relation": "hamming",
    }
    assert f.severity == "warning" and f.evidence["restated"].epsilon == pytest.approx(1.1)
    # `count persons` fixes the size, so the add/remove figure is exact: ln 3 / 2 per add/remove step
    assert f.evidence["achieved_in_quoted_currency"] == pytest.approx(math.log(3) / 2)
    mixed = variant(
        "clean",
        ("premetric pure", "premetric zcdp"),
        (
            "budget epsilon <= 6.6",
            "budget epsilon <= 60 with delta = 1e-10 by bs16\nbudget epsilon <= 60 with delta = 1e-10 by cks20",
        ),
    )
    (g,) = fired(run_audit(mixed), "redenomination")
    assert set(g.evidence["methods"].values()) == {"bs16", "cks20"}


def test_redenomination_against_a_baseline_converts_to_one_currency():
    # rho <= 22 looks larger than epsilon <= 6.6 and is the same protection: an honest quote
    zcdp = variant("clean", ("premetric pure", "premetric zcdp"), ("budget epsilon <= 6.6", "budget rho <= 22"))
    assert not fired(run_audit(zcdp, baseline=load("clean")), "redenomination")
    # mu <= 6.6 looks like the baseline's epsilon <= 6.6; in one currency it is the same protection
    gdp = variant("clean", ("premetric pure", "premetric gdp"), ("budget epsilon <= 6.6", "budget mu <= 6.6"))
    (f,) = fired(run_audit(gdp, baseline=load("clean")), "redenomination")
    # as zCDP: the spec's stated mu^2 / 2 (no pure -> GDP rule gives an achieved mu) against the
    # baseline's achieved (6 ln 3)^2 / 2 per household
    assert f.evidence["spec_budget"].rho == pytest.approx(6.6**2 / 2)
    assert f.evidence["baseline_budget"].rho == pytest.approx((6 * math.log(3)) ** 2 / 2)
    assert f.evidence["verdict"] == "weaker" and "the baseline's is stronger" in f.message


def test_infinite_budget_and_the_exceeded_bound_at_rate_one():
    findings = run_audit(load("infinite_budget"))
    (f,) = fired(findings, "infinite-budget")
    assert f.evidence["depends_on"]["b"] == 37 and not f.evidence["budget"].is_finite
    assert fired(findings, "bound-not-met")
    assert not fired(run_audit(load("infinite_budget.baseline")), "infinite-budget")


def test_per_universe_budget_shows_the_actual_value():
    (f,) = fired(run_audit(load("added_invariants")), "per-universe-budget")
    assert f.evidence["actual"].epsilon == pytest.approx(math.log(10) + math.log(19))
    assert f.evidence["worst"] is None and "no finite worst case" in f.message


def test_uncomposed_releases_states_the_composed_total():
    (f,) = fired(run_audit(load("uncomposed")), "uncomposed-releases")
    assert f.evidence["total"].epsilon == pytest.approx(math.log(3) + math.log(4))
    assert not fired(run_audit(load("uncomposed.baseline")), "uncomposed-releases")


def test_uncomposed_releases_flags_several_outputs_without_a_bound():
    spec = variant(
        "clean",
        ("budget epsilon <= 6.6\n", ""),
        ("release {\n  output estimate\n}", "release { output estimate  output responses }"),
    )
    (f,) = fired(run_audit(spec), "uncomposed-releases")
    assert f.evidence["released"] == ["estimate", "responses"]


def test_known_seed_is_critical():
    spec = load("clean")
    result = compile_spec(spec, seed=7, audit=False)
    (f,) = fired(run_audit(spec, result=result), "known-seed")
    assert f.severity == "critical" and f.evidence == {"seeded": True} and "7" not in f.message


def test_compile_runs_the_audit():
    result = compile_spec(load("data_dependent"))
    assert [f.rule for f in result.findings] == ["data-dependent-design", "finer-unit"]


def test_a_plugin_rule_runs_beside_the_built_in_ones():
    extra = Rule("always", "info", "A test rule", lambda ctx: [Finding("always", "info", f"saw {ctx.spec.title}")])
    findings = run_audit(load("clean"), rules=[*all_rules(), extra])
    assert [f.rule for f in findings] == ["always"]


@pytest.mark.parametrize(
    "text",
    [
        'spec "empty"',
        'spec "no mechanism" domain d { table t unit u { a : bool } } unit t : hamming premetric pure budget epsilon <= 1',
        'spec "unknown mechanism" domain d { table t unit u { a : bool } } unit t : hamming premetric approximate '
        "mechanism nosuch { x: 1 } budget epsilon <= -1",
        'spec "bad parameters" domain d { table t unit u { a : bool } } unit t : hamming premetric renyi '
        "mechanism randomized_response { table: t column: nosuch p: 2 } budget epsilon <= 1",
    ],
)
def test_the_audit_never_raises_on_broken_specs(text):
    spec = parse(text)
    outcome = audit(spec, baseline=spec)
    json.dumps(outcome.to_json(), allow_nan=False)
    from dpspec.report import render_all

    assert set(render_all(spec=spec, baseline=spec)) == {"html", "markdown", "json"}


def test_the_python_api_call_survives_importing_the_audit_package():
    import dpspec
    import dpspec.audit.builtin_rules  # noqa: F401 - rebinds dpspec.audit to the subpackage

    findings = dpspec.audit(str(AUDIT / "finer_unit.dps"), baseline=str(AUDIT / "finer_unit.baseline.dps"))
    assert [f.rule for f in findings] == ["finer-unit"]
