"""Randomized response's report says why its estimate can be negative (or above 1)."""

from __future__ import annotations

import json
import os

from click.testing import CliRunner

from dpspec.cli.main import main
from dpspec_rr.report import TITLE, explanation
from tests.conftest import ROOT


def test_a_negative_estimate_is_explained_not_hidden():
    text = explanation(0.75, {"estimate": -0.021, "reported_proportion": 0.2395, "standard_error": 0.01})
    assert text["data"]["outside_0_1"] is True
    assert any("estimate is then negative" in s for s in text["sentences"])
    assert "estimate = -0.0210 (standard error 0.0100), outside the range 0 to 1" in text["sentences"][-1]


def test_an_estimate_inside_the_range_says_so():
    text = explanation(0.75, {"estimate": 0.3, "reported_proportion": 0.4, "standard_error": 0.01})
    assert text["data"]["outside_0_1"] is False and text["sentences"][-1].endswith("within 0 to 1.")


def test_the_compiled_report_carries_the_section(tmp_path):
    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["compile", os.path.join(ROOT, "specs", "acs_ma_vision_rr.dps"), "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert TITLE in (out / "report.md").read_text()
    report = json.loads((out / "report.json").read_text())
    assert TITLE in json.dumps(report)
