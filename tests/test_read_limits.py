"""Never read past declared limits (issue 29): a CSV record longer than MAX_RECORD_BYTES, a file
that decompresses beyond the data limit, a Parquet footer declaring more than the limit or
not adding up; each a DataError before pandas or pyarrow allocates for it."""

from __future__ import annotations

import gzip
import resource
from types import SimpleNamespace

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

import dpspec
from dpspec.check import limits
from dpspec.check.data import load_table
from dpspec.check.limits import FooterTally, data_limit, parse_size
from dpspec.cli.main import main
from dpspec.engine.loading import load_engine_table
from dpspec.engine.local import LocalEngine
from dpspec.errors import DataError
from tests.conftest import SMALL_CSV, SMALL_SPEC

ROW = "north,n1,34,true,single\n"


def _spec(tmp_path, name, body: bytes | str):
    data = tmp_path / name
    data.write_bytes(body if isinstance(body, bytes) else body.encode())
    (tmp_path / "s.dps").write_text(SMALL_SPEC.replace('"people.csv"', f'"{name}"'))
    spec = dpspec.load(str(tmp_path / "s.dps"))
    return spec, spec.data[0]


def test_a_line_longer_than_a_record_may_be_is_refused_before_pandas_reads_it(tmp_path):
    huge = SMALL_CSV + "north,n1,34,true," + "x" * (limits.MAX_RECORD_BYTES + 10) + "\n"
    spec, source = _spec(tmp_path, "people.csv", huge)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with pytest.raises(
        DataError, match=rf"people.csv: the record starting at byte {len(SMALL_CSV)} is 16,777,244 bytes long"
    ):
        load_table(spec, source)
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 200_000  # KB: scanned, never held


def test_a_file_without_line_ends_stops_the_scan_at_the_record_limit(tmp_path, monkeypatch):
    monkeypatch.setattr(limits, "MAX_RECORD_BYTES", 4096)
    monkeypatch.setattr(limits, "_BLOCK", 1024)
    spec, source = _spec(tmp_path, "people.csv", SMALL_CSV + "x" * 100_000)
    with pytest.raises(
        DataError, match=rf"record starting at byte {len(SMALL_CSV)} is more than 4,096 bytes long .*no line ends"
    ):
        load_table(spec, source)


def test_a_quoted_field_spanning_lines_counts_as_one_record(tmp_path, monkeypatch):
    monkeypatch.setattr(limits, "MAX_RECORD_BYTES", 200)
    monkeypatch.setattr(limits, "_BLOCK", 64)  # records and quotes cross block boundaries
    ok = SMALL_CSV + 'north,n1,34,true,"a ""quoted""\nstatus"\n'
    _spec(tmp_path, "people.csv", ok)
    limits.check_csv_file(str(tmp_path / "people.csv"))  # 3 lines, one record within the limit
    long = SMALL_CSV + 'north,n1,34,true,"' + "line\n" * 60 + '"\n' + ROW
    spec, source = _spec(tmp_path, "people.csv", long)
    with pytest.raises(
        DataError, match=rf"the record starting at byte {len(SMALL_CSV)} is (324|more than 200) bytes long"
    ):
        load_table(spec, source)


def test_a_compressed_csv_that_expands_beyond_the_limit_is_refused(tmp_path):
    body = gzip.compress((SMALL_CSV + ROW * 100_000).encode())  # 2.4 MB of rows in a few KB
    assert len(body) < 100_000
    spec, source = _spec(tmp_path, "people.csv.gz", body)
    assert len(load_table(spec, source)) == 100_005  # within the default limit it is read as pandas reads it
    with (
        data_limit(1 << 20),
        pytest.raises(
            DataError,
            match=r"people.csv.gz: the file holds more than 1.0 MiB "
            r"\(1,048,576 bytes\) \(decompressed\), more than the limit",
        ),
    ):
        load_table(spec, source)


