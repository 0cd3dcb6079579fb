"""TopDown's spine and side tables follow the declared geography, never a table's own copy of it:
a record whose AIAN flag disagrees with the geography file (in the person table, a joint table or
the reference geography) is a DataError naming the table, row and column; and every table the
mechanism reads by geography (facilities, group-quarters types, equality targets, the reference
geography) must read its geography columns from the declared file, or check refuses the spec at
the column, saying how to declare it."""

from __future__ import annotations

import os

import numpy as np
import pytest

import dpspec
from dpspec.check.checker import check
from dpspec.errors import DataError, SpecError
from dpspec.language.parser import parse, read_source
from tests.conftest import SPECS
from tests.test_topdown_dhc_solver import JOINT_SPEC, _households_and_units
from tests.topdown_geography import write_declared


def _joint_with_flags(tmp_path, reference: bool = False):
    """The joint households/units spec on an AIAN spine (county 00 inside AIAN areas), its
    geography file written from the data; (spec path, units frame)."""
    households, units = _households_and_units(seed=5, n_blocks=8)
    households["aian"] = np.where(households["county"] == "00", 1, 0)
    units["aian"] = np.where(units["county"] == "00", 1, 0)
    folder = tmp_path / "in"
    folder.mkdir()
    households.to_csv(folder / "households.csv", index=False)
    units.to_csv(folder / "units.csv", index=False)
    text = JOINT_SPEC.replace(
        "unit households : hamming",
        'data households from "households.csv"\n'
        'data units from "units.csv"\n\ninvariants {\n  count households by state\n'
        "  count units by block\n}\n\nunit households : hamming",
    )
    text = text.replace("    tenure : {0, 1}\n", "    tenure : {0, 1}\n    aian   : {0, 1}\n")
    text = text.replace("    vacs   : {0, 1, 2}\n", "    vacs   : {0, 1, 2}\n    aian   : {0, 1}\n")
    spine = "  spine: {\n    aian: aian\n" + ("    geography: units\n" if reference else "") + "  }\n"
    text = text.replace("  variables: hhsize, tenure\n", "  variables: hhsize, tenure\n" + spine, 1)
    text = text.replace(
        "release {\n  microdata households\n}",
        "release {\n  microdata households\n  microdata units\n  output joint_measurements\n}",
    )
    write_declared(folder / "joint.dps", text)
    return folder / "joint.dps", units


def _flip_first_unit_of_county(units, county="01"):
    wrong = units.copy()
    row = int(np.flatnonzero((wrong["county"] == county).to_numpy())[0])
    wrong.loc[row, "aian"] = 1
    return wrong, row


def test_consistent_flags_compile_on_the_declared_spine(tmp_path):
    path, _ = _joint_with_flags(tmp_path)
    result = dpspec.compile(dpspec.load(str(path)), seed=3)
    assert len(result.outputs["units"].to_pandas()) > 0


@pytest.mark.parametrize("reference", [False, True], ids=["joint-table", "joint-table-as-reference-geography"])
def test_a_joint_record_whose_aian_flag_disagrees_with_the_geography_file_is_a_data_error_naming_its_row(
    tmp_path, reference
):
    path, units = _joint_with_flags(tmp_path, reference)
    wrong, row = _flip_first_unit_of_county(units)
    wrong.to_csv(path.parent / "units.csv", index=False)
    with pytest.raises(DataError) as info:
        dpspec.compile(dpspec.load(str(path)), seed=3)
    message = str(info.value)
    block = units.loc[row, "block"]
    assert f"table 'units', row {row + 1}" in message, message
    assert f"column 'aian' holds 1 in block '{block}'" in message
    assert "declared geography file gives that block aian = 0" in message
    assert "Traceback" not in message


def test_a_person_record_whose_flag_disagrees_with_the_geography_file_is_refused_too(tmp_path):
    path, _ = _joint_with_flags(tmp_path)
    households = __import__("pandas").read_csv(path.parent / "households.csv", dtype=str)
    row = int(np.flatnonzero((households["county"] == "02").to_numpy())[0])
    households.loc[row, "aian"] = "1"
    households.to_csv(path.parent / "households.csv", index=False)
    with pytest.raises(DataError, match=rf"table 'households', row {row + 1} .*column 'aian' holds"):
        dpspec.compile(dpspec.load(str(path)), seed=3)


# ---- every table read by geography declares it ---------------------------------------------------

PL94 = os.path.join(SPECS, "pl94_production_topdown.dps")
DHC_PERSONS = os.path.join(SPECS, "dhc_persons_production_topdown.dps")


def _undeclared(path: str, table: str, column: str = "block"):
    """The bundled spec with `column` of `table` declaring no values; (text, its line number)."""
    text = read_source(path)
    start = text.index(f"  table {table} unit")
    line_start = text.index(f"    {column} ", start)
    line_end = text.index("\n", line_start)
    line = text[line_start:line_end]
    assert "values from" in line, line
    text = text[:line_start] + line[: line.index(" values from")] + text[line_end:]
    return text, text[:line_start].count("\n") + 1


@pytest.mark.parametrize(
    "path, table",
    [(PL94, "facilities"), (DHC_PERSONS, "facilities"), (DHC_PERSONS, "pl94")],
    ids=["pl94-facilities", "dhc-facilities", "dhc-equality-target"],
)
def test_a_side_table_whose_geography_is_not_declared_is_refused_at_its_column(path, table):
    text, line = _undeclared(path, table)
    with pytest.raises(SpecError) as info:
        check(parse(text, path))
    found = [d for d in info.value.diagnostics if f"geography column 'block' of table '{table}'" in d.message]
    assert found, info.value
    assert found[0].line == line
    assert "values from" in found[0].hint and "public block" in found[0].hint


def test_the_bundled_side_tables_declare_their_geography():
    for path in (PL94, DHC_PERSONS):
        check(parse(read_source(path), path))
