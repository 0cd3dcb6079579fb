"""Tables read and validated by the engine itself (issue 11): a Parquet source of a mechanism
that takes engine tables (TopDown) never reaches the driver as rows.

Every data check `load_table` makes is made here from engine aggregates, on both engines, with
the same words; TopDown from a partitioned directory gives the release it gives from the same
data in a CSV file, on the local engine and on Spark; and on Spark no row-level table is
collected: every frame that comes back to the driver is a count.
"""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dpspec.language.parser import parse
from dpspec.errors import DataError


def _geography_file() -> str:
    """The public geography of `population`: 3 states x 4 counties (a key file of the test's own)."""
    import tempfile

    folder = Path(tempfile.mkdtemp(prefix="dpspec-engine-data-"))
    rows = [(s, s + c) for s in ("01", "02", "10") for c in ("001", "003", "005", "007")]
    (folder / "geography.csv").write_text("state,county\n" + "".join(f"{a},{b}\n" for a, b in rows))
    return str(folder / "geography.csv")


GEOGRAPHY = _geography_file()

SPEC = textwrap.dedent("""\
    spec "engine-held persons"

    domain d "a partitioned person table" {
      stage edited
      geography geo { state > county }
      table households unit household {
        hid : category
      }
      table persons unit person in households by hid at most 6 {
        state  : category values from "GEO"
        county : category in state values from "GEO"
        hid    : category
        age    : int 0..99
        sex    : {"1", "2"}
      }
    }

    data persons from "SOURCE"

    invariants {
      count persons by state
    }

    public {
      keys "GEO" released "the test population's geography"
    }

    unit persons : hamming
    premetric zcdp

    mechanism topdown {
      table: persons
      variables: sex
      rho: 1
      levels: {
        nation: 0.25
        state: 0.25
        county: 0.5
      }
      queries: {
        total: 0.5
        detailed: 0.5
      }
    }
    """).replace("GEO", GEOGRAPHY)


NO_LINK = re.sub(r"\n *table households[^}]*}|\n *hid +: category| in households by hid at most 6", "", SPEC)


def population(n: int = 2000, seed: int = 3) -> pd.DataFrame:
    """Persons in 3 states x 4 counties, households of at most 6, ages and sexes at random."""
    rng = np.random.default_rng(seed)
    state = rng.choice(["01", "02", "10"], n)
    county = np.char.add(state.astype(str), rng.choice(["001", "003", "005", "007"], n))
    return pd.DataFrame(
        {
            "state": state,
            "county": county,
            "hid": [f"h{i // 4}" for i in range(n)],
            "age": rng.integers(0, 100, n),
            "sex": rng.choice(["1", "2"], n),
        }
    )


def write_partitioned(frame: pd.DataFrame, path: Path) -> Path:
    """Hive layout by state, as Spark writes it (state=01/...), with a _SUCCESS marker."""
    if frame.empty:  # a table of no rows still has its columns, in one empty file
        (path / "state=01").mkdir(parents=True)
        frame.drop(columns="state").to_parquet(path / "state=01" / "part-0.parquet", index=False)
    for code, part in frame.groupby("state", sort=True):
        (path / f"state={code}").mkdir(parents=True, exist_ok=True)
        part.drop(columns="state").to_parquet(path / f"state={code}" / "part-0.parquet", index=False)
    (path / "_SUCCESS").write_text("")
    return path


def spec_for(tmp_path: Path, source: str, text: str = SPEC):
    path = tmp_path / "persons.dps"
    path.write_text(text.replace("SOURCE", source))
    return parse(path.read_text(), str(path))


@pytest.fixture(params=["local", "spark"])
def engine(request):
    from dpspec.engine import LocalEngine

    if request.param == "local":
        return LocalEngine()
    from dpspec.engine.spark import SparkEngine

    return SparkEngine(session=request.getfixturevalue("spark_session"))


def load(tmp_path, frame, engine, text=SPEC):
    from dpspec.engine.loading import load_engine_table

    write_partitioned(frame, tmp_path / "persons")
    spec = spec_for(tmp_path, "persons/", text)
    return load_engine_table(spec, spec.data[0], engine)


def test_a_valid_directory_becomes_an_engine_table(tmp_path, engine):
    from dpspec.engine.local import count_frame

    frame = population()
    table = load(tmp_path, frame, engine)
    assert table.rows == len(frame) and table.kinds["age"] == "int64" and table.kinds["state"] == "str"
    assert table.categories["sex"] == ("1", "2")
    assert table.categories["state"] == ("01", "02", "10")  # partition values as text: "01" stays "01"
    counts = engine.count(table.handle, ["state", "sex"])
    assert counts.equals(count_frame(frame, ["state", "sex"]))


