"""SafeTab through the command line, as a user runs it: `dpspec budget --json` lists every
(table, geography level, iteration level, stage) budget with the totals under add/remove and
under the spec's relation; every bad input of the issue exits 1 with a located message (spec
line or data row), never a traceback."""

from __future__ import annotations

import json
import re
from fractions import Fraction as F

import pandas as pd
import pytest
from click.testing import CliRunner

from dpspec.cli.main import main
from tests.conftest import beside
from tests.safetab_helpers import H_SPEC, P_SPEC, ROOT
from tests.safetab_helpers import variant

DATA = ROOT / "specs" / "data" / "safetab"


def _run(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


@pytest.mark.parametrize("spec,native,relation", [(P_SPEC, "4.944", "19.776"), (H_SPEC, "8.895302", "35.581208")])
def test_budget_json_lists_every_level_and_stage_and_both_totals(spec, native, relation):
    result = _run("budget", spec, "--json")
    assert result.exit_code == 0, result.output
    out = json.loads(result.output)
    assert out["native"]["flavor"]["relation"] == "symdiff" and out["flavor"]["relation"] == "hamming"
    assert out["native"]["budget"]["rho"] == pytest.approx(float(native))
    assert out["budget"]["rho"] == pytest.approx(float(relation))
    parts = out["native"]["components"]
    seen = {(c["table"], c["geography"], c["iteration_level"]) for c in parts}
    tables = {"t1"} if spec == P_SPEC else {"t3", "t4"}
    geos = {"nation", "state", "county", "tract", "place", "aiannh"}
    assert seen == {(t, g, lv) for t in tables for g in geos for lv in (1, 2)}
    assert sum(F(c["rho_exact"]) for c in parts) == F(native)
    for c in parts:  # each part also in the spec's relation: change one record = 4 x add/remove
        assert c["in_spec_flavor"]["rho"] == pytest.approx(4 * float(F(c["rho_exact"])))


def _bad_map(tmp_path, row: dict) -> str:
    m = pd.read_parquet(DATA / "code_to_iteration.parquet").astype(str)
    path = tmp_path / "map.csv"
    pd.concat([m, pd.DataFrame([row])], ignore_index=True).to_csv(path, index=False)
    return str(path)


def _bad_persons(tmp_path) -> str:
    persons = pd.read_parquet(DATA / "persons.parquet").iloc[:300].copy()
    persons["QRACE1"] = persons["QRACE1"].astype(object)
    persons.loc[persons.index[41], "QRACE1"] = "0042"
    path = tmp_path / "persons.parquet"
    persons.to_parquet(path)
    return str(path)


SPEC_ERRORS = [
    ("level2: [971, 4971, 19971]", "level2: [971, 19971, 4971]", "must be strictly increasing"),
    ("total_rho: 4.944", "total_rho: 4.945", "add up to 4.944, not the declared 4.945"),
    ("stage1_fraction: 0.1", "stage1_fraction: 1.5", "stage1_fraction must lie strictly between 0 and 1"),
    ("stage1_fraction: 0.1", "stage1_fraction: -0.1", "stage1_fraction must lie strictly between 0 and 1"),
    # located at race_codes, the list that breaks the declared maximum
    (
        "max_race_codes: 8",
        "max_race_codes: 6",
        "race_codes lists 8 columns, more than max_race_codes = 6",
        "race_codes:",
    ),
    (
        "        aiannh: {\n          level1: 0",
        "        tribal: {\n          level1: 0",
        "'tribal' is not a geography level",
    ),
]


@pytest.mark.parametrize("old,new,message,at", [(*e, None)[:4] for e in SPEC_ERRORS])
def test_bad_parameters_exit_1_at_the_spec_line(tmp_path, old, new, message, at):
    path = variant(tmp_path, old, new)
    result = _run("compile", path, "-o", beside(tmp_path))
    assert result.exit_code == 1, result.output
    assert message in result.output and "Traceback" not in result.output
    line = next(
        i
        for i, row in enumerate(path.read_text().splitlines(), 1)
        if (at or new.splitlines()[0]) in row and not row.lstrip().startswith("#")
    )
    assert f"variant.dps:{line}:" in result.output
    assert not (beside(tmp_path)).exists()


def test_a_mapping_with_an_unknown_code_exits_1_at_its_row(tmp_path):
    path = variant(
        tmp_path, 'code_map: "', f'code_map: "{_bad_map(tmp_path, {"code": "0042", "iteration": "1001"})}" # '
    )
    result = _run("compile", path, "-o", beside(tmp_path))
    assert result.exit_code == 1, result.output
    assert "map.csv: row 14089: the code '0042' is not in the codes table" in result.output
    assert "Traceback" not in result.output


def test_a_mapping_to_an_unknown_group_exits_1_at_its_row(tmp_path):
    path = variant(
        tmp_path, 'code_map: "', f'code_map: "{_bad_map(tmp_path, {"code": "1000", "iteration": "Q999"})}" # '
    )
    result = _run("compile", path, "-o", beside(tmp_path))
    assert result.exit_code == 1, result.output
    assert "row 14089: the iteration 'Q999' is not in the iterations table" in result.output


def test_a_record_with_an_unknown_code_exits_1_naming_the_code(tmp_path):
    """A Parquet table is held by the engine, whose rows have no numbers: the message names the
    code and how many rows hold it (tests/test_safetab_engine_input.py: a CSV names its row)."""
    path = variant(
        tmp_path,
        '"data/safetab/persons.parquet"'.replace('"data/', f'"{ROOT}/specs/data/'),
        f'"{_bad_persons(tmp_path)}"',
    )
    result = _run("compile", path, "-o", beside(tmp_path))
    assert result.exit_code == 1, result.output
    assert "column 'QRACE1' holds the code '0042' in 1 row, which is not in the code table" in result.output
    assert "Traceback" not in result.output


def test_a_declared_fanout_smaller_than_the_data_exits_1_naming_the_codes(tmp_path):
    path = variant(tmp_path, "max_groups: 9", "max_groups: 2")
    result = _run("compile", path, "-o", beside(tmp_path))
    assert result.exit_code == 1, result.output
    assert "rows fall into more population groups than the declared maximum fan-out 2" in result.output
    assert re.search(
        r"such as \d+ for race codes '\d+'(, '\d+')* and ethnicity code '\d+' \(\d+ rows?\)", result.output
    )
    assert "Traceback" not in result.output
