"""Hostile data files (issue 29): every class ends in a DataError naming the file and why, in
bounded time, on the local reading path and on the engine path (`load_engine_table`), never in
silently wrong rows or an internal error."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

import dpspec
from dpspec.check.data import load_table
from dpspec.check.sources import data_files, directory_sha256
from dpspec.cli.main import main
from dpspec.engine.loading import load_engine_table
from dpspec.engine.local import LocalEngine
from dpspec.errors import DataError
from tests.conftest import ROOT, SMALL_SPEC

PARQUET_SPEC = SMALL_SPEC.replace('"people.csv"', '"people/"')


def _people(n=5, **override):
    cols = {
        "region": ["north"] * n,
        "district": ["n1"] * n,
        "age": list(range(30, 30 + n)),
        "smoker": [True, False] * (n // 2) + [True] * (n % 2),
        "status": ["single"] * n,
    }
    cols.update(override)
    return pa.table(cols)


def _in(table, region):
    """`table` as a partition of `region` (its districts renamed to lie in it)."""
    table = table.drop(["region"])
    if pa.types.is_string(table.schema.field("district").type):
        table = table.set_column(
            table.schema.get_field_index("district"), "district", pa.array([region[0] + "1"] * len(table))
        )
    return table


def _partitioned(tmp_path, table=None):
    """tmp/people/region=north/part.parquet and region=south: 10 rows in all."""
    folder = tmp_path / "people"
    for region in ("north", "south"):
        (folder / f"region={region}").mkdir(parents=True)
        pq.write_table(_in(table or _people(), region), folder / f"region={region}" / "part.parquet")
    (tmp_path / "spec.dps").write_text(PARQUET_SPEC)
    return folder


def _both_paths(spec_path):
    """Load the spec's one table on the local path and on the engine path; the errors of each."""
    spec = dpspec.load(str(spec_path))
    source = spec.data[0]
    out = []
    for load in (lambda: load_table(spec, source), lambda: load_engine_table(spec, source, LocalEngine())):
        with pytest.raises(DataError) as err:
            load()
        out.append(str(err.value))
    return out


# ---- partitioned folders: links, loops, devices, pipes -------------------------------------


def test_a_symlink_loop_in_a_partitioned_folder_is_refused_not_read_again(tmp_path):
    folder = _partitioned(tmp_path)
    (folder / "region=north" / "loop").symlink_to("..")
    for message in _both_paths(tmp_path / "spec.dps"):
        assert "reached again through a link" in message and "loop" in message
    with pytest.raises(DataError, match="reached again"):
        directory_sha256(str(folder))


def test_two_links_to_one_partition_are_refused(tmp_path):
    folder = _partitioned(tmp_path)
    (folder / "region=east").symlink_to(folder / "region=north")
    with pytest.raises(DataError, match="reached again"):
        data_files(str(folder))


def _with_linked_partition(tmp_path):
    """The partitioned folder plus region=west, a link to 3 rows kept elsewhere: 13 rows in all."""
    folder = _partitioned(tmp_path)
    elsewhere = tmp_path / "store" / "region=west"
    elsewhere.mkdir(parents=True)
    pq.write_table(_in(_people(3), "west"), elsewhere / "part.parquet")
    (folder / "region=west").symlink_to(elsewhere)
    return folder


def test_a_link_to_a_partition_elsewhere_is_read_and_fingerprinted_once(tmp_path):
    folder = _with_linked_partition(tmp_path)
    spec = dpspec.load(str(tmp_path / "spec.dps"))
    frame = load_table(spec, spec.data[0])
    assert len(frame) == 13 and sorted(frame["region"].unique()) == ["north", "south", "west"]
    assert len(load_engine_table(spec, spec.data[0], LocalEngine())) == 13
    assert "region=west/part.parquet" in data_files(str(folder))


