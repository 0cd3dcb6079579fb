"""TopDown's release files written in parts where the units run, joined into the same bytes.

A streamed table's `write_parts` (API 1.7) writes its rows as header-less CSV part files, one per
range of units, in a scratch folder beside the staged output set; the driver writes the header
and joins the parts after it by kernel copy. What must hold: the files are the bytes the serial
path (the driver formatting every chunk) writes, and the bytes main wrote before, whatever the
number of parts and chunks and wherever the parts are written (this process, a pool, Spark's
executors); a part that fails publishes nothing and leaves nothing beside the target; a part
holding a value a spreadsheet would run is refused, as the driver refuses it.
"""

from __future__ import annotations

import hashlib
import os
import traceback
from pathlib import Path

import attrs
import numpy as np
import pytest

import dpspec
from dpspec.api import DataError, MechanismError, StreamedTable
from dpspec.engine import EngineRun, LocalEngine, new_run_key
from dpspec.publish.output import write_result
from dpspec.publish.output_set import output_set, scratch_beside
from dpspec.publish.table_csv import append_file, write_table_csv
from dpspec_topdown.design import Design
from dpspec_topdown.release import parts as parts_module
from dpspec_topdown.release import tables as release_tables
from dpspec_topdown.release.parts import PartWriter
from dpspec_topdown.run import steps
from dpspec_topdown.run import topdown as td_engine
from dpspec_topdown.run.context import RunContext
from dpspec_topdown.run.topdown import run_topdown
from dpspec_topdown.synthetic import (
    LEVELS,
    PL94_VARIABLES,
    PRODUCTION_LEVEL_SHARES,
    PRODUCTION_RHO,
    generate_population,
    pl94_strategy,
)
from tests.test_topdown_streamed import BEFORE

ROOT = Path(__file__).resolve().parents[1]
SPEC = ROOT / "specs" / "acs_national_topdown.dps"  # two streamed tables and a count table; seconds to compile
PINNED = BEFORE["acs_national_topdown.dps"]  # the files main wrote before the tables were streamed


def _in_parts(monkeypatch, parts: int, chunk_rows: int = 500) -> list:
    """Compile with two workers, chunks of `chunk_rows` rows and each table in exactly `parts`
    files; returns the number of parts each table was split into, as they are written."""
    monkeypatch.setattr(td_engine, "default_workers", lambda: 2)
    monkeypatch.setattr(steps, "CHUNK_ROWS", chunk_rows)
    split, counts = parts_module.split, []

    def forced(sizes, wanted):
        out = split(sizes, parts)
        counts.append(len(out))
        return out

    monkeypatch.setattr(parts_module, "split", forced)
    return counts


def _digests(result, out: Path) -> dict:
    write_result(result, str(out))
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(out.iterdir()) if p.suffix == ".csv"}


def _serial(result):
    """The same result written the way it was before parts: the driver formats every chunk."""
    published = {
        name: attrs.evolve(t, write_parts=None) if isinstance(t, StreamedTable) else t
        for name, t in result.published.items()
    }
    return attrs.evolve(result, published=published)


def _streamed(result) -> list:
    return [t for t in result.published.values() if isinstance(t, StreamedTable)]


@pytest.mark.parametrize(("parts", "chunk_rows"), [(1, 500), (2, 37), (7, 1)])  # 1: a finest unit or a node a chunk
def test_a_compile_in_parts_writes_the_bytes_of_the_serial_path(tmp_path, monkeypatch, parts, chunk_rows):
    counts = _in_parts(monkeypatch, parts, chunk_rows)
    result = dpspec.compile(str(SPEC), seed=7, engine=LocalEngine())  # the caller's engine: tables keep their parts
    assert len(_streamed(result)) == 2 and all(t.write_parts is not None for t in _streamed(result))
    in_parts = _digests(result, tmp_path / "parts")
    assert counts == [parts, parts]  # both tables really in `parts` files (one: this process; more: the pool)
    assert in_parts == _digests(_serial(result), tmp_path / "serial") == PINNED
    assert sorted(os.listdir(tmp_path)) == ["parts", "serial"]  # no scratch folder, lock or staged set left


