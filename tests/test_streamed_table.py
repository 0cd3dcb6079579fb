"""A release table written by chunks (`StreamedTable`) gives the same files as the whole frame.

Why it matters: a national release cannot be held by one process; a mechanism streams it, and
an oversight reader must get exactly the bytes a frame would have given (same manifest hashes,
same tabulations, same invariant checks).
"""

from __future__ import annotations

import os

import attrs
import numpy as np
import pandas as pd
import pytest

from dpspec.api import StreamedTable, frame_chunks
from dpspec.errors import MechanismError
from dpspec.publish.table_csv import write_table_csv
from dpspec.run import compiler

SPECS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "specs")


def sample_frame(n=257, seed=3) -> pd.DataFrame:
    gen = np.random.default_rng(seed)
    return pd.DataFrame(
        {
            "county": pd.Categorical(gen.choice(["c1", "c2", "c3"], n), categories=["c1", "c2", "c3", "c4"]),
            "size": gen.integers(1, 9, n),
            "owner": gen.random(n) < 0.4,
            "weight": np.round(gen.random(n) * 10, 3),
            "note": gen.choice(["a,b", 'say "hi"', "", "plain"], n),
        }
    )


def streamed(frame, size, **kw) -> StreamedTable:
    return StreamedTable(frame.columns, len(frame), frame_chunks(frame, size), dtypes=dict(frame.dtypes), **kw)


@pytest.mark.parametrize("size", [1, 7, 64, 256, 257, 10_000])
def test_chunked_csv_is_byte_identical(tmp_path, size):
    frame = sample_frame()
    whole, parts = tmp_path / "whole.csv", tmp_path / "parts.csv"
    frame.to_csv(whole, index=False)
    assert write_table_csv(streamed(frame, size), str(parts)) == len(frame)
    assert parts.read_bytes() == whole.read_bytes()


def test_empty_streamed_table_writes_the_header(tmp_path):
    frame = sample_frame().iloc[:0]
    whole, parts = tmp_path / "whole.csv", tmp_path / "parts.csv"
    frame.to_csv(whole, index=False)
    write_table_csv(streamed(frame, 5), str(parts))
    assert parts.read_bytes() == whole.read_bytes()


def test_bad_streams_are_the_mechanisms_fault(tmp_path):
    frame = sample_frame(20)
    wrong_rows = StreamedTable(frame.columns, 19, frame_chunks(frame, 8))
    with pytest.raises(MechanismError, match="announced 19 rows"):
        write_table_csv(wrong_rows, str(tmp_path / "a.csv"))
    renamed = StreamedTable(frame.columns, 20, lambda: iter([frame.rename(columns={"size": "SIZE"})]))
    with pytest.raises(MechanismError, match="not the declared"):
        write_table_csv(renamed, str(tmp_path / "b.csv"))


def test_counts_over_chunks_equal_the_frames():
    frame = sample_frame()
    table = streamed(frame, 10)
    got = table.count(["county", "owner"])
    want = frame.groupby(["county", "owner"], observed=True).size().rename("count").reset_index()
    assert got.astype({"county": str}).equals(want.astype({"county": str}))
    assert int(table.count([])["count"].iloc[0]) == len(frame)
    assert table.to_pandas().equals(frame)


def test_release_query_on_a_streamed_table_lists_every_cell():
    frame = sample_frame()
    query = attrs.make_class("Q", ["columns"])(("county",))
    got = compiler.count_table(streamed(frame, 9), query)
    want = compiler.count_table(frame, query)
    assert got.equals(want)  # c4 holds no row: listed with 0, as from the frame
    assert got["count"].tolist()[-1] == 0
    open_query = attrs.make_class("Q", ["columns"])(("size",))
    got = compiler.count_table(streamed(frame, 9), open_query)
    assert got.equals(compiler.count_table(frame, open_query))


def test_a_changed_invariant_is_caught_on_a_streamed_output():
    frame = sample_frame()
    query = attrs.make_class("Q", ["table", "columns", "describe"])("t", ("county",), lambda: "count t by county")
    compiler.verify_invariants([query], {"t": frame}, {"t": streamed(frame, 11)})
    moved = frame.copy()
    moved.loc[0, "county"] = "c4" if moved.loc[0, "county"] != "c4" else "c1"
    with pytest.raises(MechanismError, match="changed during the run"):
        compiler.verify_invariants([query], {"t": frame}, {"t": streamed(moved, 11)})


