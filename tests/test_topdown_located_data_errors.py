"""Data that break a construct of a TopDown spec: the DataError names the geounit and cell, and
cites where the spec writes the construct (file:line:column of the structural zero, the
equal_to entry, the invariant, the recode, the cross constraint), in its message and, for
--json, in its diagnostics (issue 24, "Bad input")."""

import re

import numpy as np
import pandas as pd
import pytest

from dpspec.errors import DataError
from tests.topdown_geography import parse
from dpspec.run.compiler import compile_spec

SPEC = """spec "located data errors"
domain d "persons and a released product" {
  stage edited
  geography g { state > county > block }
  table persons unit person {
    state : category
    county : category in state
    block : category in county
    hhgq : {0, 1, 2}
    votingage : {0, 1}
  }
  table pl94 unit person {
    state : category
    county : category in state
    block : category in county
    hhgq : {0, 1, 2}
  }
}
data persons from "persons.parquet"
data pl94 from "pl94.parquet"
invariants {
  count persons by state
  count persons by block, hhgq
}
public {
  count pl94 by block, hhgq released "the 2020 P.L. 94-171 file"
}
unit persons : hamming
premetric zcdp
mechanism topdown {
  table: persons
  variables: hhgq, votingage
  rho: 1
  structural_zeros: {
    nurse_nva_0: { hhgq: [2]  votingage: [0] }
  }
  equal_to: {
    pl94_block: {
      table: pl94
      query: "hhgq"
    }
  }
  levels: { nation: 1/4  state: 1/4  county: 1/4  block: 1/4 }
  queries: { total: 1/2  detailed: 1/2 }
}
release {
  microdata persons
}
"""


def _persons(n=300, seed=4) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    block = rng.integers(0, 12, n)
    hhgq = rng.choice([0, 1, 2], n, p=[0.8, 0.1, 0.1])
    votingage = np.where(hhgq == 2, 1, rng.integers(0, 2, n))  # none in nurse_nva_0
    return pd.DataFrame(
        {
            "state": "01",
            "county": np.where(block < 6, "01001", "01003"),
            "block": [f"b{b:02d}" for b in block],
            "hhgq": hhgq,
            "votingage": votingage,
        }
    )


def _compile(tmp_path, persons, pl94=None, text=SPEC):
    folder = tmp_path / "in"
    folder.mkdir()
    persons.to_parquet(folder / "persons.parquet")
    (persons[["state", "county", "block", "hhgq"]] if pl94 is None else pl94).to_parquet(folder / "pl94.parquet")
    path = folder / "s.dps"
    path.write_text(text)
    with pytest.raises(DataError) as info:
        compile_spec(parse(text, str(path)), seed=1, audit=False)
    return str(path), info.value


def _at(text, start, fragment=None):
    """(line, column) of the first line starting with `start` (at `fragment` in it, else its start)."""
    line = next(i for i, ln in enumerate(text.splitlines(), 1) if ln.strip().startswith(start))
    source = text.splitlines()[line - 1]
    return line, source.index(fragment or start) + 1


def _cites(error, path, text, *places):
    """The error's message shows each place as a note with its line, and its diagnostics carry them."""
    message = str(error)
    for what, start, fragment in places:
        line, column = _at(text, start, fragment)
        assert f"{path}:{line}:{column}: note: {what} is written here" in message, message
    first = _at(text, places[0][1], places[0][2])
    diags = error.diagnostics
    assert (diags[0].line, diags[0].column, diags[0].severity) == (*first, "error")
    assert diags[0].message == error.message and diags[0].hint == f"{places[0][0]} is written here"
    assert [(d.line, d.column) for d in diags[1:]] == [_at(text, s, f) for _, s, f in places[1:]]
    assert error.path == path


def test_a_record_in_a_structural_zero_cites_the_zeros_line(tmp_path):
    persons = _persons()
    persons.loc[7, ["hhgq", "votingage"]] = [2, 0]
    path, error = _compile(tmp_path, persons)
    assert re.search(
        rf"break the structural zero 'nurse_nva_0': 1 record, e\.g\. in block {persons.loc[7, 'block']} "
        r"\(cell hhgq=2, votingage=0\)",
        error.message,
    )
    _cites(error, path, SPEC, ("the structural zero 'nurse_nva_0'", "nurse_nva_0:", None))


def test_a_product_disagreeing_with_an_invariant_cites_the_equal_to_entry_and_the_invariant(tmp_path):
    persons = _persons()
    pl94 = persons[["state", "county", "block", "hhgq"]].copy()
    block = pl94.loc[0, "block"]
    pl94.loc[0, "hhgq"] = (pl94.loc[0, "hhgq"] + 1) % 2  # one released person in another hhgq cell
    path, error = _compile(tmp_path, persons, pl94)
    assert f"disagrees with the invariant 'hhgq' at block '{block}'" in error.message
    _cites(
        error,
        path,
        SPEC,
        ("equal_to 'pl94_block'", "pl94_block:", None),
        ("the invariant 'count persons by block, hhgq'", "count persons by block, hhgq", None),
    )


def test_a_product_with_persons_where_every_cell_is_a_structural_zero_cites_both(tmp_path):
    text = SPEC.replace("  count persons by block, hhgq\n", "").replace(
        "nurse_nva_0: { hhgq: [2]  votingage: [0] }", "no_gq2: { hhgq: [2] }"
    )
    persons = _persons()
    persons = persons[persons["hhgq"] != 2].reset_index(drop=True)
    pl94 = persons[["state", "county", "block", "hhgq"]].copy()
    pl94.loc[0, "hhgq"] = 2
    path, error = _compile(tmp_path, persons, pl94, text)
    assert "where every cell is a structural zero" in error.message
    _cites(
        error,
        path,
        text,
        ("equal_to 'pl94_block'", "pl94_block:", None),
        ("'structural_zeros'", "structural_zeros:", None),
    )


