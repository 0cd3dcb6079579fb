"""Exit codes a pipeline can rely on (0 ok, 1 user problem, 2 usage, 3 internal error) and
messages that show values as the user wrote them."""

from __future__ import annotations

import pandas as pd
from click.testing import CliRunner

from dpspec.cli.main import main
from dpspec.language.values import plain, shown


def test_ok_user_problem_and_usage(small_spec, tmp_path):
    run = CliRunner().invoke
    assert run(main, ["check", str(small_spec)]).exit_code == 0
    small_spec.write_text(small_spec.read_text().replace("p: 3/4", "p: 3/2"))
    assert run(main, ["check", str(small_spec)]).exit_code == 1
    assert run(main, ["compile", "--no-such-option", str(small_spec)]).exit_code == 2


def test_an_internal_error_exits_3_and_says_it_is_a_bug(small_spec, tmp_path, monkeypatch):
    import dpspec.run.compiler

    def broken(*args, **kwargs):
        raise ZeroDivisionError("division by zero")

    monkeypatch.setattr(dpspec.run.compiler, "compile_spec", broken)
    result = CliRunner().invoke(main, ["compile", str(small_spec), "-o", str(tmp_path / "o")])
    assert result.exit_code == 3, result.output
    assert "internal error (ZeroDivisionError)" in result.output and "bug in dpspec" in result.output
    assert "Traceback" not in result.output


def test_plugin_commands_decorated_with_friendly_share_the_codes():
    import click

    from dpspec.cli.errors import friendly
    from dpspec.errors import DataError

    @click.command()
    @click.argument("what")
    @friendly
    def cmd(what):
        raise DataError("bad data") if what == "user" else KeyError("oops")

    assert CliRunner().invoke(cmd, ["user"]).exit_code == 1
    result = CliRunner().invoke(cmd, ["bug"])
    assert result.exit_code == 3 and "internal error (KeyError)" in result.output


def test_numpy_values_print_as_written():
    import numpy as np

    assert shown(np.int64(25)) == "25" and shown(np.float64(0.5)) == "0.5" and shown("N") == "'N'"
    assert plain(np.bool_(True)) is True and plain(7) == 7


def test_parquet_data_errors_show_plain_numbers(small_spec, tmp_path):
    frame = pd.read_csv(small_spec.parent / "people.csv", dtype=str)
    frame["age"] = [34, 51, 17, 70, 250]
    frame.to_parquet(small_spec.parent / "people.parquet")
    small_spec.write_text(small_spec.read_text().replace("people.csv", "people.parquet"))
    result = CliRunner().invoke(main, ["compile", str(small_spec), "-o", str(tmp_path / "o")])
    assert result.exit_code == 1
    assert "row 5: 250" in result.output and "np." not in result.output


def test_a_semicolon_csv_gets_a_delimiter_hint(small_spec, tmp_path):
    data = small_spec.parent / "people.csv"
    data.write_text(data.read_text().replace(",", ";"))
    result = CliRunner().invoke(main, ["compile", str(small_spec), "-o", str(tmp_path / "o")])
    assert result.exit_code == 1
    assert "separated by semicolons" in result.output and "comma-separated" in result.output