# A subprocess capped at 1.5 GB and 60 s: a device or pipe read would hang or fill memory.
_DEVICES = textwrap.dedent("""\
    import os, resource, sys
    resource.setrlimit(resource.RLIMIT_AS, (1_500_000_000, 1_500_000_000))
    from click.testing import CliRunner
    from dpspec.cli.main import main
    for case in sys.argv[1:]:
        r = CliRunner().invoke(main, ["compile", os.path.join(case, "spec.dps"), "-o", case + "-out"])
        print(os.path.basename(case), r.exit_code, "not a regular file" in r.output, flush=True)
    """)


def _socket_at(path):
    """A Unix socket at `path`, bound by its name from its folder: a socket's address holds at most
    107 bytes, and a worker's temporary folder (pytest-xdist's popen-gwN) can make the full path longer."""
    import socket

    here = os.getcwd()
    os.chdir(path.parent)
    try:
        socket.socket(socket.AF_UNIX).bind(path.name)
    finally:
        os.chdir(here)


@pytest.mark.slow  # compiles in a subprocess under a memory limit
def test_devices_pipes_and_sockets_in_a_partitioned_folder_are_refused_in_bounded_time(tmp_path):
    cases = []
    for name, make in (
        ("zero", lambda p: p.symlink_to("/dev/zero")),
        ("urandom", lambda p: p.symlink_to("/dev/urandom")),
        ("fifo", lambda p: os.mkfifo(p)),
        ("socket", _socket_at),
    ):
        case = tmp_path / name
        case.mkdir()
        folder = _partitioned(case)
        make(folder / "region=north" / "extra.parquet")
        cases.append(str(case))
    driver = tmp_path / "devices.py"
    driver.write_text(_DEVICES)
    done = subprocess.run(
        [sys.executable, str(driver), *cases],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        env=dict(os.environ, PYTHONPATH=ROOT),
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [
        "zero",
        "1",
        "True",
        "urandom",
        "1",
        "True",
        "fifo",
        "1",
        "True",
        "socket",
        "1",
        "True",
    ]


# ---- Arrow types -----------------------------------------------------------------------------

import datetime  # noqa: E402
import decimal  # noqa: E402

ODD = {
    "date32 in int": ("age", pa.array([datetime.date(2000, 1, 1)] * 5, pa.date32())),
    "decimal in int": ("age", pa.array([decimal.Decimal("3.00")] * 5, pa.decimal128(5, 2))),
    "binary (UTF-8) in enum": ("status", pa.array([b"single"] * 5, pa.binary())),
    "binary (not UTF-8) in category": ("district", pa.array([b"\xff\xfe"] * 5, pa.binary())),
    "list<string> in enum": ("status", pa.array([["single"]] * 5, pa.list_(pa.string()))),
    "list<int64> in int": ("age", pa.array([[1, 2]] * 5, pa.list_(pa.int64()))),
    "timestamp in bool": ("smoker", pa.array([datetime.datetime(2000, 1, 1)] * 5, pa.timestamp("s"))),
    "struct in category": ("district", pa.array([{"a": 1}] * 5)),
}


def _kind(arrow_type) -> str:
    """The type's name without its parameters (a round trip through Parquet renames list items)."""
    return str(arrow_type).split("<")[0].split("[")[0]


@pytest.mark.parametrize("case", sorted(ODD))
def test_an_odd_arrow_type_is_a_data_error_naming_file_column_and_type(tmp_path, case):
    column, values = ODD[case]
    table = _people()
    table = table.set_column(table.schema.get_field_index(column), column, values)
    _partitioned(tmp_path, table)
    for message in _both_paths(tmp_path / "spec.dps"):
        assert f"column '{column}' is stored as {_kind(values.type)}" in message and "part.parquet" in message
    single = tmp_path / "one.parquet"
    pq.write_table(table, single)
    (tmp_path / "one.dps").write_text(SMALL_SPEC.replace('"people.csv"', '"one.parquet"'))
    for message in _both_paths(tmp_path / "one.dps"):
        assert f"is stored as {_kind(values.type)}" in message and "one.parquet" in message


def test_dictionary_encoded_text_and_integer_codes_are_read(tmp_path):
    table = _people().set_column(4, "status", pa.array(["single", "married", "N", "single", "N"]).dictionary_encode())
    _partitioned(tmp_path, table)
    spec = dpspec.load(str(tmp_path / "spec.dps"))
    assert sorted(load_table(spec, spec.data[0])["status"].unique()) == ["N", "married", "single"]


# ---- CSV: ragged rows and duplicated headers ---------------------------------------------------


@pytest.mark.parametrize(
    "row, saw",
    [("north,n1,34,true,single,EXTRA", 6), ("north,n1,34,true,single,", 6), ("north,n1,34,true,single,,x", 7)],
)
def test_a_row_with_more_fields_than_the_header_is_refused(small_spec, row, saw):
    data = small_spec.parent / "people.csv"
    data.write_text(data.read_text() + row + "\n")
    with pytest.raises(DataError, match=rf"line 7, saw {saw}.*more fields than the header is refused"):
        dpspec.compile(dpspec.load(str(small_spec)), seed=1)


def test_a_ragged_row_is_found_when_undeclared_columns_are_skipped(small_spec, monkeypatch):
    import dpspec.check.data as data_mod

    monkeypatch.setattr(data_mod, "CSV_CHUNK_ROWS", 2)  # several chunks: the line is still the file's
    data = small_spec.parent / "people.csv"
    lines = data.read_text().splitlines()
    data.write_text(
        "\n".join(
            [lines[0] + ",note", *(l + ",x" for l in lines[1:3]), lines[3] + ",x,y", *(l + ",z" for l in lines[4:])]
        )
        + "\n"
    )
    with pytest.raises(DataError, match="line 4, saw 7"):
        load_table(dpspec.load(str(small_spec)), dpspec.load(str(small_spec)).data[0])


def test_a_duplicated_header_column_is_refused(small_spec):
    data = small_spec.parent / "people.csv"
    lines = data.read_text().splitlines()
    data.write_text("\n".join([lines[0] + ",age", *(l + ",99" for l in lines[1:])]) + "\n")
    with pytest.raises(DataError, match="the header names column 'age' twice"):
        dpspec.compile(dpspec.load(str(small_spec)), seed=1)


# ---- a declared group bound ---------------------------------------------------------------------


def test_a_household_larger_than_the_units_bound_is_refused(tmp_path):
    spec = open(os.path.join(ROOT, "specs", "audit", "clean.dps")).read()
    (tmp_path / "in" / "data").mkdir(parents=True)
    tmp_path = tmp_path / "in"
    rows = ["pid,hhid,age,employed"] + [f"{i},1,adult,true" for i in range(1, 55)] + ["60,2,child,false"]
    (tmp_path / "data" / "persons.csv").write_text("\n".join(rows) + "\n")
    (tmp_path / "clean.dps").write_text(spec)
    result = CliRunner().invoke(
        main, ["compile", str(tmp_path / "clean.dps"), "-o", str(tmp_path.parent / "out"), "--seed", "1"]
    )
    assert result.exit_code == 1, result.output
    assert "more than 6 persons rows" in result.output and "holds at most 6 persons" in result.output
    assert "1 (54 rows)" in result.output
    (tmp_path / "data" / "persons.csv").write_text("\n".join(rows[:7] + rows[-1:]) + "\n")  # 6 persons: fine
    result = CliRunner().invoke(
        main, ["compile", str(tmp_path / "clean.dps"), "-o", str(tmp_path.parent / "out"), "--seed", "1"]
    )
    assert "estimate.csv (1 rows)" in result.output and "more than 6" not in result.output  # exit 1: the known seed


def test_the_units_bound_is_checked_on_the_engine_path(tmp_path):
    spec = (
        open(os.path.join(ROOT, "specs", "audit", "clean.dps"))
        .read()
        .replace('"data/persons.csv"', '"persons.parquet"')
    )
    (tmp_path / "clean.dps").write_text(spec)
    pq.write_table(
        pa.table({"pid": list(range(1, 9)), "hhid": [1] * 7 + [2], "age": ["adult"] * 8, "employed": [True] * 8}),
        tmp_path / "persons.parquet",
    )
    parsed = dpspec.load(str(tmp_path / "clean.dps"))
    with pytest.raises(DataError, match=r"more than 6 persons rows.*holds at most 6 persons.*1 \(7 rows\)"):
        load_engine_table(parsed, parsed.data[0], LocalEngine())


# ---- registry YAML ---------------------------------------------------------------------------------

BOMB = "url_slug: bomb\na: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n" + "".join(
    f"{c}: &{c} [{', '.join(['*' + p] * 9)}]\n" for p, c in zip("abcdefgh", "bcdefghi")
)


def test_a_billion_laughs_entry_is_refused_unexpanded_and_located(tmp_path):
    """Refused before the aliases are expanded (how fast: benchmarks/bench_refusals.py)."""
    import resource

    (tmp_path / "bomb.yaml").write_text(BOMB)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    result = CliRunner().invoke(
        main, ["import", "--registry", str(tmp_path / "bomb.yaml"), "-o", str(tmp_path / "x.dps")]
    )
    assert result.exit_code == 1 and "aliases are not allowed" in result.output and "bomb.yaml:3:" in result.output
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 100_000  # KB: no expansion
    assert not (tmp_path / "x.dps").exists()


# ---- SafeTab-H's published totals ----------------------------------------------------------------


@pytest.mark.parametrize(
    "count, refused",
    [("5", False), ("0", False), ("-5", True), ("-1", True), ("2.5", True), (str(2**62), True), ("10000000001", True)],
)
def test_safetab_h_public_totals_must_be_counts(tmp_path, count, refused):
    from types import SimpleNamespace

    from dpspec_safetab.plugin import SafeTab

    (tmp_path / "totals.csv").write_text(f"geography,geocode,group,count\nnation,US,1002,7\nstate,01,1002,{count}\n")
    read = lambda: SafeTab()._public_totals(SimpleNamespace(base_dir=str(tmp_path)), {"public_totals": "totals.csv"})
    if refused:
        with pytest.raises(
            DataError,
            match=r"totals.csv: row 2 \(line 3\): the published total of group '1002' in "
            r"state '01' is .*, which is not a published count",
        ):
            read()
    else:
        assert read()["count"].tolist() == [7, int(count)]


def test_safetab_h_negative_total_in_parquet_names_its_row(tmp_path):
    from types import SimpleNamespace

    import pandas as pd

    from dpspec_safetab.plugin import SafeTab

    frame = pd.DataFrame(
        {"geography": ["nation"] * 3, "geocode": ["US"] * 3, "group": ["1", "2", "3"], "count": [4, 0, -12]},
        index=[10, 11, 12],
    )  # a stored index is not the row number
    frame.to_parquet(tmp_path / "totals.parquet")
    with pytest.raises(
        DataError,
        match=r"totals.parquet: row 3: the published total of group '3' in nation 'US' "
        r"is -12, .*1 such value",
    ):
        SafeTab()._public_totals(SimpleNamespace(base_dir=str(tmp_path)), {"public_totals": "totals.parquet"})


def test_bundled_safetab_h_public_totals_are_published_counts():
    """The bundled DDHC-A totals are post-processed as production's are: none is negative."""
    from types import SimpleNamespace

    from dpspec_safetab.plugin import SafeTab

    base = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "specs")
    totals = SafeTab()._public_totals(
        SimpleNamespace(base_dir=base), {"public_totals": "data/safetab/safetab_p_published.parquet"}
    )
    assert len(totals) > 10_000 and totals["count"].min() == 0