def test_a_recode_column_that_is_not_its_recode_cites_the_invariant_and_the_recode(tmp_path):
    from tests.test_topdown_recode_invariants import SPEC as UNITS, _units, _write

    units = _units()
    at = units.index[units["tenvac"] == "gq301"][0]
    units.loc[at, "kind"] = "gq501"
    path = _write(tmp_path, units)
    with pytest.raises(DataError) as info:
        compile_spec(parse(UNITS, path), seed=1, audit=False)
    assert "1 record with kind different from the recode 'kind' of tenvac" in info.value.message
    _cites(
        info.value,
        path,
        UNITS,
        ("the invariant 'count units by block, kind'", "count units by block, kind", None),
        ("the recode 'kind'", "kind: {", "kind"),
    )


def test_data_breaking_a_cross_constraint_cite_its_line(tmp_path):
    from tests.test_topdown_dhc_solver import JOINT_SPEC, _concat, _households_and_units

    households, units = _households_and_units()
    households = _concat(households, households.iloc[[0]])  # one household more than occupied units
    text = JOINT_SPEC.replace(
        "unit households : hamming",
        'data households from "households.parquet"\ndata units from "units.parquet"\nunit households : hamming',
    )
    folder = tmp_path / "in"
    folder.mkdir()
    households.to_parquet(folder / "households.parquet")
    units.to_parquet(folder / "units.parquet")
    path = str(folder / "joint.dps")
    with pytest.raises(DataError) as info:
        compile_spec(parse(text, path), seed=1, audit=False)
    assert "break the cross constraint 'h1': block" in info.value.message
    _cites(info.value, path, text, ("the cross constraint 'h1'", "h1: {", "h1"))


def _joint_zeros_spec(tmp_path, units):
    """The joint spec with the units' structural zero no_seasonal (vacs 2 and 3), on `units`."""
    from tests.test_topdown_joint_production import SPEC as ZEROS, _data

    households, _ = _data()
    text = ZEROS.replace(
        "unit households : hamming",
        'data households from "households.parquet"\ndata units from "units.parquet"\nunit households : hamming',
    )
    folder = tmp_path / "in"
    folder.mkdir()
    households.to_parquet(folder / "households.parquet")
    units.to_parquet(folder / "units.parquet")
    path = folder / "zeros.dps"
    from tests.topdown_geography import write_declared

    text = write_declared(path, text)  # the geography declared from the data beside it
    return str(path), text


def test_a_record_in_a_joint_tables_zero_cites_the_zero_in_the_joint_entry(tmp_path):
    from tests.test_topdown_joint_production import _data

    _, units = _data()
    units.loc[units.index[5], "vacs"] = 3
    path, text = _joint_zeros_spec(tmp_path, units)
    with pytest.raises(DataError) as info:
        compile_spec(parse(text, path), seed=1, audit=False)
    assert info.value.message.startswith("the data of table 'units' break the structural zero 'no_seasonal'")
    _cites(info.value, path, text, ("the structural zero 'no_seasonal'", "no_seasonal: {", None))


@pytest.mark.slow  # a Spark compile: a few seconds on an idle machine (CI runs every test)
def test_a_located_data_error_reads_the_same_on_spark(tmp_path, spark_session):
    from dpspec.engine.spark import SparkEngine
    from tests.test_engine_mechanisms import compile_on
    from tests.test_topdown_joint_production import _data

    _, units = _data()
    units.loc[units.index[5], "vacs"] = 3
    path, _ = _joint_zeros_spec(tmp_path, units)
    errors = []
    for engine in ("local", SparkEngine(session=spark_session)):
        with pytest.raises(DataError) as info:
            compile_on(path, engine)
        errors.append(info.value)
    assert str(errors[1]) == str(errors[0]) and errors[1].diagnostics == errors[0].diagnostics
    assert "note: the structural zero 'no_seasonal' is written here" in str(errors[1])


def test_a_located_data_error_is_an_error_document_with_its_places_and_survives_pickling():
    import pickle

    from dpspec.cli.errors import error_document
    from dpspec.errors import Diagnostic
    from tests.test_schemas import assert_valid

    error = DataError(
        "the data break the structural zero 'z': 1 record",
        [Diagnostic("the structural zero 'z'", 3, 5), Diagnostic("the invariant 'x'", 9, 3)],
        "s.dps",
        "a\nb\n    z: { hhgq: [2] }\n",
    )
    doc = error_document(str(error), 1, error.diagnostics, error.path)
    assert_valid("error", doc)
    assert [(d["file"], d["line"], d["column"], d["severity"]) for d in doc["diagnostics"]] == [
        ("s.dps", 3, 5, "error"),
        ("s.dps", 9, 3, "note"),
    ]
    assert doc["diagnostics"][0]["message"] == "the data break the structural zero 'z': 1 record"
    assert str(error).splitlines()[:4] == [
        "the data break the structural zero 'z': 1 record",
        "s.dps:3:5: note: the structural zero 'z' is written here",
        "        z: { hhgq: [2] }",
        "        ^",
    ]
    again = pickle.loads(pickle.dumps(error))
    assert str(again) == str(error) and again.diagnostics == error.diagnostics
    plain = DataError("no records")  # without places: as before, its message alone and no diagnostics
    assert str(plain) == "no records" and plain.diagnostics is None