def test_a_nullable_bool_keeps_its_missing_values(tmp_path, engine):
    """A `bool nullable` column travels as pandas' nullable boolean on both engines: its missing
    values stay missing when counted and inside units of work (a plain bool would make them False)."""
    from dpspec.engine import EngineRun

    frame = population(200).assign(
        employed=lambda f: pd.array(
            np.where(np.arange(len(f)) % 5 == 0, None, np.arange(len(f)) % 2 == 0), dtype="boolean"
        )
    )
    text = SPEC.replace('sex    : {"1", "2"}', 'sex    : {"1", "2"}\n        employed : bool nullable')
    table = load(tmp_path, frame, engine, text)
    assert table.kinds["employed"] == "boolean" and str(table.dtype("employed")) == "boolean"
    counts = engine.count(table.handle, ["employed"])
    assert counts["employed"].isna().sum() == 1 and counts["count"].tolist() == [80, 80, 40]
    seen = EngineRun(engine, 1).map_groups(
        table, ["state"], lambda key, rows, rng: rows[["employed"]], stage="t", schema={"employed": "boolean"}
    )
    assert str(seen["employed"].dtype) == "boolean" and int(seen["employed"].isna().sum()) == 40


def test_a_large_id_column_is_checked_from_one_profile_row(tmp_path, engine, monkeypatch):
    """A household id with more codes than VALUE_SET_LIMIT is not counted code by code (a row per
    household on the driver): its profile (one row) shows it clean, it gets no value set, and
    the other columns are checked as before. A dirty id is counted in full, so its error reads
    as any other column's."""
    from dpspec.engine import loading

    monkeypatch.setattr(loading, "VALUE_SET_LIMIT", 100)
    counted = []
    real = type(engine).count_groups

    def watched(self, table, groups):  # the loader counts every column group through this
        counted.extend(list(by) for by in groups)
        return real(self, table, groups)

    monkeypatch.setattr(type(engine), "count_groups", watched)
    frame = population()
    table = load(tmp_path, frame, engine)
    assert ["hid"] not in counted and "hid" not in table.categories and table.rows == len(frame)
    assert table.kinds["hid"] == "str" and table.categories["sex"] == ("1", "2")
    profile = engine.profile(table.handle, "hid")
    assert profile == {"rows": 2000, "distinct": 500, "missing": 0, "nul": 0, "largest": 4}
    counted.clear()
    big = frame.assign(hid=np.where(np.arange(len(frame)) < 7, "big", frame["hid"]))
    with pytest.raises(DataError, match=r"1 households hid value holds more than 6 persons rows.*big \(7 rows\)"):
        load(tmp_path / "dirty", big, engine)
    assert ["hid"] in counted
    with pytest.raises(DataError, match=r"column 'hid': 1 missing values where none are allowed"):
        load(tmp_path / "missing", frame.assign(hid=frame["hid"].where(np.arange(len(frame)) != 7, None)), engine)


def test_a_profile_counts_missing_and_nul_values_on_both_engines(tmp_path, engine):
    frame = pd.DataFrame({"h": ["a", "a", "b\x00x", "b\x00x", "b\x00x", None, "c"]})
    frame.to_parquet(tmp_path / "t.parquet", index=False)
    assert engine.profile(engine.read_parquet(str(tmp_path / "t.parquet")), "h") == {
        "rows": 7,
        "distinct": 4,
        "missing": 1,
        "nul": 3,
        "largest": 3,
    }


@pytest.mark.parametrize(
    "change,message",
    [
        (lambda f: f.drop(columns="age"), r"table 'persons' needs column\(s\) age, which the file does not have"),
        (lambda f: f.iloc[:0], r"table 'persons' has no rows"),
        (
            lambda f: f.assign(age=np.where(np.arange(len(f)) < 3, 120, f["age"])),
            r"column 'age': 3 values outside 0\.\.99: 120 \(3 rows\)",
        ),
        (
            lambda f: f.assign(age=np.where(np.arange(len(f)) < 2, 4.5, f["age"])),
            r"column 'age': 2 values that are not whole numbers: 4\.5 \(2 rows\)",
        ),
        (
            lambda f: f.assign(sex=np.where(np.arange(len(f)) < 5, "9", f["sex"])),
            r"column 'sex': 5 values outside \{1, 2\}: .?9.? \(5 rows\)",
        ),
        (
            lambda f: f.assign(hid=f["hid"].where(np.arange(len(f)) != 7, None)),
            r"column 'hid': 1 missing values where none are allowed: .?<empty>.? \(1 row\)",
        ),
        (
            lambda f: f.assign(
                state=np.where(np.arange(len(f)) == 0, "01", f["state"]),
                county=np.where(np.arange(len(f)) == 0, "02001", f["county"]),
            ),
            r"county '02001' lies in more than one state \(01, 02\)",
        ),
        (
            lambda f: f.assign(hid=np.where(np.arange(len(f)) < 7, "big", f["hid"])),
            r"1 households hid value holds more than 6 persons rows.*big \(7 rows\)",
        ),
    ],
    ids=["column", "empty", "range", "whole", "enum", "missing", "nesting", "link"],
)
def test_each_data_check_on_the_engine(tmp_path, engine, change, message):
    frame = change(population())
    with pytest.raises(DataError, match=message):
        load(tmp_path, frame, engine)