def test_safetab_h_two_different_totals_for_one_group_are_refused(tmp_path):
    from types import SimpleNamespace

    from dpspec_safetab.plugin import SafeTab

    (tmp_path / "totals.csv").write_text("geography,geocode,group,count\nstate,01,1002,7\nstate,01,1002,700\n")
    with pytest.raises(DataError, match="2 different published totals"):
        SafeTab()._public_totals(SimpleNamespace(base_dir=str(tmp_path)), {"public_totals": "totals.csv"})


# ---- the Spark engine reads what was checked and fingerprinted -------------------------------------


def test_spark_reads_a_linked_partition_once_and_refuses_a_loop_and_odd_types(tmp_path, spark_session):
    from dpspec.engine.spark import SparkEngine

    engine = SparkEngine(session=spark_session)
    folder = _with_linked_partition(tmp_path)
    spec = dpspec.load(str(tmp_path / "spec.dps"))
    assert len(load_engine_table(spec, spec.data[0], engine)) == 13
    (folder / "region=north" / "loop").symlink_to("..")
    with pytest.raises(DataError, match="reached again through a link"):
        load_engine_table(spec, spec.data[0], engine)
    (folder / "region=north" / "loop").unlink()
    pq.write_table(
        _in(_people(2).set_column(2, "age", pa.array([[1], [2]], pa.list_(pa.int64()))), "north"),
        folder / "region=north" / "part-2.parquet",
    )
    with pytest.raises(DataError, match=r"(?s)part-2.parquet: .*column 'age' is stored as list"):
        load_engine_table(spec, spec.data[0], engine)


