"""The .dps language version line and `dpspec fmt --upgrade` (issue 27 item 2)."""

from __future__ import annotations

import glob
import os

import pytest
from click.testing import CliRunner

from dpspec.cli.main import main
from dpspec.language import version
from dpspec.language.formatter import format_spec
from dpspec.language.parser import parse, read_source

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUNDLED = sorted(glob.glob(os.path.join(ROOT, "specs", "*.dps")) + glob.glob(os.path.join(ROOT, "specs", "*", "*.dps")))


def cli(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def with_line(small_spec, line: str):
    small_spec.write_text(f"# a header comment\n{line}\n\n" + small_spec.read_text())
    return small_spec


def test_the_line_is_read_kept_by_fmt_and_shown(small_spec):
    with_line(small_spec, f"language {version.LANGUAGE_VERSION}")
    spec = parse(small_spec.read_text(), str(small_spec))
    assert spec.language_version == version.LANGUAGE_VERSION
    canonical = format_spec(spec)
    assert canonical.startswith(f'# a header comment\n\nlanguage {version.LANGUAGE_VERSION}\n\nspec "small"')
    assert parse(canonical) == spec  # the round trip keeps it
    assert cli("check", small_spec).exit_code == 0
    assert f'"language_version": "{version.LANGUAGE_VERSION}"' in cli("show", "--json", small_spec).stdout


def test_a_file_without_the_line_is_the_first_version(small_spec):
    assert parse(small_spec.read_text()).language_version is None
    assert version.UNVERSIONED == "1.0"


def test_a_column_may_still_be_called_language(small_spec):
    text = small_spec.read_text().replace(
        'status   : {single, married, "N"}', 'status   : {single, married, "N"}\n    language : category'
    )
    spec = parse(text)
    assert "language" in [c.name for c in spec.domain.tables[0].columns]


@pytest.mark.parametrize(
    "line, words",
    [
        ("language 1.2", "this file is written in .dps language version 1.2, newer than this dpspec"),
        ("language 2.0", "this file is written in .dps language version 2.0, newer than this dpspec"),
        ("language one", "'one' is not a language version"),
        ("language 1", "'1' is not a language version"),
    ],
)
def test_a_version_this_dpspec_cannot_read_is_a_located_error(small_spec, line, words):
    with_line(small_spec, line)
    small_spec.write_text(small_spec.read_text() + "\nsome construct { from a future language }\n")
    result = cli("check", small_spec)
    assert result.exit_code == 1
    assert f"{small_spec}:2:1: error: {words}" in result.stderr  # the version, not the unknown construct
    if "newer" in words:
        assert f"(language version {version.LANGUAGE_VERSION})" in result.stderr
    assert "Traceback" not in result.stderr


def test_the_line_must_come_first(small_spec):
    small_spec.write_text(small_spec.read_text() + "language 1.0\n")
    result = cli("check", small_spec)
    assert result.exit_code == 1 and "unexpected 'language'" in result.stderr


def test_upgrade_is_a_no_op_today_on_every_bundled_spec():
    assert not version.UPGRADES
    for path in BUNDLED:
        text = read_source(path)
        assert version.upgrade(text) == text, path


def test_fmt_upgrade_prints_writes_and_checks(small_spec):
    before = small_spec.read_text()
    assert cli("fmt", "--upgrade", small_spec).stdout == before
    assert cli("fmt", "--upgrade", "--check", small_spec).exit_code == 0
    assert cli("fmt", "--upgrade", "--write", small_spec).exit_code == 0
    assert small_spec.read_text() == before


def test_the_upgrade_path_applies_each_step(small_spec, monkeypatch):
    """The day the language changes: a step from 1.0 to 1.1 runs on an unversioned file."""

    def step(text):
        return "language 1.1\n" + text.replace("premetric pure", "premetric pure  # upgraded"), "1.1"

    monkeypatch.setattr(version, "LANGUAGE_VERSION", "1.1")
    monkeypatch.setattr(version, "UPGRADES", {"1.0": step})
    result = cli("fmt", "--upgrade", "--check", small_spec)
    assert result.exit_code == 1 and "not at .dps language version 1.1" in result.stderr
    assert cli("fmt", "--upgrade", "--write", small_spec).exit_code == 0
    text = small_spec.read_text()
    assert text.startswith("language 1.1\n") and "# upgraded" in text
    assert parse(text).language_version == "1.1"
    assert cli("fmt", "--upgrade", "--check", small_spec).exit_code == 0  # idempotent
