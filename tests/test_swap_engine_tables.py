"""Swapping on tables the engine holds (issue 11, item 2): a Parquet source is read, swapped and
released by the engine; the driver gets counts and the streamed release, never the input rows.

Every bundled swap spec, its data written as one Parquet file and as a hive-partitioned
directory: the same release bytes on the local engine (both layouts) and on Spark local[2].
The 1940 households (1.1M) are cut to a seeded sample so a Spark compile takes seconds.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dpspec.errors import MechanismError
from dpspec_swap.on_engine import swap_stratum_rows as real_unit

from tests.key_files import keys_from

ROOT = Path(__file__).resolve().parents[1]
SPECS = ROOT / "specs"
SWAP_SPECS = sorted(p.name for p in SPECS.glob("*.dps") if re.search(r"^mechanism swap\b", p.read_text(), re.M))
PARTITION = {"ma1940_swap.dps": "county", "ma1940_swap_fine.dps": "county", "acs_ma2019_swap.dps": "PUMA"}
SAMPLE = 150  # households of 1940 Massachusetts kept: one in SAMPLE, drawn with a fixed seed


def source_frame(name: str) -> pd.DataFrame:
    text = (SPECS / name).read_text()
    rel = re.search(r'^data \w+ from "([^"]+)"', text, re.M).group(1)
    path = SPECS / rel
    frame = pd.read_parquet(path) if path.suffix == ".parquet" else pd.read_csv(path, dtype=str)
    if len(frame) > 100_000:
        keep = np.random.default_rng(1940).random(len(frame)) < 1 / SAMPLE
        frame = frame[keep].reset_index(drop=True)
    return frame


def write_hive(frame: pd.DataFrame, column: str, path: Path) -> None:
    """column=VALUE/part-0.parquet folders, as Spark writes them, with a _SUCCESS marker."""
    for value, part in frame.groupby(column, sort=True, observed=True):
        (path / f"{column}={value}").mkdir(parents=True)
        part.drop(columns=column).to_parquet(path / f"{column}={value}" / "part-0.parquet", index=False)
    (path / "_SUCCESS").write_text("")


def layouts(tmp_path: Path, name: str) -> dict[str, str]:
    """The bundled spec with its data as a Parquet file ("file") and a partitioned directory ("dir")."""
    folder = tmp_path / "in"  # the spec and its data; releases go beside, never inside
    folder.mkdir(exist_ok=True)
    frame = source_frame(name)
    frame.to_parquet(folder / "table.parquet", index=False)
    write_hive(frame, PARTITION[name], folder / "table")
    text = keys_from((SPECS / name).read_text(), SPECS)
    out = {}
    for layout, source in (("file", "table.parquet"), ("dir", "table/")):
        spec = folder / f"{layout}-{name}"
        spec.write_text(re.sub(r'^data (\w+) from "[^"]+"', rf'data \1 from "{source}"', text, flags=re.M))
        out[layout] = str(spec)
    return out


def release_bytes(result, out: Path) -> dict[str, bytes]:
    from dpspec.publish.output import write_result

    write_result(result, str(out))
    return {p.name: p.read_bytes() for p in sorted(out.iterdir()) if p.suffix == ".csv"}


def compile_on(spec: str, engine, seed: int = 11):
    import dpspec

    return dpspec.compile(spec, seed=seed, engine=engine)


def spark(session, **kw):
    from dpspec.engine.spark import SparkEngine

    return SparkEngine(session=session, **kw)


def test_every_bundled_swap_spec_is_covered():
    assert SWAP_SPECS == sorted(PARTITION)


@pytest.mark.parametrize("name", SWAP_SPECS)
def test_local_and_spark_release_the_same_bytes_from_file_and_directory(tmp_path, spark_session, name):
    from dpspec.api import StreamedTable

    specs = layouts(tmp_path, name)
    local = compile_on(specs["file"], "local")
    table = local.release.outputs[local.release.facts["swap_table"]]
    assert isinstance(table, StreamedTable) and table.engine_bound  # the engine path, not pandas
    want = release_bytes(local, tmp_path / "local-file")
    assert release_bytes(compile_on(specs["dir"], "local"), tmp_path / "local-dir") == want
    on_spark = compile_on(specs["dir"], spark(spark_session, partitions=3))
    assert release_bytes(on_spark, tmp_path / "spark-dir") == want
    assert on_spark.facts == local.facts and on_spark.release.internal == local.release.internal
    # the microdata are sorted by every column, so the file says nothing of the input's order
    micro = pd.read_csv(tmp_path / "local-file" / f"{local.release.facts['swap_table']}.csv")
    assert micro.equals(micro.sort_values(list(micro.columns), kind="mergesort").reset_index(drop=True))


def test_engine_facts_and_figures_equal_the_pandas_ones(tmp_path):
    """b, the strata, the alternatives, swapped records and MAPE from engine counts are what the
    pandas path computes on the same rows (the tie-break of an equal b aside: none here)."""
    import dpspec
    from dpspec.check.data import load_data

    specs = layouts(tmp_path, "acs_ma2019_swap.dps")
    on_engine = compile_on(specs["file"], "local")
    spec = dpspec.load(specs["file"])
    frames, _ = load_data(spec)
    from_pandas = dpspec.compile(spec, data=frames, seed=11)
    assert on_engine.facts == from_pandas.facts
    a, b = on_engine.release.internal["run"], from_pandas.release.internal["run"]
    assert a["tables"].keys() == b["tables"].keys()
    assert abs(a["swapped_fraction"] - 0.1) < 0.02 and abs(b["swapped_fraction"] - 0.1) < 0.02
    # the release keeps the swapped table's invariants: same counts by (match, hold) and (match, swap)
    released = on_engine.published["persons"]  # read whole: compile stopped the engine it started
    original = frames["persons"]
    for cols in (["STATE", "SEX", "AGE_BAND", "RAC1P", "HISP"], ["PUMA", "SEX", "AGE_BAND"]):
        assert (
            released.groupby(cols, observed=True).size().astype(str).to_dict()
            == original.groupby(cols, observed=True).size().astype(str).to_dict()
        )
    moved = released.groupby(["PUMA", "RAC1P"], observed=True).size()
    assert not moved.equals(original.groupby(["PUMA", "RAC1P"], observed=True).size())  # the swap did something


def watched_spark(spark_session, monkeypatch, partitions: int):
    """(a Spark engine that refuses to hand the driver a whole table, the (columns, rows) of
    every frame Spark's toPandas hands the driver, the rows of every batch toLocalIterator
    streams): what a test that only aggregates and the release reach the driver watches."""
    from dpspec.engine.spark import SparkEngine

    class NoRows(SparkEngine):
        def to_pandas(self, table):
            raise AssertionError("the driver asked for the whole table")

    DataFrame = type(spark_session.range(1))
    collected, streamed = [], []
    to_pandas, local_iterator = DataFrame.toPandas, DataFrame.toLocalIterator

    def counting(self):
        out = to_pandas(self)
        collected.append((list(out.columns), len(out)))
        return out

    def iterating(self, *args, **kw):
        for row in local_iterator(self, *args, **kw):
            streamed.append(len(row[0]))
            yield row

    monkeypatch.setattr(DataFrame, "toPandas", counting)
    monkeypatch.setattr(DataFrame, "toLocalIterator", iterating)
    return NoRows(session=spark_session, partitions=partitions), collected, streamed


def test_on_spark_only_counts_and_the_streamed_release_reach_the_driver(tmp_path, spark_session, monkeypatch):
    """Every frame Spark's toPandas hands the driver is a count (far fewer rows than the
    households), the engine is never asked for the whole table, and the only rows streamed are
    the release's, once, while it is written."""
    specs = layouts(tmp_path, "ma1940_swap.dps")
    rows = len(source_frame("ma1940_swap.dps"))
    engine, collected, streamed = watched_spark(spark_session, monkeypatch, partitions=2)
    result = compile_on(specs["dir"], engine)
    assert collected and all("count" in cols for cols, _ in collected), collected  # aggregates only
    assert max(n for _, n in collected) <= rows // 20, (rows, collected)
    assert not streamed  # nothing streamed before the release is written
    files = release_bytes(result, tmp_path / "out")
    assert streamed and files["households.csv"].count(b"\n") == rows + 1


