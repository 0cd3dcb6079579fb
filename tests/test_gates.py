"""Gates a pipeline relies on fail when they should (issue 42): `check` computes the declared
bounds, `compile` stops on a critical finding unless told otherwise (and the reports say so), and
`sweep` marks an exceeded point on the terminal. Each test below failed on the code before."""

from __future__ import annotations

import json
import re

from click.testing import CliRunner

from dpspec.cli.main import main
from tests.conftest import SMALL_SPEC

OVERSPENT = SMALL_SPEC.replace("p: 3/4", "p: 9/10")  # randomized response: epsilon = ln 9 = 2.197 > 1.1


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def _overspent(small_spec):
    path = small_spec.parent / "overspent.dps"
    path.write_text(OVERSPENT)
    return path


def test_check_fails_at_the_budget_line_when_a_declared_bound_does_not_hold(small_spec):
    path = _overspent(small_spec)
    result = run("check", path)
    assert result.exit_code == 1, result.output
    line = 1 + OVERSPENT.splitlines().index("budget epsilon <= 1.1")
    assert f"overspent.dps:{line}:1: error: the declared bound 'epsilon <= 1.1' does not hold" in result.stderr
    assert "2.19722" in result.stderr and ": ok" not in result.stdout
    assert run("check", small_spec).exit_code == 0  # the control: p = 3/4 gives ln 3 = 1.0986 <= 1.1


def test_check_no_bounds_skips_the_budget_and_sarif_names_the_rule(small_spec):
    path = _overspent(small_spec)
    assert run("check", "--no-bounds", path).exit_code == 0
    sarif = json.loads(run("check", "--format", "sarif", path).stdout)
    [found] = sarif["runs"][0]["results"]
    assert found["ruleId"] == "bound-exceeded"


def test_check_notes_unreadable_data_and_bounds_demands_it(tmp_path):
    """A swap's budget needs its data (the largest stratum): a spec checked before its data exists
    is not failed by default, a note says the bounds went unchecked; `--bounds` demands the data."""
    from tests.test_sweep import SWAP

    (tmp_path / "counties.csv").write_text("state,county\nA,a1\nA,a2\nB,b1\n")
    path = tmp_path / "swap.dps"
    path.write_text(SWAP.replace("release {", "budget epsilon <= 30\nrelease {"))
    result = run("check", path)
    assert result.exit_code == 0, result.output
    assert "note: the declared budget bounds were not checked" in result.stderr
    assert run("check", "--bounds", path).exit_code == 1
    assert "bounds were not checked" not in run("check", "--no-bounds", path).stderr


def test_compile_exits_1_on_a_critical_finding_and_allow_critical_says_so_in_the_reports(small_spec, tmp_path):
    stopped = run("compile", small_spec, "-o", tmp_path / "stopped", "--seed", "1")
    assert stopped.exit_code == 1 and "[critical] known-seed" in stopped.output
    allowed = run("compile", small_spec, "-o", tmp_path / "allowed", "--seed", "1", "--allow-critical")
    assert allowed.exit_code == 0, allowed.output
    assert "--allow-critical: exit 0 despite 1 critical finding(s) (known-seed)" in allowed.stderr
    report = json.loads((tmp_path / "allowed" / "report.json").read_text())
    assert report["gate"]["allowed_critical"] == ["known-seed"]
    assert report["verdict"]["level"] == "none"  # a known seed voids the noise
    html = (tmp_path / "allowed" / "report.html").read_text()
    assert "Compiled with <code>--allow-critical</code>" in html and "known-seed" in html
    assert "Compiled with `--allow-critical`" in (tmp_path / "allowed" / "report.md").read_text()
    plain = json.loads((tmp_path / "stopped" / "report.json").read_text())
    assert plain["gate"]["allowed_critical"] == []


def test_allow_critical_never_passes_an_exceeded_bound(small_spec, tmp_path):
    result = run("compile", _overspent(small_spec), "-o", tmp_path / "out", "--allow-critical")
    assert result.exit_code == 1 and "EXCEEDED" in result.output


def test_sweep_marks_an_exceeded_point_on_the_terminal(small_spec, tmp_path):
    result = run("sweep", small_spec, "--vary", "p=3/4,9/10", "-o", tmp_path / "sweep")
    assert result.exit_code == 0, result.output
    lines = {
        m.group(1): line for line in result.stdout.splitlines() if (m := re.match(r"point \d+ \(p = ([^)]*)\)", line))
    }
    assert len(lines) == 2, result.stdout
    exceeded = next(line for value, line in lines.items() if value.startswith(("9/10", "0.9")))
    kept = next(line for value, line in lines.items() if value.startswith(("3/4", "0.75")))
    assert "[ok]" not in exceeded and "EXCEEDED" in exceeded
    assert kept.endswith("[ok]")