def _uri_folder_with_a_bad_later_file(tmp_path):
    """A partitioned folder named by a file:// URI (the hdfs:// / s3a:// code path) whose first
    file is fine and whose last holds dates in the int column 'age'."""
    import datetime

    folder = _partitioned(tmp_path)
    dates = pa.array([datetime.date(2020, 1, 1)] * 2, pa.date32())
    pq.write_table(_in(_people(2).set_column(2, "age", dates), "south"), folder / "region=south" / "part-9.parquet")
    (tmp_path / "spec.dps").write_text(SMALL_SPEC.replace('"people.csv"', f'"{folder.as_uri()}/"'))
    return dpspec.load(str(tmp_path / "spec.dps"))


def test_every_file_of_a_uri_folder_has_its_types_checked(tmp_path):
    spec = _uri_folder_with_a_bad_later_file(tmp_path)
    for read in (lambda: load_table(spec, spec.data[0]), lambda: load_engine_table(spec, spec.data[0], LocalEngine())):
        with pytest.raises(
            DataError,
            match=r"(?s)file://.*region=south/part-9.parquet: .*column 'age' is stored as "
            r"date32",
        ):
            read()


def test_every_file_of_a_uri_folder_has_its_types_checked_on_spark(tmp_path, spark_session):
    from dpspec.engine.spark import SparkEngine

    spec = _uri_folder_with_a_bad_later_file(tmp_path)
    with pytest.raises(DataError, match=r"(?s)region=south/part-9.parquet: .*column 'age' is stored as date32"):
        load_engine_table(spec, spec.data[0], SparkEngine(session=spark_session))


