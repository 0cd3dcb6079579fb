"""LF, CRLF and a bare CR end a line alike: a spec saved with old Mac line ends keeps every
section after its first comment, and errors, formatting and editor positions count its lines."""

from __future__ import annotations

import os

import pytest
from click.testing import CliRunner

from dpspec.cli.main import main
from dpspec.errors import SpecError
from dpspec.language.formatter import format_spec
from dpspec.language.parser import parse

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RR = os.path.join(ROOT, "specs", "acs_ma_vision_rr.dps")
TEXT = open(RR, encoding="utf-8").read()


@pytest.mark.parametrize("eol", ["\r", "\r\n"])
def test_a_spec_with_other_line_ends_means_the_same(eol):
    lf, other = parse(TEXT, RR), parse(TEXT.replace("\n", eol), RR)
    assert other.budgets == lf.budgets and other.budgets  # the budget line after a `#` comment survives
    assert other.releases == lf.releases and other.releases
    assert format_spec(other) == format_spec(lf)


@pytest.mark.parametrize("eol", ["\r", "\r\n"])
def test_check_bounds_sees_the_budget_of_a_bare_cr_spec(tmp_path, eol):
    (tmp_path / "data").symlink_to(os.path.join(ROOT, "specs", "data"))
    spec = tmp_path / "rr.dps"
    spec.write_bytes(TEXT.replace("\n", eol).replace("epsilon <= 1.1", "epsilon <= 0.01").encode())
    res = CliRunner().invoke(main, ["check", "--bounds", str(spec)])
    assert res.exit_code == 1 and "0.01" in res.output, res.output  # the bound is read, and broken


@pytest.mark.parametrize("eol", ["\n", "\r", "\r\n"])
def test_an_error_points_at_its_line_whatever_the_line_ends(eol):
    broken = TEXT.replace("unit persons : hamming", "unit persons : hamming ]")
    line = broken[: broken.index("hamming ]")].count("\n") + 1
    with pytest.raises(SpecError) as err:
        parse(broken.replace("\n", eol), RR)
    shown = str(err.value)
    assert f":{line}:" in shown and "    unit persons : hamming ]\n" in shown, shown


def test_only_line_ends_split_lines_in_an_excerpt():
    """A form feed or U+2028 inside a title is text to the grammar, so no excerpt splits at it."""
    broken = TEXT.replace('spec "', 'spec "a\u2028b\x0cc ', 1).replace(
        "unit persons : hamming", "unit persons : hamming ]"
    )
    line = broken[: broken.index("hamming ]")].count("\n") + 1
    with pytest.raises(SpecError) as err:
        parse(broken, RR)
    assert f":{line}:" in str(err.value) and "    unit persons : hamming ]\n" in str(err.value), str(err.value)


def test_the_language_server_reads_a_bare_cr_document_by_its_lines():
    from dpspec.lsp import document

    from dpspec import line_ends

    text = TEXT.replace("unit persons : hamming", "unit persons : hamming ]").replace("\n", "\r")
    problems = document.analyse(line_ends.normal(text), RR).problems
    line = TEXT[: TEXT.index("unit persons")].count("\n")
    assert [p.line for p in problems] == [line], problems