@pytest.mark.slow  # a Spark session: each part a task on the executors
@pytest.mark.parametrize("parts", [1, 2, 7])
def test_on_spark_the_executors_write_the_parts_and_the_bytes_are_the_same(tmp_path, monkeypatch, spark_session, parts):
    from dpspec.engine.spark import SparkEngine

    counts = _in_parts(monkeypatch, parts)

    def not_here(self, *args, **kwargs):
        raise AssertionError("a part was written by the driver: the executors did not reach the scratch folder")

    monkeypatch.setattr(PartWriter, "_here", not_here)
    result = dpspec.compile(str(SPEC), seed=7, engine=SparkEngine(session=spark_session))
    assert all(t.write_parts is not None for t in _streamed(result))
    assert _digests(result, tmp_path / "out") == PINNED
    assert counts == [parts, parts]


def test_given_an_engine_by_name_the_tables_are_written_from_their_chunks(tmp_path, monkeypatch):
    """compile stops an engine it started itself before the write, and a part may need it."""
    _in_parts(monkeypatch, 2)
    result = dpspec.compile(str(SPEC), seed=7, engine="local")
    assert all(t.write_parts is None for t in _streamed(result))
    assert _digests(result, tmp_path / "out") == PINNED


# --- a failed part publishes nothing ----------------------------------------------------------


class _FailingAfterTheFirst(release_tables._MicroPieces):
    """The microdata's pieces, but a part not starting at the first unit raises (a disk that
    fills up while a part is written): a class of this module, so a pool's processes run it too."""

    def frames(self, pieces, source):
        if pieces[0][0] != 0:
            raise OSError("No space left on device")
        yield from super().frames(pieces, source)


@pytest.mark.parametrize("workers", [1, 2])
def test_a_part_that_raises_leaves_no_output_set_and_nothing_beside_it(tmp_path, monkeypatch, workers):
    _in_parts(monkeypatch, 3)
    monkeypatch.setattr(release_tables, "_MicroPieces", _FailingAfterTheFirst)
    if workers == 1:  # the parts one after another in this process (a run of one worker writes from chunks)
        monkeypatch.setattr(td_engine, "PartWriter", lambda engine, w: PartWriter(None, 1))
    result = dpspec.compile(str(SPEC), seed=7, engine=LocalEngine())
    out = tmp_path / "out"
    with pytest.raises(MechanismError, match="writing persons.csv: the part part-0000[12].csv failed: OSError"):
        write_result(result, str(out))
    assert os.listdir(tmp_path) == []  # no set, no staged folder, no scratch folder, no lock


def test_a_failed_part_keeps_the_previous_set(tmp_path, monkeypatch):
    out = tmp_path / "out"
    write_result(dpspec.compile(str(SPEC), seed=7, engine=LocalEngine()), str(out))
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    _in_parts(monkeypatch, 2)
    monkeypatch.setattr(release_tables, "_MicroPieces", _FailingAfterTheFirst)
    with pytest.raises(MechanismError, match="No space left on device"):
        write_result(dpspec.compile(str(SPEC), seed=8, engine=LocalEngine()), str(out))
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    assert sorted(os.listdir(tmp_path)) == ["out"]


# --- formulas are refused in a part as on the driver ------------------------------------------


@pytest.fixture(scope="module")
def with_a_formula():
    """A TopDown run whose release would hold the county code =2+3, its release written in parts."""
    persons = generate_population(3000, 120, seed=5)
    county = persons["county"].astype(str)
    persons["county"] = county.where(county != county.iloc[0], "=2+3")
    run = EngineRun(LocalEngine(), new_run_key(3))
    return run_topdown(persons, _design(), RunContext(np.random.default_rng(3), engine=run, workers=2))