def test_directory_fingerprint_streams_every_data_file_and_nothing_else(tmp_path):
    from dpspec.check.sources import directory_sha256

    path = write_partitioned(population(300), tmp_path / "persons")
    first = directory_sha256(str(path))
    (path / "_SUCCESS").write_text("other marker")  # not data: readers skip it, so does the fingerprint
    (path / ".part-0.parquet.crc").write_text("x")
    assert directory_sha256(str(path)) == first
    part = path / "state=02" / "part-0.parquet"
    part.write_bytes(part.read_bytes() + b"\0")  # one byte more in one file
    assert directory_sha256(str(path)) != first
    part.write_bytes(part.read_bytes()[:-1])
    part.rename(path / "state=02" / "part-1.parquet")  # the same bytes under another name
    assert directory_sha256(str(path)) != first


def release(result, out: Path) -> dict:
    """The release files, written outside the folder holding the inputs (which is refused)."""
    from dpspec.publish.output import write_result

    out = out.parent.parent / "releases" / out.name if out.parent.name == "inputs" else out
    write_result(result, str(out))
    return {p.name: p.read_bytes() for p in sorted(out.iterdir()) if p.suffix == ".csv"}


def test_topdown_from_a_partitioned_directory_gives_the_csv_release(tmp_path):
    """The same persons as a CSV file (pandas, today's path) and as a partitioned directory
    (an engine table): the same release, byte for byte, and the manifest fingerprints the
    directory."""
    tmp_path = tmp_path / "inputs"  # the spec and its data; releases go beside, not inside
    tmp_path.mkdir()
    import dpspec
    from dpspec.engine.table import EngineTable

    frame = population()
    frame.to_csv(tmp_path / "persons.csv", index=False)
    write_partitioned(frame, tmp_path / "persons")
    (tmp_path / "csv.dps").write_text(SPEC.replace("SOURCE", "persons.csv"))
    (tmp_path / "dir.dps").write_text(SPEC.replace("SOURCE", "persons/"))
    from_csv = dpspec.compile(str(tmp_path / "csv.dps"), seed=7)
    seen = {}
    from dpspec_topdown.plugin import TopDown

    original = TopDown.run

    def spy(self, spec, params, data, ctx):
        seen["persons"] = type(data["persons"])
        return original(self, spec, params, data, ctx)

    TopDown.run = spy
    try:
        from_dir = dpspec.compile(str(tmp_path / "dir.dps"), seed=7)
    finally:
        TopDown.run = original
    assert seen["persons"] is EngineTable
    assert release(from_dir, tmp_path / "a") == release(from_csv, tmp_path / "b")
    assert from_dir.release.internal == from_csv.release.internal
    assert list(from_dir.data_hashes) == ["persons/"] and len(from_dir.data_hashes["persons/"]) == 64


def test_the_output_may_not_go_inside_a_data_directory(tmp_path):
    from dpspec.publish.input_guard import UnsafeOutputError, check_output_target

    data = write_partitioned(population(200), tmp_path / "persons")
    with pytest.raises(UnsafeOutputError, match="is or is inside the input folder"):
        check_output_target(str(data / "out"), [str(data)])


def test_on_spark_the_driver_collects_counts_not_persons(tmp_path, counts_only_spark):
    """Compile TopDown on Spark from a partitioned directory: every frame Spark hands the driver
    is an aggregate (far fewer rows than persons), and the engine is never asked for the table
    itself; the release is the local engine's, byte for byte."""
    tmp_path = tmp_path / "inputs"  # the spec and its data; releases go beside, not inside
    tmp_path.mkdir()
    import dpspec

    frame = population(6000)
    write_partitioned(frame, tmp_path / "persons")
    (tmp_path / "dir.dps").write_text(NO_LINK.replace("SOURCE", "persons/"))  # no household codes to count
    local = dpspec.compile(str(tmp_path / "dir.dps"), seed=11)

    engine, collected = counts_only_spark  # TopDown needs no row-level units
    on_spark = dpspec.compile(str(tmp_path / "dir.dps"), seed=11, engine=engine)
    assert collected and max(collected) <= len(frame) // 20, (
        collected
    )  # 12 counties x 2 sexes, codes: not 6,000 persons
    assert release(on_spark, tmp_path / "spark") == release(local, tmp_path / "local")


