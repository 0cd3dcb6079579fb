"""Loading and validating data against the domain: each kind of DataError, and codes kept."""

from __future__ import annotations

import pandas as pd
import pytest

from dpspec.check.data import load_data
from dpspec.errors import DataError
from dpspec.language.parser import parse, read_source


def _load(small_spec):
    return load_data(parse(read_source(str(small_spec)), str(small_spec)))


def _write(small_spec, text: str):
    (small_spec.parent / "people.csv").write_text(text)


def test_valid_data_loads_with_types(small_spec):
    frames, hashes = _load(small_spec)
    people = frames["people"]
    assert len(people) == 5
    assert people["age"].dtype == "int64"
    assert people["smoker"].tolist() == [True, False, False, True, False]
    # 'N' is a value ("not applicable"), never a missing value.
    assert people["status"].tolist()[2] == "N"
    assert list(hashes) == ["people.csv"] and len(hashes["people.csv"]) == 64


def _error(small_spec, csv: str) -> str:
    _write(small_spec, csv)
    with pytest.raises(DataError) as info:
        _load(small_spec)
    return str(info.value)


def test_missing_column(small_spec):
    message = _error(small_spec, "region,district,age,smoker\nnorth,n1,3,true\n")
    assert "table 'people' needs column(s) status, which the file does not have" in message


def test_value_outside_enumerated_set(small_spec):
    message = _error(small_spec, "region,district,age,smoker,status\nnorth,n1,3,true,widowed\nnorth,n1,3,true,single\n")
    assert "column 'status': 1 values outside {single, married, N}: row 1: 'widowed'" in message


def test_integer_out_of_range_and_not_integer(small_spec):
    message = _error(
        small_spec, "region,district,age,smoker,status\nnorth,n1,130,true,N\nnorth,n1,4.5,true,N\nnorth,n1,x,true,N\n"
    )
    assert "column 'age': 2 values that are not whole numbers: row 2: '4.5', row 3: 'x'" in message
    assert "column 'age': 1 values outside 0..120: row 1: '130'" in message


def test_null_where_none_allowed(small_spec):
    message = _error(small_spec, "region,district,age,smoker,status\nnorth,n1,,true,N\n")
    assert "column 'age': 1 missing values where none are allowed: row 1: '<empty>'" in message


def test_bad_boolean(small_spec):
    message = _error(small_spec, "region,district,age,smoker,status\nnorth,n1,3,maybe,N\n")
    assert "column 'smoker': 1 values that are not true/false: row 1: 'maybe'" in message


def test_many_errors_are_counted_and_first_few_shown(small_spec):
    rows = "\n".join(f"north,n1,{200 + i},true,N" for i in range(12))
    message = _error(small_spec, "region,district,age,smoker,status\n" + rows + "\n")
    assert "12 values outside 0..120" in message
    assert "(and 7 more)" in message


def test_nesting_contradiction(small_spec):
    message = _error(small_spec, "region,district,age,smoker,status\nnorth,n1,3,true,N\nsouth,n1,4,true,N\n")
    assert "district 'n1' lies in more than one region (north, south)" in message


def test_missing_file(small_spec):
    (small_spec.parent / "people.csv").unlink()
    with pytest.raises(DataError, match="the data file does not exist"):
        _load(small_spec)


def test_parquet_source(small_spec):
    frame = pd.read_csv(small_spec.parent / "people.csv", dtype=str)
    frame.to_parquet(small_spec.parent / "people.parquet")
    small_spec.write_text(small_spec.read_text().replace("people.csv", "people.parquet"))
    frames, _ = _load(small_spec)
    assert frames["people"]["age"].sum() == 34 + 51 + 17 + 70 + 45


def test_inputs_are_not_modified(small_spec):
    before = (small_spec.parent / "people.csv").read_bytes()
    _load(small_spec)
    assert (small_spec.parent / "people.csv").read_bytes() == before


def test_enum_codes_from_arrow_text_match_the_object_path(small_spec):
    """Arrow-backed text (what the CSV parser gives) is coded by pyarrow; the result and the
    DataError lines must equal those of the generic path on the same values as objects."""
    from dpspec.check.data import _arrow_codes, _Problems, _validate_column

    spec = parse(read_source(str(small_spec)), str(small_spec))
    col = next(c for c in spec.domain.table("people").columns if c.name == "status")
    raw = ["single", None, "N", " married", "widowed", "married", "n", "", "single"] * 3
    assert _arrow_codes(pd.Series(raw, dtype="str"), ["N"]) is not None  # the fast path is taken
    assert _arrow_codes(pd.Series(raw, dtype=object), ["N"]) is None
    results, lines = [], []
    for series in (pd.Series(raw, dtype="str"), pd.Series(raw, dtype=object)):
        problems = _Problems("p.csv", "people")
        results.append(_validate_column(col, series, problems))
        lines.append(problems.lines)
    pd.testing.assert_extension_array_equal(pd.array(results[0]), pd.array(results[1]))
    assert results[0].dtype == results[1].dtype and list(results[0].categories) == ["single", "married", "N"]
    assert lines[0] == lines[1] and len(lines[0]) == 2  # the missing values and the values outside the set
