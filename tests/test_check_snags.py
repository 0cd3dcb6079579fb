"""`dpspec check` says before a run what the run would find: a missing data file (a warning at
its `data` line) and a release item the mechanism cannot produce (an error at the item)."""

from __future__ import annotations

import shutil
from pathlib import Path

from click.testing import CliRunner

from dpspec.cli.main import main
from dpspec.lsp.document import analyse
from tests.conftest import ROOT as _ROOT

ROOT = Path(_ROOT)


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def test_a_missing_data_file_is_a_warning_at_its_data_line(small_spec):
    (small_spec.parent / "people.csv").unlink()
    result = run("check", small_spec)
    assert result.exit_code == 0, result.output
    assert "small.dps:13:1: warning: the data file 'people.csv' of table 'people' does not exist" in result.output
    assert result.output.strip().endswith("small.dps: ok")


def test_a_present_data_file_gives_no_warning(small_spec):
    result = run("check", small_spec)
    assert "warning" not in result.output


def test_the_language_server_shows_the_missing_data_file(small_spec):
    (small_spec.parent / "people.csv").unlink()
    problems = analyse(small_spec.read_text(), str(small_spec)).problems
    assert [(p.line, p.severity) for p in problems if "does not exist" in p.message] == [(12, "warning")]


def _rr_spec(tmp_path, extra: str):
    folder = tmp_path / "in"
    shutil.copytree(ROOT / "specs" / "data" / "acs", folder / "data" / "acs")
    text = (ROOT / "specs" / "acs_ma_vision_rr.dps").read_text()
    assert "release {\n" in text
    path = folder / "rr.dps"
    path.write_text(text.replace("release {\n", "release {\n" + extra, 1))
    return path


def test_a_release_item_the_mechanism_cannot_produce_is_an_error_at_the_item(tmp_path):
    path = _rr_spec(tmp_path, "  microdata persons\n")
    line = path.read_text().splitlines().index("  microdata persons") + 1
    result = run("check", path)
    assert result.exit_code == 1
    assert (
        f"rr.dps:{line}:3: error: the spec releases microdata 'persons' but mechanism 'randomized_response' "
        "produces no microdata; release one of its outputs instead (output estimate, output responses)"
    ) in result.output


def test_a_count_of_microdata_the_mechanism_does_not_produce_is_an_error(tmp_path):
    result = run("check", _rr_spec(tmp_path, "  count persons by DEYE\n"))
    assert result.exit_code == 1
    assert "a count of persons microdata, but mechanism 'randomized_response' produces no microdata" in result.output


def test_microdata_the_mechanism_produces_still_checks():
    result = run("check", ROOT / "specs" / "ma1940_swap.dps")
    assert result.exit_code == 0 and "error" not in result.output, result.output