def broken_unit(key, rows, rng, rate, swap):
    """A unit that moves every record of its stratum to the stratum's first county: it breaks
    the (match x swap) invariant."""
    out = rows.copy()
    out[swap[0]] = rows[swap[0]].iloc[0]
    out["__swap_selected"] = True
    return out


def failing_unit(key, rows, rng, rate, swap):
    if key[-1] == 3:
        raise RuntimeError("no derangement today")
    return real_unit(key, rows, rng, rate, swap)


@pytest.mark.parametrize("engine", ["local", "spark"])
@pytest.mark.parametrize(
    "unit,message",
    [
        (broken_unit, r"invariant 'count households by [a-z, ]*county[a-z, ]*' changed"),
        (failing_unit, r"swap: the unit of work \('MA', 3\) failed: RuntimeError: no derangement today"),
    ],
    ids=["breaks an invariant: caught", "fails: named by its stratum"],
)
def test_a_bad_unit_is_reported(tmp_path, request, monkeypatch, engine, unit, message):
    from dpspec_swap import on_engine

    specs = layouts(tmp_path, "ma1940_swap.dps")
    monkeypatch.setattr(on_engine, "swap_stratum_rows", unit)
    chosen = "local" if engine == "local" else spark(request.getfixturevalue("spark_session"))
    with pytest.raises(MechanismError, match=message):
        compile_on(specs["file"], chosen)


