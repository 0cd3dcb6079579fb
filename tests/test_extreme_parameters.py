"""Legal but extreme budgets either work or are refused as the user's to fix (exit 1, saying what
range works and why), never an internal error: the Wasserstein mechanisms at epsilon 1000 and
1e-20, TopDown at rho 1000 and 1e-40."""
from __future__ import annotations

import os
import shutil

import pytest
from click.testing import CliRunner

from dpspec.cli.main import main

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SPECS = os.path.join(ROOT, "specs")


def _spec(tmp_path, name, old, new, bound_old, bound_new):
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "data").symlink_to(os.path.join(SPECS, "data"))
    shutil.copytree(os.path.join(SPECS, "pa_covid"), tmp_path / "in" / "pa_covid")
    text = open(os.path.join(SPECS, name), encoding="utf-8").read()
    assert old in text and bound_old in text
    path = tmp_path / "in" / name
    path.write_text(text.replace(old, new).replace(bound_old, bound_new), encoding="utf-8")
    return path


CASES = [("pa_covid/wasserstein_naive_low_privacy.dps", "  epsilon: 10", "epsilon <= 10", value, "epsilon <= 2000")
         for value in ("1000", "1e-20")] + \
        [("acs_ma_hispanic_topdown.dps", "  rho: 0.1", "rho <= 0.1", value, "rho <= 2000") for value in ("1000", "1e-40")]


@pytest.mark.parametrize("name, old, bound_old, value, bound_new", CASES)
def test_an_extreme_budget_works_or_is_the_users_to_fix(tmp_path, name, old, bound_old, value, bound_new):
    path = _spec(tmp_path, name, old, old.split(":")[0] + ": " + value, bound_old, bound_new)
    res = CliRunner().invoke(main, ["compile", str(path), "--seed", "1", "-o", str(tmp_path / "out")])
    assert res.exit_code in (0, 1) and "internal error" not in res.output, res.output
    worked = (tmp_path / "out" / "manifest.json").exists()  # (exit 1 too: a known seed is a critical finding)
    assert worked or ("beyond the 64-bit integers" in res.output and "larger budget" in res.output), res.output
    assert worked or value in ("1e-20", "1e-40"), res.output  # a large budget is simply small noise
