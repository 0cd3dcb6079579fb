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
    assert as_written({"level1": 0.008, "level2": 2.134}) == "level1 0.008, level2 2.134"
    assert as_written("3773/4097") == "3773/4097" and as_written(0.1) == "0.1"


def test_the_safetab_public_report_states_the_suppression_chance():
    text = (ROOT / "reports" / "safetab_p_production" / "report.md").read_text()
    assert "| zero\\_suppression | 0.9999 |" in text
