"""Empty and odd data: zero rows, header-only and empty files, NUL bytes: a clear error, never a
silent release of nothing."""

from __future__ import annotations

import pandas as pd
import pytest
from click.testing import CliRunner

from dpspec.cli.main import main


def _compile(spec, tmp_path):
    return CliRunner().invoke(main, ["compile", str(spec), "-o", str(tmp_path / "o")])


def test_header_only_csv_is_an_error_saying_why(small_spec, tmp_path):
    (small_spec.parent / "people.csv").write_text("region,district,age,smoker,status\n")
    result = _compile(small_spec, tmp_path)
    assert result.exit_code == 1
    assert "has no rows (the file holds only its header)" in result.output
    assert not (tmp_path / "o").exists()


def test_empty_file_is_an_error_saying_why(small_spec, tmp_path):
    (small_spec.parent / "people.csv").write_bytes(b"")
    result = _compile(small_spec, tmp_path)
    assert result.exit_code == 1 and "the file is empty (not even a header line)" in result.output


def test_zero_row_parquet_is_an_error(small_spec, tmp_path):
    frame = pd.read_csv(small_spec.parent / "people.csv", dtype=str).iloc[:0]
    frame.to_parquet(small_spec.parent / "people.parquet")
    small_spec.write_text(small_spec.read_text().replace("people.csv", "people.parquet"))
    result = _compile(small_spec, tmp_path)
    assert result.exit_code == 1 and "has no rows" in result.output


@pytest.mark.parametrize("column,value", [("region", "nor\x00th"), ("status", "sin\x00gle")])
def test_nul_bytes_in_values_are_reported_with_their_row(small_spec, tmp_path, column, value):
    data = small_spec.parent / "people.csv"
    frame = pd.read_csv(data, dtype=str)
    frame.loc[1, column] = value
    frame.to_csv(data, index=False)
    result = _compile(small_spec, tmp_path)
    assert result.exit_code == 1
    assert f"column '{column}': 1 values holding NUL bytes" in result.output and "row 2" in result.output