def _parquet(tmp_path, rows=1000):
    table = pa.table(
        {
            "region": ["north"] * rows,
            "district": ["n1"] * rows,
            "age": [i % 100 for i in range(rows)],
            "smoker": [True] * rows,
            "status": ["single"] * rows,
            "note": ["x" * 100] * rows,
        }
    )
    pq.write_table(table, tmp_path / "people.parquet", row_group_size=250)
    (tmp_path / "s.dps").write_text(SMALL_SPEC.replace('"people.csv"', '"people.parquet"'))
    spec = dpspec.load(str(tmp_path / "s.dps"))
    return spec, spec.data[0]


def test_a_parquet_footer_declaring_more_than_the_limit_is_refused_on_every_path(tmp_path):
    spec, source = _parquet(tmp_path)
    declared = sum(
        pq.read_metadata(tmp_path / "people.parquet").row_group(i).column(j).total_uncompressed_size
        for i in range(4)
        for j in range(5)
    )  # the declared columns only, not `note`
    assert len(load_table(spec, source)) == 1000
    with data_limit(declared):
        assert len(load_table(spec, source)) == 1000  # exactly the limit is allowed
    for read in (lambda: load_table(spec, source), lambda: load_engine_table(spec, source, LocalEngine())):
        with (
            data_limit(declared - 1),
            pytest.raises(
                DataError,
                match=rf"people.parquet: its Parquet footers declare .*\({declared:,} bytes\) \(uncompressed\) "
                r"in the declared columns, more than the limit",
            ),
        ):
            read()


def test_a_partitioned_folder_is_limited_in_all(tmp_path):
    folder = tmp_path / "people"
    for region in ("north", "south"):
        (folder / f"region={region}").mkdir(parents=True)
        pq.write_table(
            pa.table(
                {
                    "district": [region[0] + "1"] * 500,
                    "age": list(range(500)),
                    "smoker": [True] * 500,
                    "status": ["single"] * 500,
                }
            ),
            folder / f"region={region}" / "part.parquet",
        )
    (tmp_path / "s.dps").write_text(SMALL_SPEC.replace('"people.csv"', '"people/"'))
    spec = dpspec.load(str(tmp_path / "s.dps"))
    one = sum(
        pq.read_metadata(folder / "region=north" / "part.parquet").row_group(0).column(j).total_uncompressed_size
        for j in range(4)
    )
    with data_limit(one + 1), pytest.raises(DataError, match="people/: its Parquet footers declare"):
        load_table(spec, spec.data[0])  # each file is within the limit; the two together are not


def test_a_footer_whose_row_groups_do_not_add_up_is_refused():
    group = SimpleNamespace(num_rows=10, num_columns=0)
    metadata = SimpleNamespace(num_row_groups=2, row_group=lambda i: group, num_rows=1 << 40)
    with pytest.raises(
        DataError,
        match=r"f.parquet: the file's footer is corrupt \(it declares 1,099,511,627,776 rows, "
        r"its row groups 20\)",
    ):
        FooterTally("f.parquet").add("f.parquet", metadata, ["age"])
    bad = SimpleNamespace(num_rows=-5, num_columns=0)
    with pytest.raises(DataError, match="row group 0 declares -5 rows"):
        FooterTally("f.parquet").add(
            "f.parquet", SimpleNamespace(num_row_groups=1, row_group=lambda i: bad, num_rows=-5), ["age"]
        )


@pytest.mark.parametrize(
    "text, size", [("4096", 4096), ("500M", 500 << 20), ("8G", 8 << 30), ("1t", 1 << 40), ("64GiB", 64 << 30)]
)
def test_sizes(text, size):
    assert parse_size(text) == size


def test_compile_max_data_bytes(small_spec, tmp_path):
    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["compile", str(small_spec), "-o", str(out), "--max-data-bytes", "100"])
    assert result.exit_code == 1 and "people.csv: the file holds more than 100 bytes" in result.output
    assert "--max-data-bytes SIZE" in result.output and not out.exists()
    result = CliRunner().invoke(main, ["compile", str(small_spec), "-o", str(out), "--max-data-bytes", "lots"])
    assert result.exit_code == 2 and "is not a size" in result.output
    result = CliRunner().invoke(main, ["compile", str(small_spec), "-o", str(out), "--max-data-bytes", "1K"])
    assert result.exit_code == 0, result.output


