"""`dpspec audit`: exit codes, JSON findings, report files and the baseline comparison."""

from __future__ import annotations

import json
import os

from click.testing import CliRunner

from dpspec.cli.main import main
from tests.conftest import SPECS

AUDIT = os.path.join(SPECS, "audit")


def audit(*args):
    return CliRunner().invoke(main, ["audit", *map(str, args)])


def test_clean_spec_exits_0():
    result = audit(os.path.join(AUDIT, "clean.dps"))
    assert result.exit_code == 0, result.output


def test_critical_finding_exits_1_and_json_is_an_object_with_its_version_and_findings():
    result = audit(os.path.join(AUDIT, "undeclared_invariants.dps"), "--json")
    assert result.exit_code == 1
    doc = json.loads(result.stdout)
    assert isinstance(doc, dict) and doc["format_version"] == "2.0"
    findings = doc["findings"]
    assert set(findings[0]) == {"rule", "severity", "message", "evidence"}
    assert findings[0]["rule"] == "undeclared-invariants" and findings[0]["severity"] == "critical"


def test_a_clean_audit_in_json_still_names_its_format():
    result = audit(os.path.join(AUDIT, "clean.dps"), "--json")
    assert result.exit_code == 0
    doc = json.loads(result.stdout)  # format 1.0 printed a bare `[]` here, with no version at all
    assert doc["format_version"] == "2.0" and doc["findings"] == [] and "known-seed" in doc["rules_run"]


def test_baseline_comparison_and_report_files(tmp_path):
    spec = os.path.join(AUDIT, "finer_unit.dps")
    baseline = os.path.join(AUDIT, "finer_unit.baseline.dps")
    result = audit(spec, "--baseline", baseline, "-o", tmp_path)
    assert "finer-unit" in result.output
    assert "against the baseline" in result.output
    for block in ("domain", "multiverse", "unit", "premetric", "budget"):
        assert f"  {block}" in result.output
    assert {"report.html", "report.md", "report.json"} <= set(os.listdir(tmp_path))
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["comparison"] is not None


def test_unparsable_spec_is_a_user_error(tmp_path):
    bad = tmp_path / "bad.dps"
    bad.write_text("spec {")
    result = audit(bad)
    assert result.exit_code == 1
    assert "error:" in result.output and "Traceback" not in result.output