def _design() -> Design:
    """The production P.L. 94 strategy on the synthetic geography (nation and its five levels)."""
    return Design(
        ["nation"] + LEVELS,
        PL94_VARIABLES,
        pl94_strategy(tuple(PRODUCTION_LEVEL_SHARES)),
        PRODUCTION_RHO,
        PRODUCTION_LEVEL_SHARES,
        "hamming",
        [("state", ())],
    )


@pytest.mark.parametrize("table", ["persons", "measurements"])
@pytest.mark.parametrize("workers", [1, 2])
def test_a_formula_in_a_part_is_refused_naming_the_file_and_nothing_is_published(
    tmp_path, with_a_formula, table, workers
):
    res, writer = with_a_formula, PartWriter(None, workers, 3)
    if table == "persons":
        streamed, column = res.microdata_table(chunk_rows=500, writer=writer), "county"
    else:
        streamed, column = res.measurements_table(chunk_rows=500, writer=writer), "geocode"
    out = tmp_path / "out"
    with pytest.raises(DataError, match=f"{table}.csv: column '{column}' would release '=2\\+3'") as err:
        with output_set(str(out)) as staged, scratch_beside(staged) as scratch:
            write_table_csv(streamed, os.path.join(staged, f"{table}.csv"), scratch)
    frames = [f.name for f in traceback.extract_tb(err.tb)]
    assert "write" in frames and "_joined" in frames  # refused by the parts' writer, not the chunks'
    assert os.listdir(tmp_path) == []
    with pytest.raises(DataError, match=f"{table}.csv: column '{column}' would release"):  # control: the driver
        write_table_csv(attrs.evolve(streamed, write_parts=None), str(tmp_path / f"{table}.csv"))


# --- the writer's own pieces --------------------------------------------------------------------


def test_parts_that_cannot_see_the_folder_are_written_by_the_driver(tmp_path, monkeypatch):
    """An executor on another machine does not see the driver's scratch folder (its probe file):
    its task writes nothing, and the driver writes that part itself."""
    persons = generate_population(2000, 80, seed=11)
    run = EngineRun(LocalEngine(), new_run_key(4))
    res = run_topdown(persons, _design(), RunContext(np.random.default_rng(4), engine=run, workers=1))

    class FarAway:
        """An engine whose tasks run where the folder is not: each answers that it was not reached."""

        name = "far"

        def map_items(self, items, func, *, stage, per_item=False):
            return [parts_module._UNREACHED for _ in items]

    serial = tmp_path / "serial.csv"
    write_table_csv(res.measurements_table(chunk_rows=700), str(serial))
    out = tmp_path / "out"
    with output_set(str(out)) as staged, scratch_beside(staged) as scratch:
        table = res.measurements_table(chunk_rows=700, writer=PartWriter(FarAway(), 2, 4))
        write_table_csv(table, os.path.join(staged, "measurements.csv"), scratch)
        assert os.listdir(scratch.path) == []  # each part removed once joined, and the probe
    assert (out / "measurements.csv").read_bytes() == serial.read_bytes()


def test_split_gives_the_parts_asked_for_none_empty():
    sizes = [5, 1, 1, 1, 9, 2, 2, 2, 2, 30]
    for wanted in range(1, 12):
        runs = parts_module.split(sizes, wanted)
        assert len(runs) == min(wanted, len(sizes))
        assert runs[0][0] == 0 and runs[-1][1] == len(sizes) and all(a < b for a, b in runs)
        assert all(runs[k][1] == runs[k + 1][0] for k in range(len(runs) - 1))
    assert parts_module.split([], 3) == []


def test_append_file_copies_by_kernel_and_without_it(tmp_path, monkeypatch):
    data = os.urandom(3 << 20) + b"tail"
    (tmp_path / "part").write_bytes(data)
    for kernel in (True, False):
        if not kernel:
            monkeypatch.delattr(os, "copy_file_range", raising=False)
        target = tmp_path / f"joined-{kernel}"
        target.write_bytes(b"header\n")
        with open(target, "ab") as out, open(tmp_path / "part", "rb") as part:
            assert append_file(part.fileno(), out.fileno()) == len(data)
        assert target.read_bytes() == b"header\n" + data
