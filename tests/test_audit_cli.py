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


def test_critical_finding_exits_1_and_json_is_a_list_of_findings():
    result = audit(os.path.join(AUDIT, "undeclared_invariants.dps"), "--json")
    assert result.exit_code == 1
    findings = json.loads(result.output)
    assert isinstance(findings, list) and findings
    assert set(findings[0]) == {"format_version", "rule", "severity", "message", "evidence"}
    assert findings[0]["rule"] == "undeclared-invariants" and findings[0]["severity"] == "critical"


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