# ---- the limit scan fused with the fingerprint: a local CSV is read twice, not three times ----


def test_the_fused_scan_still_refuses_a_long_record_and_a_large_file(tmp_path, monkeypatch):
    from dpspec.check.data import load_data

    monkeypatch.setattr(limits, "MAX_RECORD_BYTES", 4096)
    spec, _ = _spec(tmp_path, "people.csv", SMALL_CSV + "north,n1,34,true," + "x" * 5000 + "\n")
    with pytest.raises(DataError, match=rf"people.csv: the record starting at byte {len(SMALL_CSV)} is 5,018 bytes"):
        load_data(spec)
    spec, _ = _spec(tmp_path, "people.csv", SMALL_CSV + ROW * 50_000)  # about 1.2 MB
    with data_limit(1 << 20), pytest.raises(DataError, match=r"people.csv: the file holds more than 1.0 MiB"):
        load_data(spec)
    # the fused fingerprint is the file's SHA-256, as the streamed one
    from dpspec.check.sources import file_sha256

    _, hashes = load_data(spec)
    assert hashes == {"people.csv": file_sha256(str(tmp_path / "people.csv"))}


def _count_reads(monkeypatch, target: str) -> list:
    """Bytes read from `target` through `open`, whoever opens it (the scan, pandas, hashing)."""
    import builtins
    import io
    import os

    read = [0]
    real_open = builtins.open

    class Counting(io.FileIO):
        def readinto(self, b):
            n = super().readinto(b)
            read[0] += n or 0
            return n

        def read(self, size=-1):
            out = super().read(size)
            read[0] += len(out or b"")
            return out

        def readall(self):
            out = super().readall()
            read[0] += len(out)
            return out

    def counting_open(
        file, mode="r", buffering=-1, encoding=None, errors=None, newline=None, closefd=True, opener=None
    ):
        if isinstance(file, (str, os.PathLike)) and os.path.abspath(file) == target and "r" in mode:
            raw = io.BufferedReader(Counting(file, "r"))
            return raw if "b" in mode else io.TextIOWrapper(raw, encoding=encoding, errors=errors, newline=newline)
        return real_open(file, mode, buffering, encoding, errors, newline, closefd, opener)

    monkeypatch.setattr(builtins, "open", counting_open)
    return read


def test_a_local_csv_is_read_twice_the_scan_hashing_it(tmp_path, monkeypatch):
    from dpspec.check.data import load_data

    spec, _ = _spec(tmp_path, "people.csv", SMALL_CSV + ROW * 100_000)  # about 2.4 MB
    target = str((tmp_path / "people.csv").resolve())
    size = (tmp_path / "people.csv").stat().st_size
    read = _count_reads(monkeypatch, target)
    load_table(spec, spec.data[0])
    from dpspec.check.sources import source_sha256

    source_sha256(target)
    three = read[0]
    assert three >= 3 * size  # the unfused path: scan, pandas, fingerprint
    read[0] = 0
    _, hashes = load_data(spec)
    # the scan (hashing) and pandas; the header line is read apart, a block of at most 1 MiB
    assert 2 * size <= read[0] <= 2 * size + (1 << 20), (read[0], size)
    monkeypatch.undo()
    from dpspec.check.sources import file_sha256

    assert hashes["people.csv"] == file_sha256(target)


def test_a_compressed_csv_is_fingerprinted_by_its_own_bytes(tmp_path):
    from dpspec.check.data import load_data
    from dpspec.check.sources import file_sha256

    spec, _ = _spec(tmp_path, "people.csv.gz", gzip.compress((SMALL_CSV + ROW * 10).encode()))
    assert (
        limits.check_csv_file(str(tmp_path / "people.csv.gz"), fingerprint=True) is None
    )  # the scan sees the inflated bytes
    _, hashes = load_data(spec)
    assert hashes == {"people.csv.gz": file_sha256(str(tmp_path / "people.csv.gz"))}
