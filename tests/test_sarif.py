"""`dpspec check` and `dpspec audit` as SARIF 2.1.0 (issue 27 item 3): valid against the official
schema (vendored in tests/sarif/, no network), with rule ids, levels and locations in the spec."""

from __future__ import annotations

import functools
import glob
import json
import os

import jsonschema
import pytest
from click.testing import CliRunner

from dpspec.cli.main import main

HERE = os.path.dirname(os.path.abspath(__file__))
AUDIT = os.path.join(os.path.dirname(HERE), "specs", "audit")


@functools.lru_cache(maxsize=1)
def validator():
    with open(os.path.join(HERE, "sarif", "sarif-schema-2.1.0.json"), encoding="utf-8") as fh:
        schema = json.load(fh)
    return jsonschema.Draft4Validator(schema)


def sarif(*args, code):
    result = CliRunner().invoke(main, [str(a) for a in args])
    assert result.exit_code == code, (result.stdout, result.stderr)
    log = json.loads(result.stdout)
    errors = sorted(validator().iter_errors(log), key=str)
    assert not errors, [e.message for e in errors[:5]]
    assert log["version"] == "2.1.0"
    (run,) = log["runs"]
    rules = [r["id"] for r in run["tool"]["driver"]["rules"]]
    for r in run["results"]:
        assert rules[r["ruleIndex"]] == r["ruleId"]
    return run


def region(result):
    loc = result["locations"][0]["physicalLocation"]
    return loc["artifactLocation"], loc["region"]


def test_check_locates_each_problem_with_its_rule_and_level(small_spec):
    bad = small_spec.parent / "bad.dps"
    bad.write_text(small_spec.read_text().replace("p: 3/4", "p: 7/4"))  # a checker error
    broken = small_spec.parent / "broken.dps"
    broken.write_text('spec "x"\ndomain {\n')  # a syntax error
    run = sarif("check", "--format", "sarif", small_spec, bad, broken, code=1)
    by_file = {region(r)[0]["uri"].rsplit("/", 1)[-1]: r for r in run["results"]}
    assert set(by_file) == {"bad.dps", "broken.dps"}  # nothing for the clean file
    assert by_file["bad.dps"]["ruleId"] == "check-error" and by_file["bad.dps"]["level"] == "error"
    line = next(i for i, t in enumerate(bad.read_text().splitlines(), 1) if "7/4" in t)
    assert region(by_file["bad.dps"])[1]["startLine"] == line
    assert by_file["broken.dps"]["ruleId"] == "parse-error" and region(by_file["broken.dps"])[1]["startLine"] == 2
    assert run["invocations"][0]["executionSuccessful"] is True


def test_a_clean_check_is_an_empty_log(small_spec):
    assert sarif("check", "--format", "sarif", small_spec, code=0)["results"] == []


CASES = sorted(p for p in glob.glob(os.path.join(AUDIT, "*.dps")) if not p.endswith(".baseline.dps"))


@pytest.mark.parametrize("path", CASES, ids=lambda p: os.path.basename(p))
def test_audit_findings_as_sarif(path):
    baseline = path[: -len(".dps")] + ".baseline.dps"
    args = ["audit", "--format", "sarif", path] + (["--baseline", baseline] if os.path.exists(baseline) else [])
    findings = json.loads(CliRunner().invoke(main, [*args[:1], "--json", *args[3:]]).stdout)["findings"]
    code = 1 if any(f["severity"] == "critical" for f in findings) else 0
    run = sarif(*args, code=code)
    assert [(r["ruleId"], r["message"]["text"]) for r in run["results"]] == [
        (f["rule"], f["message"]) for f in findings
    ]
    level = {"critical": "error", "warning": "warning", "info": "note"}
    assert [r["level"] for r in run["results"]] == [level[f["severity"]] for f in findings]
    lines = open(path, encoding="utf-8").read().splitlines()
    for r in run["results"]:
        artifact, where = region(r)
        assert artifact["uriBaseId"] == "%SRCROOT%" and artifact["uri"].endswith(os.path.basename(path))
        assert 1 <= where["startLine"] <= len(lines)


def test_a_finding_sits_on_the_section_its_rule_judges():
    path = os.path.join(AUDIT, "undeclared_invariants.dps")
    run = sarif("audit", "--format", "sarif", path, code=1)
    hit = next(r for r in run["results"] if r["ruleId"] == "undeclared-invariants")
    line = open(path, encoding="utf-8").read().splitlines()[region(hit)[1]["startLine"] - 1]
    assert line.lstrip().startswith(("invariants", "count", "mechanism")), line
    rule = run["tool"]["driver"]["rules"][hit["ruleIndex"]]
    assert rule["defaultConfiguration"]["level"] == "error" and rule["shortDescription"]["text"]


def test_an_audit_that_fails_is_a_failed_run_not_an_empty_page(small_spec):
    small_spec.write_text(small_spec.read_text() + "\nnot a section\n")
    run = sarif("audit", "--format", "sarif", small_spec, code=1)
    assert run["invocations"][0]["executionSuccessful"] is False
    assert run["results"][0]["ruleId"] == "parse-error"


@pytest.mark.parametrize(
    "args", [["budget", "--format", "sarif"], ["show", "--format", "sarif"], ["audit", "--json", "--format", "sarif"]]
)
def test_sarif_for_a_command_without_findings_is_a_usage_error(small_spec, args):
    result = CliRunner().invoke(main, [*args, str(small_spec)])
    assert result.exit_code == 2
    assert "--format is for `dpspec check`" in result.stderr or "two formats" in result.stderr