def test_an_engine_held_input_is_counted_by_its_own_engine():
    """An `EngineTable` input carries the engine that holds it: the invariant check needs no other."""
    from dpspec.api import EngineTable
    from dpspec.engine import LocalEngine

    frame = sample_frame()
    held = EngineTable(
        frame, "t", "t.parquet", len(frame), {"county": "str", "size": "int64", "owner": "bool"}, engine=LocalEngine()
    )
    query = attrs.make_class("Q", ["table", "columns", "describe"])(
        "t", ("county", "owner"), lambda: "count t by county, owner"
    )
    compiler.verify_invariants([query], {"t": held}, {"t": frame.sample(frac=1, random_state=1)})
    moved = frame.copy()
    moved.loc[0, "owner"] = not moved.loc[0, "owner"]
    with pytest.raises(MechanismError, match="changed during the run"):
        compiler.verify_invariants([query], {"t": held}, {"t": moved})
    with pytest.raises(MechanismError, match="changed during the run"):
        compiler.verify_invariants([query], {"t": held}, {"t": streamed(moved, 11)})
    # an output the same engine holds: compared there (`counts_differ`), by the input's engine
    compiler.verify_invariants([query], {"t": held}, {"t": streamed(frame, 11, held=frame.iloc[::-1])})
    with pytest.raises(MechanismError, match="changed during the run"):
        compiler.verify_invariants([query], {"t": held}, {"t": streamed(frame, 11, held=moved)})


def test_detach_reads_engine_bound_tables_only():
    frame = sample_frame(30)
    bound, free = streamed(frame, 4, engine_bound=True), streamed(frame, 4)
    parted = streamed(frame, 4, write_parts=lambda folder, filename: [])
    out = compiler._detach({"a": bound, "b": free, "c": frame, "d": parted})
    assert isinstance(out["a"], pd.DataFrame) and out["a"].equals(frame)
    assert out["b"] is free and out["c"] is frame
    # its parts may need the engine being stopped: written from its chunks instead
    assert out["d"].write_parts is None and out["d"].to_pandas().equals(frame)


# --- written in parts (API 1.7): part files a mechanism writes, joined after the header --------


def parted(frame, cuts, written=None):
    """`frame` streamed with a `write_parts` writing the rows between `cuts` as part files."""
    from dpspec.api import write_csv_part

    def write_parts(folder, filename):
        names = []
        for i, (a, b) in enumerate(zip([0, *cuts], [*cuts, len(frame)])):
            names.append(f"p{i}.csv")
            write_csv_part(frame_chunks(frame.iloc[a:b], 3)(), os.path.join(folder, names[-1]), filename)
        return names if written is None else written(names)

    return streamed(frame, 5, write_parts=write_parts)


def _staged_write(tmp_path, table, name="t.csv"):
    from dpspec.publish.output_set import output_set, scratch_beside

    with output_set(str(tmp_path / "out")) as staged, scratch_beside(staged) as scratch:
        rows = write_table_csv(table, os.path.join(staged, name), scratch)
        left = os.listdir(scratch.path)
    return rows, left


@pytest.mark.parametrize("cuts", [[], [1], [100, 101, 200], [0, 0, 257]])
def test_parts_joined_after_the_header_are_the_frames_bytes(tmp_path, cuts):
    frame = sample_frame()
    rows, left = _staged_write(tmp_path, parted(frame, cuts))
    assert rows == len(frame) and left == []  # each part removed once joined
    assert (tmp_path / "out" / "t.csv").read_bytes() == frame.to_csv(index=False).encode()
    assert sorted(os.listdir(tmp_path)) == ["out"]  # the scratch folder beside the set is gone


def test_an_empty_table_in_parts_is_its_header(tmp_path):
    frame = sample_frame().iloc[:0]
    _staged_write(tmp_path, parted(frame, []))
    assert (tmp_path / "out" / "t.csv").read_bytes() == frame.to_csv(index=False).encode()


@pytest.mark.parametrize(
    ("names", "words"),
    [
        (lambda names: names + ["p9.csv"], "that it did not write"),
        (lambda names: ["../t.csv"], "not a file name"),
        (lambda names: [".hidden"], "not a file name"),
    ],
)
def test_a_part_the_mechanism_did_not_write_is_its_fault_and_nothing_is_published(tmp_path, names, words):
    with pytest.raises(MechanismError, match=words):
        _staged_write(tmp_path, parted(sample_frame(), [50], names))
    assert os.listdir(tmp_path) == []


