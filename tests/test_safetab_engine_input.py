"""SafeTab reads its records through the engine (issue 11, item 2).

SafeTab takes engine tables: a Parquet source (a file or a partitioned directory) reaches it
held by the engine, which counts the records per distinct combination of the columns SafeTab
reads; a CSV source (or a caller's frame) is reduced the same way in this process. Either way
the release and the internal figures are the ones per-record tabulation gives, byte for byte;
on Spark only counts reach the driver; and every bad record is still reported clearly: by its
row in a frame, by the value and how many rows hold it in an engine table.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import dpspec
from dpspec.errors import DataError
from dpspec_safetab.combinations import combinations
from dpspec_safetab.engine import detail_counts, group_counts
from dpspec_safetab.iterations import flatten
from dpspec_safetab.records import Inputs, read_records
from dpspec_safetab.validate import check_records
from tests.safetab_helpers import H_SPEC, P_SPEC, ROOT
from tests.test_safetab import _toy_table

DATA = ROOT / "specs" / "data" / "safetab"


def release(result, out: Path) -> dict:
    from dpspec.publish.output import write_result

    write_result(result, str(out))
    return {p.name: p.read_bytes() for p in sorted(out.iterdir()) if p.suffix == ".csv"}


def spec_reading(folder: Path, source: str, spec: Path = P_SPEC, name: str = "s") -> str:
    """The bundled spec with its record table read from `source` (relative to `folder`)."""
    text = spec.read_text().replace('"data/', f'"{DATA.parent}/')
    text = re.sub(r'^data (\w+) from "[^"]+"', lambda m: f'data {m.group(1)} from "{source}"', text, flags=re.M)
    path = folder / f"{name}.dps"
    path.write_text(text)
    return str(path)


def write_sources(frame: pd.DataFrame, folder: Path) -> dict:
    """The same records as a CSV file, a Parquet file and a directory partitioned by county."""
    folder.mkdir(exist_ok=True)
    frame.to_csv(folder / "persons.csv", index=False)
    frame.to_parquet(folder / "persons.parquet", index=False)
    for code, part in frame.groupby("county", sort=True):
        (folder / "persons" / f"county={code}").mkdir(parents=True)
        part.drop(columns="county").to_parquet(folder / "persons" / f"county={code}" / "part-0.parquet", index=False)
    return {"csv": "persons.csv", "file": "persons.parquet", "dir": "persons/"}


def spying(cls):
    """Record the type of the table `cls.run` receives (a frame or an EngineTable)."""
    seen = []
    original = cls.run

    def run(self, spec, params, data, ctx):
        seen.append(type(data[params["table"]]).__name__)
        return original(self, spec, params, data, ctx)

    return seen, original, run


@pytest.mark.slow  # the bundled SafeTab specs released twice
@pytest.mark.parametrize("spec", [P_SPEC, H_SPEC], ids=["safetab-p", "safetab-h"])
def test_bundled_specs_release_the_same_bytes_from_a_frame_and_from_the_engine(tmp_path, spec):
    """The bundled Parquet table held by the engine and the same table handed over as a pandas
    frame (what every caller did before): the same release files and internal figures."""
    from dpspec.api import load_table
    from dpspec.run.compiler import compile_spec
    from dpspec_safetab.plugin import SafeTab

    parsed = dpspec.load(str(spec))
    seen, original, run = spying(SafeTab)
    SafeTab.run = run
    try:
        held = compile_spec(parsed, seed=2026, audit=False)
        table = parsed.data[0].table
        given = compile_spec(parsed, data={table: load_table(parsed, parsed.data[0])}, seed=2026, audit=False)
    finally:
        SafeTab.run = original
    assert seen == ["EngineTable", "DataFrame"]
    assert release(held, tmp_path / "held") == release(given, tmp_path / "given")
    assert held.release.internal == given.release.internal
    assert held.release.facts == given.release.facts


@pytest.mark.slow  # SafeTab released from three formats
def test_csv_parquet_file_and_partitioned_directory_give_the_same_release(tmp_path):
    inputs = tmp_path / "in"
    frame = pd.read_parquet(DATA / "persons.parquet").iloc[::4].reset_index(drop=True)
    sources = write_sources(frame, inputs)
    out = {}
    for kind, source in sources.items():
        result = dpspec.compile(spec_reading(inputs, source, name=kind), seed=5)
        out[kind] = (release(result, tmp_path / kind), result.release.internal)
    assert out["file"] == out["csv"] and out["dir"] == out["csv"]
    assert out["csv"][0]["counts.csv"].count(b"\n") > 1000


@pytest.mark.slow  # SafeTab released with two seeds
def test_the_release_depends_on_the_seed(tmp_path):
    """So the byte comparisons can fail."""
    inputs = tmp_path / "in"
    frame = pd.read_parquet(DATA / "persons.parquet").iloc[::8].reset_index(drop=True)
    spec = spec_reading(inputs, write_sources(frame, inputs)["dir"])
    assert release(dpspec.compile(spec, seed=1), tmp_path / "a") != release(
        dpspec.compile(spec, seed=2), tmp_path / "b"
    )


def test_on_spark_a_directory_gives_the_local_release_and_only_counts_reach_the_driver(tmp_path, counts_only_spark):
    """Persons that share their combinations (each of 200 people ten times): compiled on Spark
    from a partitioned directory, every frame the driver collects is a count (at most one row
    per combination, never one per person), the table itself is never asked for, units of work
    read rows only on the executors, keeping their outputs there, and the release is the local
    one from a CSV file, byte for byte."""
    inputs = tmp_path / "in"
    people = pd.read_parquet(DATA / "persons.parquet").iloc[:200]
    frame = pd.concat([people] * 10, ignore_index=True)
    sources = write_sources(frame, inputs)
    local = dpspec.compile(spec_reading(inputs, sources["csv"], name="csv"), seed=11)
    engine, collected = counts_only_spark
    on_spark = dpspec.compile(spec_reading(inputs, sources["dir"], name="dir"), seed=11, engine=engine)
    assert collected and max(collected) <= len(people), collected
    assert release(on_spark, tmp_path / "spark") == release(local, tmp_path / "local")
    assert on_spark.release.internal == local.release.internal


# ---- counting per combination --------------------------------------------------------------


def test_combinations_of_a_frame_count_records_and_keep_each_first_row():
    frame = pd.DataFrame({"g": ["a", "b", "a", None, "a", None], "r": ["1", "2", "1", "2", "3", "2"]}, dtype=object)
    rows, origin = combinations(frame, ["g", "r"])
    assert rows.to_dict("list") == {"g": ["a", "b", None, "a"], "r": ["1", "2", "2", "3"]}  # missing: a value
    assert origin.weight.tolist() == [2, 1, 2, 1] and origin.first_row.tolist() == [0, 1, 3, 4]


def test_weighted_counts_equal_the_counts_of_every_record():
    rng = np.random.default_rng(4)
    region, group, cell = rng.integers(-1, 5, 400), rng.integers(0, 7, 400), rng.integers(0, 6, 400)
    weight = rng.integers(1, 9, 400)
    each = np.repeat(np.arange(400), weight)  # every record on its own
    counts = group_counts(region, group, 5, 7, weight)
    assert counts.dtype == np.int64
    assert (counts == group_counts(region[each], group[each], 5, 7)).all()
    keys = np.flatnonzero(counts.reshape(-1) > 10)
    _, weighted = detail_counts(region, group, cell, keys, 7, 6, 5, weight)
    _, plain = detail_counts(region[each], group[each], cell[each], keys, 7, 6, 5)
    assert weighted.dtype == np.int64 and (weighted == plain).all() and weighted.sum() > 0


# ---- bad records, on a frame and on an engine table ------------------------------------------

GOOD = {"R1": "A1", "R2": None, "E": "H0", "SEX": "1"}


def records(*changes) -> pd.DataFrame:
    """Eight records; changes: (row, column, value). Rows 0-2 repeat one combination, so a
    frame's first bad row is not its combination's first row unless it really is."""
    rows = [dict(GOOD) for _ in range(8)]
    for r, col, value in changes:
        rows[r][col] = value
    return pd.DataFrame(rows)


def fan_table():
    """The toy table, with B1 also in a third level-1 iteration: A1 alone reaches 3 groups
    (A, Ac, an ethnicity), A1 with B1 reaches 4 (Ac, Bc, Xc, an ethnicity)."""
    from dpspec_safetab.iterations import IterationTable

    toy = _toy_table()
    extra = pd.DataFrame(
        {
            "iteration": ["Xc"],
            "kind": ["race"],
            "level": [1],
            "alone": [False],
            "detailed_only": [False],
            "coarse_only": [False],
        }
    )
    mapping = pd.concat([toy.mapping, pd.DataFrame({"code": ["B1"], "iteration": ["Xc"]})], ignore_index=True)
    return IterationTable.build(pd.DataFrame({"code": list(toy.codes)}), pd.concat([toy.iterations, extra]), mapping)


def read(frame: pd.DataFrame, how: str, tmp_path: Path, max_race_codes: int = 2, engine=None, table=None, fanouts=None):
    """read_records of `frame` as a frame ("frame") or as a Parquet file the engine holds, after
    the driver's checks a run makes first (`validate.check_records`, on code combinations):
    both must name a bad record the same way."""
    from dpspec.api import EngineTable
    from dpspec.engine import EngineRun, LocalEngine

    source = "persons.csv" if how == "frame" else "persons.parquet"
    data = frame
    if how != "frame":
        engine = engine or LocalEngine()
        path = tmp_path / "persons.parquet"
        frame.to_parquet(path, index=False)
        data = EngineTable(engine.read_parquet(str(path)), "persons", str(path), len(frame), {c: "str" for c in frame})
        engine = EngineRun(engine, 1)
    inputs = Inputs(data, ("R1", "R2"), "E", {"SEX": ["1", "2"]}, source)
    messages = []
    for check in (
        lambda: check_records(inputs, table or _toy_table(), max_race_codes, fanouts or {}, engine),
        lambda: read_records(inputs, ["R1", "R2", "E", "SEX"], table or _toy_table(), max_race_codes, engine),
    ):
        try:
            out = check()
        except DataError as exc:
            messages.append(str(exc))
    if messages:  # read_records does not flatten: a fan-out only the driver's checks see
        assert messages[0] == messages[-1] and len(messages) == (1 if fanouts else 2), messages
        raise DataError(messages[0])
    return out


def fanout(frame, how, tmp_path, engine=None):
    """Flatten at level 1 with a declared fan-out of 3 (a record with codes A1 and B1 has 4)."""
    table = fan_table()
    try:
        read(frame, how, tmp_path, engine=engine, table=table, fanouts={(1, "coarse"): 3})
    except DataError as exc:
        checked = str(exc)
    else:
        raise AssertionError("the driver's checks let a record beyond the fan-out through")
    rec = read(frame, how, tmp_path, engine=engine, table=table).codes
    with pytest.raises(DataError) as info:
        flatten(rec, table, table.selection(1, "coarse"), 3, "persons.csv" if how == "frame" else "persons.parquet")
    assert str(info.value) == checked
    raise info.value


BAD = {  # name: (records, call, message on a frame, message on an engine table)
    "unknown race code": (
        records((3, "R1", "ZZ"), (6, "R1", "ZZ"), (7, "R1", "QQ")),
        read,
        r"persons.csv: row 4: column 'R1' holds the code 'ZZ', which is not in the code table \(3 such values in all\)",
        r"persons.parquet: column 'R1' holds the code 'QQ' in 1 row, which is not in the code table "
        r"\(3 such values in all\)",
    ),
    "unknown ethnicity code": (
        records((5, "E", "H9"), (6, "E", "H9")),
        read,
        r"persons.csv: row 6: column 'E' holds the code 'H9', which is not in the code table \(2 such values in all\)",
        r"persons.parquet: column 'E' holds the code 'H9' in 2 rows, which is not in the code table "
        r"\(2 such values in all\)",
    ),
    "no race code": (
        records((4, "R1", None), (5, "R1", None)),
        read,
        r"persons.csv: row 5: the record has no race code \(columns R1, R2\)",
        r"persons.parquet: 2 rows have no race code \(columns R1, R2\)",
    ),
    "missing ethnicity code": (
        records((2, "E", None)),
        read,
        r"persons.csv: row 3: column 'E' has no ethnicity code$",
        r"persons.parquet: column 'E' has no ethnicity code in 1 row$",
    ),
    "too many race codes": (
        records((1, "R2", "B1"), (4, "R2", "B1")),
        lambda f, how, tmp, **kw: read(f, how, tmp, max_race_codes=1, **kw),
        r"persons.csv: row 2: the record has 2 race codes, more than max_race_codes = 1",
        r"persons.parquet: 2 rows have more race codes than max_race_codes = 1, such as the 2 codes 'A1', 'B1' "
        r"\(2 rows\)",
    ),
    "variable value outside its values": (
        records((6, "SEX", "3"), (7, "SEX", "3")),
        read,
        r"persons.csv: row 7: column 'SEX' holds '3', not one of 1, 2",
        r"persons.parquet: column 'SEX' holds '3' in 2 rows, not one of 1, 2",
    ),
    "more groups than the declared fan-out": (
        records((2, "R2", "B1"), (5, "R2", "B1"), (7, "R2", "B1"), (7, "E", "H1")),
        fanout,
        r"persons.csv: row 3: the record falls into 4 population groups, more than the declared maximum fan-out 3",
        r"persons.parquet: 3 rows fall into more population groups than the declared maximum fan-out 3, such as 4 "
        r"for race codes 'A1', 'B1' and ethnicity code 'H0' \(2 rows\)",
    ),
}


@pytest.mark.parametrize("how", ["frame", "engine"])
@pytest.mark.parametrize("case", list(BAD))
def test_each_bad_record_is_named_by_row_or_by_value_and_rows(tmp_path, case, how):
    frame, call, on_frame, on_engine = BAD[case]
    with pytest.raises(DataError, match=on_frame if how == "frame" else on_engine):
        call(frame, how, tmp_path)


def test_the_good_records_read_on_both_paths(tmp_path):
    """The cases above fail for their change alone: unchanged records read and flatten."""
    table = fan_table()
    for how in ("frame", "engine"):
        rec = read(records(), how, tmp_path, table=table)
        assert rec.origin.weight.tolist() == [8]
        rows, its = flatten(rec.codes, table, table.selection(1, "coarse"), 3)
        assert len(rows) == 3


def test_spark_names_bad_records_as_the_local_engine_does(tmp_path, spark_session):
    """Counts come back sorted on both engines, so the value a message shows is the same."""
    from dpspec.engine.spark import SparkEngine

    spark = SparkEngine(session=spark_session)
    for case in ("unknown race code", "more groups than the declared fan-out"):
        frame, call, _, on_engine = BAD[case]
        messages = []
        for engine in (None, spark):
            with pytest.raises(DataError, match=on_engine) as info:
                call(frame, "engine", tmp_path, engine=engine)
            messages.append(str(info.value))
        assert messages[0] == messages[1]


def test_a_csv_record_with_an_unknown_code_exits_1_at_its_row(tmp_path):
    """Through the command line: a CSV source is read into pandas and names the row."""
    from click.testing import CliRunner

    from dpspec.cli.main import main

    inputs = tmp_path / "in"
    inputs.mkdir()
    frame = pd.read_parquet(DATA / "persons.parquet").iloc[:300].copy()
    frame["QRACE1"] = frame["QRACE1"].astype(object)
    frame.loc[41, "QRACE1"] = "0042"
    frame.to_csv(inputs / "persons.csv", index=False)
    result = CliRunner().invoke(main, ["compile", spec_reading(inputs, "persons.csv"), "-o", str(tmp_path / "out")])
    assert result.exit_code == 1, result.output
    assert "row 42: column 'QRACE1' holds the code '0042', which is not in the code table" in result.output
    assert "Traceback" not in result.output


def test_a_geography_or_variable_with_no_value_at_all_reads(tmp_path):
    """A column entirely missing (no AIAN/NH area among these records) has no labels at all:
    its units are none, as before; a variable entirely missing is a clear DataError."""
    from dpspec_safetab.records import region_codes

    frame = pd.DataFrame({"aiannh": pd.Series([None] * 4, dtype=object), "tract": ["2", "1", None, "2"]})
    region, codes = region_codes(frame, "aiannh")
    assert region.tolist() == [-1] * 4 and codes.tolist() == []
    region, codes = region_codes(frame, "tract")
    assert region.tolist() == [1, 0, -1, 1] and codes.tolist() == ["1", "2"]
    with pytest.raises(DataError, match=r"persons.csv: row 1: column 'SEX' holds 'None', not one of 1, 2"):
        read(records().assign(SEX=None), "frame", tmp_path)