def test_a_csv_source_keeps_the_pandas_path(tmp_path):
    """A CSV source is read into pandas and swapped as before: the microdata keep the input's
    row order (a frame, not a stream)."""
    result = compile_on(str(SPECS / "acs_ma2019_swap.dps"), "local")
    assert isinstance(result.release.outputs["persons"], pd.DataFrame)


# ---- the engine contract itself -----------------------------------------------------------


def test_held_outputs_stream_in_one_order_on_both_engines(spark_session):
    """map_groups(collect=False) keeps the outputs on the engine; `stream` returns them sorted
    by every column in chunks of about chunk_rows, and `count` counts them there: the same on
    both engines, whatever the chunk size or partitioning."""
    from dpspec.engine import EngineRun, LocalEngine
    from tests.test_engine import people, shuffle_within

    frame = people(n=900)
    local = EngineRun(LocalEngine(), 5)
    collected = local.map_groups(frame, ["state"], shuffle_within, stage="swap")
    held = local.map_groups(frame, ["state"], shuffle_within, stage="swap", collect=False)
    want = collected.sort_values(list(collected.columns), kind="mergesort").reset_index(drop=True)
    on_spark = EngineRun(spark(spark_session, partitions=3), 5)
    held_spark = on_spark.map_groups(frame, ["state"], shuffle_within, stage="swap", collect=False)
    for run, table in ((local, held), (on_spark, held_spark)):
        chunks = list(run.stream(table, chunk_rows=200))
        assert len(chunks) >= 3 and all(len(c) <= 500 for c in chunks)  # about chunk_rows each
        got = pd.concat(chunks, ignore_index=True)
        assert got.equals(want), run.name
        assert run.count(table, ["state"]).equals(local.count(frame, ["state"]))
        distinct = run.count_distinct(table, ["state", "size"], ["value", "flag"])
        assert distinct.equals(local.count_distinct(collected, ["state", "size"], ["value", "flag"]))
        assert distinct["count"].sum() == len(frame) and (distinct["flag"] <= 2).all()
        only = pd.concat(run.stream(table, order_by=["value"], columns=["value"]), ignore_index=True)
        assert only["value"].tolist() == sorted(frame["value"].tolist())
    on_spark.drop(held_spark)


def test_carrying_along_from_parquet_is_an_engine_join(tmp_path):
    """A spec that carries swaps along to persons compiles from Parquet with the persons joined
    on the engine (`Engine.lookup`; tests/test_swap_carry_engine.py), and every person gets its
    household's county."""
    from dpspec.api import StreamedTable

    import dpspec
    from tests.test_swap_plugin import INVARIANTS, PERSONS_INVARIANT, household_spec, make_households, make_persons

    folder = tmp_path / "in"
    folder.mkdir()
    hh = make_households(300, 21)
    household_spec(folder, hh, persons=make_persons(hh, 22), invariants=INVARIANTS + [PERSONS_INVARIANT])
    for name in ("households", "persons"):
        pd.read_csv(folder / f"{name}.csv").to_parquet(folder / f"{name}.parquet", index=False)
    path = folder / "households.dps"
    path.write_text(path.read_text().replace(".csv", ".parquet"))
    result = dpspec.compile(str(path), seed=3)
    assert isinstance(result.release.outputs["persons"], StreamedTable)
    out_hh, out_p = result.published["households"], result.published["persons"]
    joined = out_p.merge(out_hh[["hhid", "county"]], on="hhid", suffixes=("", "_household"))
    assert len(joined) == len(out_p) == len(make_persons(hh, 22))
    assert (joined["county"].astype(str) == joined["county_household"].astype(str)).all()
    assert (out_hh.sort_values("hhid")["county"].astype(str).to_numpy() != hh["county"].to_numpy()).sum() > 30