def test_a_formula_in_a_part_is_refused_naming_the_file(tmp_path):
    from dpspec.errors import DataError

    frame = sample_frame(40)
    frame.loc[33, "note"] = "=HYPERLINK(1)"
    with pytest.raises(DataError, match="t.csv: column 'note' would release '=HYPERLINK"):
        _staged_write(tmp_path, parted(frame, [20]))
    assert os.listdir(tmp_path) == []


def test_the_scratch_folder_is_reached_through_the_sets_parent_handle_from_another_process(tmp_path):
    """The parts' folder is written through the handle the output set holds: moving the folders
    above it during the run does not redirect a part, and another process reaches it too."""
    import subprocess
    import sys

    from dpspec.publish.output_set import output_set, scratch_beside

    (tmp_path / "a").mkdir()
    with pytest.raises(RuntimeError, match="abandoned"):
        with output_set(str(tmp_path / "a" / "out")) as staged, scratch_beside(staged) as scratch:
            os.rename(tmp_path / "a", tmp_path / "b")
            (tmp_path / "a").mkdir()  # what the old path leads to now
            code = f"open({os.path.join(scratch.path, 'part.csv')!r}, 'w').write('1,2\\n')"
            subprocess.run([sys.executable, "-c", code], check=True)
            (hidden,) = [n for n in os.listdir(tmp_path / "b") if ".dpspec-parts-" in n]
            assert os.listdir(tmp_path / "b" / hidden) == ["part.csv"] and os.listdir(tmp_path / "a") == []
            raise RuntimeError("abandoned")
    assert os.listdir(tmp_path / "b") == [] and os.listdir(tmp_path / "a") == []  # set and scratch removed


@pytest.mark.slow  # two compiles, streamed and whole
def test_a_compile_whose_mechanism_streams_writes_the_same_set(tmp_path, monkeypatch):
    """End to end: the bundled ACS swap, its microdata streamed in chunks of 97 rows, writes the
    same release files (microdata, two count tables) as the frame, and the manifest
    counts the same rows."""
    from dpspec import load
    from dpspec.publish.output import write_result

    spec_path = os.path.join(SPECS, "acs_ma2019_swap.dps")

    def files(outdir):
        return {f: open(os.path.join(outdir, f), "rb").read() for f in sorted(os.listdir(outdir)) if f.endswith(".csv")}

    plain = compiler.compile_spec(load(spec_path), seed=5, audit=False)
    write_result(plain, str(tmp_path / "plain"))

    from dpspec.engine import run_mechanism as original

    def streaming(mech, spec, params, data, rng, engine_run):
        release = original(mech, spec, params, data, rng, engine_run)
        outs = {
            k: streamed(v, 97) if isinstance(v, pd.DataFrame) and len(v) > 100 else v
            for k, v in release.outputs.items()
        }
        return attrs.evolve(release, outputs=outs)

    monkeypatch.setattr("dpspec.run.compiler.run_mechanism", streaming)  # where the compiler calls it
    chunked = compiler.compile_spec(load(spec_path), seed=5, audit=False)
    assert any(isinstance(v, StreamedTable) for v in chunked.published.values())
    write_result(chunked, str(tmp_path / "chunked"))
    a, b = files(tmp_path / "plain"), files(tmp_path / "chunked")
    assert a.keys() == b.keys() and len(a) >= 2
    assert a == b
    import json

    def outputs(outdir):
        return json.load(open(os.path.join(outdir, "manifest.json")))["outputs"]

    assert outputs(tmp_path / "plain") == outputs(tmp_path / "chunked")


def test_extra_runs_free_their_engine_held_outputs(tmp_path, monkeypatch):
    """`--runs 3` measures three releases and writes one: the two extra runs' streamed outputs
    are released (a Spark cache unpersisted) once their figures are taken; the written one is not."""
    from dpspec import load
    from dpspec.engine import LocalEngine
    from dpspec.engine import run_mechanism as original

    freed = []

    def streaming(mech, spec, params, data, rng, engine_run):
        release = original(mech, spec, params, data, rng, engine_run)
        n = len(freed)
        outs = {
            k: streamed(v, 500, release=lambda n=n: freed.append(n)) if isinstance(v, pd.DataFrame) else v
            for k, v in release.outputs.items()
        }
        freed.append(None)  # one entry per run: the index names the run
        return attrs.evolve(release, outputs=outs)

    monkeypatch.setattr("dpspec.run.compiler.run_mechanism", streaming)  # where the compiler calls it
    compiler.compile_spec(
        load(os.path.join(SPECS, "acs_ma2019_swap.dps")), seed=5, runs=3, audit=False, engine=LocalEngine()
    )
    assert sorted(x for x in freed if x is not None) == [1, 2]
