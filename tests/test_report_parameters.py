"""A report's mechanism parameters show the spec's numbers as written: a budget figure may be
rounded for reading (52.82), a parameter may not (SafeTab's zero suppression chance 0.9999 is
not 1, which would mean every small total is dropped)."""

from __future__ import annotations

from dpspec.report.render import as_written, compact
from tests.safetab_helpers import ROOT


def test_parameters_keep_their_digits():
    assert compact(0.9999) == "1"  # budgets read rounded
    assert as_written(0.9999) == "0.9999"
    assert as_written([4971, 19971, 149971]) == "4,971, 19,971, 149,971"
    assert as_written({"level1": 0.008, "level2": 2.134}) == "level1: 0.008, level2: 2.134"
    assert as_written({"aian": "aian", "bypass": ["county"]}) == "aian: aian, bypass: [county]"  # was 'aian aian'
    assert as_written("3773/4097") == "3773/4097" and as_written(0.1) == "0.1"


def test_the_safetab_public_report_states_the_suppression_chance():
    text = (ROOT / "reports" / "safetab_p_production" / "report.md").read_text()
    assert "| zero\\_suppression | 0.9999 |" in text


def test_nested_parameters_read_in_the_specs_order_with_runs_of_numbers():
    """Recodes, structural zeros and passes once printed as key-sorted JSON (the block level
    before the nation, 116 ages one by one): they keep the spec's order and read '0–17'."""
    recodes = {
        "votingage": {"of": "age", "nonvoting": list(range(18)), "voting": list(range(18, 116))},
        "gq_constr_groups": {"of": "relgq", "under16": [33, 37, 38, 39, 40, 41], "under17": [23, 31, 34, 35]},
    }
    assert as_written(recodes) == (
        "votingage: {of: age; nonvoting: [0–17]; voting: [18–115]}; "
        "gq_constr_groups: {of: relgq; under16: [33, 37–41]; under17: [23, 31, 34, 35]}"
    )
    queries = {"nation": {"age_18_64_116*sex": "1/13"}, "block": {"detailed": 0.1}}
    assert as_written(queries) == "nation: {age_18_64_116 * sex: 1/13}; block: {detailed: 0.1}"
    assert as_written({"p": [{"a": [1, 2]}, [3]]}) == "p: [{a: [1, 2]}; [3]]"


def test_the_dhc_public_report_lists_recodes_in_order():
    text = (ROOT / "reports" / "dhc_persons_production_topdown" / "report.md").read_text()
    assert "votingage: \\{of: age; nonvoting: \\[0–17\\]; voting: \\[18–115\\]\\}" in text
    assert text.index("outer\\_passes | nation: ") > 0


def test_each_stated_parameter_says_what_it_is():
    """A reader of the DHC report meets opt_tol, failsafe, postprocess_only: each row carries the
    plugin's own description of the parameter (report.json: mechanism.parameter_docs)."""
    import json

    from dpspec.contract import plugins
    from dpspec.language.parser import parse, read_source
    from dpspec.report import render_all

    path = str(ROOT / "specs" / "dhc_persons_production_topdown.dps")
    out = render_all(spec=parse(read_source(path), path))
    docs = json.loads(out["json"][1])["mechanism"]["parameter_docs"]
    declared = plugins.mechanisms()["topdown"].parameters
    assert docs["failsafe"] == declared.get("failsafe").doc and docs["pass_tolerance_type"].startswith("const:")
    assert set(docs) == set(json.loads(out["json"][1])["mechanism"]["parameters"])
    assert "| rho | 4.9622 | the total zCDP budget |" in out["markdown"][1]
    assert "<td>the total zCDP budget</td>" in out["html"][1]
