"""Text that reaches a terminal carries no live control character: a title holding `ESC[8m`
(conceal), `ESC[2J` (clear the screen) or `ESC]0;` (window title) is shown as markers by every
command, so the findings printed after it stay visible; a file's content piped on stays exact."""

from __future__ import annotations

import os

import pytest
from click.testing import CliRunner

from dpspec.cli.main import main
from dpspec.report.bidi import terminal_text

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RR = os.path.join(ROOT, "specs", "acs_ma_vision_rr.dps")
ESCAPES = [
    "\x1b[8m",
    "\x1b[2J",
    "\x1b]0;owned\x07",
    "\x9b31m",
    "\x08",
    "\u202e",
]  # (a CR ends the line: not in a title)


def test_terminal_text_marks_every_control_and_keeps_text_tabs_and_newlines():
    assert terminal_text("a\x1b[2Jb") == "a[U+001B][2Jb"
    assert terminal_text("\x9b\x7f\u202e\r") == "[U+009B][U+007F][U+202E][U+000D]"
    assert terminal_text("line one\n\tline two é ü 漢") == "line one\n\tline two é ü 漢"


@pytest.fixture
def hostile_spec(tmp_path):
    (tmp_path / "data").symlink_to(os.path.join(ROOT, "specs", "data"))
    spec = tmp_path / "rr.dps"
    text = open(RR, encoding="utf-8").read()
    start = text.index('spec "') + len('spec "')
    spec.write_text(text[:start] + "".join(ESCAPES) + " " + text[start:], encoding="utf-8")
    return spec


@pytest.mark.parametrize("command", [["show"], ["budget"], ["audit"], ["check", "--bounds"]])
def test_no_command_prints_a_control_character_from_a_spec(hostile_spec, command):
    res = CliRunner().invoke(main, [*command, str(hostile_spec)])
    out = res.output  # stdout and stderr
    assert res.exit_code in (0, 1) and "error" not in out, out
    assert not any(ch in out for ch in "\x1b\x9b\x07\r\x08\u202e"), repr(out)
    if command[0] != "check":
        assert "[U+001B][8m" in out  # shown, not dropped: the reader sees the title held one


def test_an_error_message_marks_the_controls_of_what_the_user_typed(tmp_path):
    res = CliRunner().invoke(main, ["check", str(tmp_path / "x\x1b[2J.dps")])
    assert res.exit_code in (1, 2) and "\x1b" not in res.output and "[U+001B][2J" in res.output, repr(res.output)


def test_a_spec_error_naming_a_value_marks_its_controls(hostile_spec):
    text = hostile_spec.read_text().replace("premetric pure", "premetric pure\x1b[8m")
    hostile_spec.write_text(text)
    res = CliRunner().invoke(main, ["check", str(hostile_spec)])
    assert res.exit_code == 1 and "\x1b" not in res.output, repr(res.output)


def test_fmt_piped_to_a_file_keeps_the_spec_byte_for_byte(hostile_spec):
    res = CliRunner().invoke(main, ["fmt", str(hostile_spec)])
    assert res.exit_code == 0 and "\x1b[2J" in res.output  # content, not terminal text: a pipe gets it exact