def test_spark_ships_driver_built_units_in_bounded_batches(spark_session, monkeypatch):
    """map_items sends units in jobs of at most MAX_JOB_BYTES of payload (TopDown's block level
    is gigabytes at 10M persons): with a tiny bound every unit is its own job, and the results
    are still every unit's, in the items' order, drawn from the unit's own stream."""
    from dpspec.engine import EngineRun, LocalEngine
    from dpspec.engine import spark as spark_engine
    from dpspec.engine.spark import SparkEngine, payload_batches

    items = [(("node", i), np.full(500 * (i % 3 + 1), i)) for i in range(7)]
    sizes = [len(b) for b in payload_batches(items, 9_000)]
    assert sum(sizes) == 7 and max(sizes) < 7 and min(sizes) >= 1

    def unit(key, payload, rng):
        return int(payload.sum()) + int(rng.integers(0, 1 << 30))

    monkeypatch.setattr(spark_engine, "MAX_JOB_BYTES", 1)
    on_spark = EngineRun(SparkEngine(session=spark_session), 4).map_items(items, unit, stage="nodes")
    assert on_spark == EngineRun(LocalEngine(), 4).map_items(items, unit, stage="nodes")


def test_spark_keeps_each_task_under_its_message_limit(spark_session, monkeypatch):
    """A task carries its units in one message, which Spark refuses over
    spark.rpc.message.maxSize (the 10M DHC cluster run failed on a 155 MB task): a job's units
    go in tasks of at most half of it, and a unit larger than that alone as a broadcast
    variable, with every unit's result as on the local engine."""
    from dpspec.engine import EngineRun, LocalEngine
    from dpspec.engine import spark as spark_engine
    from dpspec.engine.spark import SparkEngine, payload_bytes, task_chunks, task_payload_limit

    assert task_payload_limit(spark_session.sparkContext) == 64 << 20  # the default 128 MiB, halved
    items = [(("node", i), np.full(500 * (i % 3 + 1), i)) for i in range(9)]
    batch = list(enumerate(items))
    tasks = task_chunks(batch, 9_000, 2)
    assert [u for t in tasks for u in t] == batch  # every unit once, in order
    sizes = [sum(payload_bytes(item[1]) for _, item in t) for t in tasks]
    assert all(size <= 9_000 or len(t) == 1 for size, t in zip(sizes, tasks)) and len(tasks) >= 4
    assert len(task_chunks(batch[:3], 1 << 30, 2)) == 2  # small jobs still use both executors
    assert len(task_chunks(batch[:1], 1 << 30, 2)) == 1

    def unit(key, payload, rng):
        return int(payload.sum()) + int(rng.integers(0, 1 << 30))

    broadcasts = []
    real = spark_session.sparkContext.broadcast
    monkeypatch.setattr(spark_session.sparkContext, "broadcast", lambda v: broadcasts.append(v) or real(v))
    monkeypatch.setattr(spark_engine, "task_payload_limit", lambda context: 9_000)  # the largest units exceed it
    sized = []
    monkeypatch.setattr(spark_engine, "payload_bytes", lambda payload: sized.append(1) or payload_bytes(payload))
    on_spark = EngineRun(SparkEngine(session=spark_session), 4).map_items(items, unit, stage="nodes")
    assert on_spark == EngineRun(LocalEngine(), 4).map_items(items, unit, stage="nodes")
    assert len(broadcasts) == 3 and all(b.size == 1500 for b in broadcasts)  # the three 12 KB units
    assert len(sized) == len(items)  # each unit pickled once to size it (a bytes payload is copied each time)


def test_a_directory_source_loads_into_pandas_for_other_mechanisms(tmp_path):
    """Mechanisms that take pandas frames (swapping, SafeTab) read a directory source too: the
    same validated frame as from a CSV file, rows aside (a directory is stored by partition)."""
    from dpspec.check.data import load_table

    frame = population(500)
    frame.to_csv(tmp_path / "persons.csv", index=False)
    write_partitioned(frame, tmp_path / "persons")
    from_csv = load_table(spec_for(tmp_path, "persons.csv"), spec_for(tmp_path, "persons.csv").data[0])
    spec = spec_for(tmp_path, "persons/")
    from_dir = load_table(spec, spec.data[0])
    key = ["hid", "state", "county", "age", "sex"]
    a = from_csv.sort_values(key).reset_index(drop=True)
    b = from_dir.sort_values(key).reset_index(drop=True)
    pd.testing.assert_frame_equal(a, b)