def test_a_duplicated_header_is_refused_through_a_file_uri_too(small_spec):
    data = small_spec.parent / "people.csv"
    lines = data.read_text().splitlines()
    data.write_text("\n".join([lines[0] + ",age", *(l + ",99" for l in lines[1:])]) + "\n")
    small_spec.write_text(small_spec.read_text().replace('"people.csv"', f'"{data.as_uri()}"'))
    spec = dpspec.load(str(small_spec))
    with pytest.raises(DataError, match="the header names column 'age' twice"):
        load_table(spec, spec.data[0])


def test_list_int64_on_the_engine_path_of_a_swap_compile_is_exit_1(tmp_path):
    """The swap plugin takes engine tables from Parquet (`load_data_on`): the odd type is refused
    there too, before the mechanism runs, as a DataError (exit 1), never an internal error."""
    from tests.test_report_trust import SWAP_SPEC

    folder = tmp_path / "in"
    folder.mkdir()
    pq.write_table(
        pa.table(
            {
                "state": ["s1"] * 4,
                "county": ["c1", "c2"] * 2,
                "size": pa.array([[1], [2], [1], [2]], pa.list_(pa.int64())),
            }
        ),
        folder / "households.parquet",
    )
    (folder / "s.dps").write_text(SWAP_SPEC.replace('"households.csv"', '"households.parquet"'))
    result = CliRunner().invoke(main, ["compile", str(folder / "s.dps"), "-o", str(tmp_path / "out")])
    assert result.exit_code == 1, result.output
    assert "column 'size' is stored as list" in result.output and not (tmp_path / "out").exists()
