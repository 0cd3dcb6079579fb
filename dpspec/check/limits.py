"""Declared limits on what a data source can make dpspec read, checked before anything is allocated.

A file states its own size before its rows are read: a Parquet footer declares its rows and the
uncompressed bytes of every column chunk, and a CSV's records are whatever lies between its
newlines. A hostile or broken file can declare (or hold) far more than any table should: a
footer claiming a petabyte, a 10 GB line, a 10 MB `.csv.gz` that inflates to 10 GB. So:

- a Parquet source's declared columns may hold at most `max_data_bytes` uncompressed in all,
  as its footers declare (every file of a folder), and the footers must add up (row groups'
  rows summing to the file's rows, no negative size): checked from the footers alone;
- a CSV (after decompression, as pandas would read it) may hold at most `max_data_bytes`, and
  no record (a line, or several when a quoted field spans newlines) may exceed
  MAX_RECORD_BYTES; the file is scanned a megabyte at a time with numpy and the scan stops at
  the first excess, so a hostile file costs bounded time and memory.

`max_data_bytes` defaults to DEFAULT_MAX_DATA_BYTES and is set for a run with
`dpspec compile --max-data-bytes SIZE` (or `data_limit(n)` from Python).
"""

from __future__ import annotations

import contextvars
import hashlib
import os
import re
from contextlib import contextmanager

import numpy as np

from dpspec.errors import DataError
from dpspec.lazy import LazyModule

# heavy libraries, imported on first use
_common = LazyModule("pandas.io.common", "_common", globals())

DEFAULT_MAX_DATA_BYTES = 64 << 30  # 64 GiB: more than any table this project reads on one machine
VALUE_BYTES = 8  # a value read into a table takes at least a machine word (int64, float64, a pointer)
MAX_RECORD_BYTES = 16 << 20  # 16 MiB: a CSV record this long is not a row of a table
_BLOCK = 1 << 20
_limit = contextvars.ContextVar("dpspec_max_data_bytes", default=DEFAULT_MAX_DATA_BYTES)
_SIZE = re.compile(r"^\s*(\d+)\s*([kmgt]?)i?b?\s*$", re.IGNORECASE)


def max_data_bytes() -> int:
    return _limit.get()


@contextmanager
def data_limit(n: int | None):
    """Within the block, sources may hold at most `n` bytes (None: the default)."""
    token = _limit.set(DEFAULT_MAX_DATA_BYTES if n is None else int(n))
    try:
        yield
    finally:
        _limit.reset(token)


def parse_size(text: str) -> int:
    """'500M', '8G', '1T', '4096' -> bytes (powers of 1024)."""
    m = _SIZE.match(str(text))
    if not m:
        raise ValueError(f"{text!r} is not a size (a whole number, optionally followed by K, M, G or T)")
    return int(m.group(1)) << (10 * " KMGT".index(m.group(2).upper() or " "))


def _shown_bytes(n: int) -> str:
    for unit, shift in (("TiB", 40), ("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift:
            return f"{n / (1 << shift):,.1f} {unit} ({n:,} bytes)"
    return f"{n:,} bytes"


def _too_large(where: str, what: str) -> DataError:
    return DataError(
        f"{where}: {what}, more than the limit of {_shown_bytes(max_data_bytes())}; "
        "nothing was read. If the data really is this large, raise the limit "
        "(`dpspec compile --max-data-bytes SIZE`) or use the Spark engine"
    )


class FooterTally:
    """The uncompressed bytes the declared columns of a Parquet source's footers declare, in all."""

    def __init__(self, source: str):
        self.source, self.total, self.decoded = source, 0, 0

    def add(self, where: str, metadata, columns) -> None:
        """Check one file's footer (`pyarrow.parquet.FileMetaData`) and count its declared columns."""
        wanted = set(columns)
        rows = 0
        for i in range(metadata.num_row_groups):
            group = metadata.row_group(i)
            if group.num_rows < 0:
                raise DataError(f"{where}: the file's footer is corrupt (row group {i} declares {group.num_rows} rows)")
            rows += group.num_rows
            for j in range(group.num_columns):
                chunk = group.column(j)
                size = chunk.total_uncompressed_size
                if size < 0 or chunk.total_compressed_size < 0:
                    raise DataError(f"{where}: the file's footer is corrupt (a column chunk declares {size} bytes)")
                if chunk.path_in_schema.split(".")[0] in wanted:
                    self.total += size
        if rows != metadata.num_rows:
            raise DataError(
                f"{where}: the file's footer is corrupt (it declares {metadata.num_rows:,} rows, its row "
                f"groups {rows:,})"
            )
        if self.total > max_data_bytes():
            raise _too_large(
                self.source,
                f"its Parquet footers declare {_shown_bytes(self.total)} (uncompressed) in the declared columns",
            )
        # Encoded sizes undercount: a constant column of 500 million rows is a few bytes of run-length
        # encoding, yet every row takes at least a machine word once read. Its rows bound it from below.
        # (Its values are at least a byte each against the limit, and a machine word each in memory.)
        present = {metadata.schema.column(j).path.split(".")[0] for j in range(metadata.num_columns)} & wanted
        values = metadata.num_rows * max(len(present), 1)
        self.decoded += values
        if self.decoded > max_data_bytes():
            raise _too_large(
                self.source,
                f"its Parquet footers declare {metadata.num_rows:,} rows in this file, "
                f"{self.decoded:,} values in the declared columns, at least a byte each",
            )
        memory = available_memory()
        if memory is not None and self.decoded * VALUE_BYTES > memory:
            raise DataError(
                f"{self.source}: its Parquet footers declare {metadata.num_rows:,} rows in this file, at least "
                f"{_shown_bytes(self.decoded * VALUE_BYTES)} once read ({VALUE_BYTES} bytes a value), more "
                f"than this machine's {_shown_bytes(memory)} of free memory; nothing was read. Use the Spark "
                "engine, or a machine with more memory"
            )


def available_memory() -> int | None:
    """The machine's free physical memory in bytes, or None where it cannot be told."""
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, ValueError, OSError):
        return None


def check_csv_stream(where: str, stream, digest=None) -> None:
    """Scan a CSV's (decompressed) bytes: DataError at the first record longer than
    MAX_RECORD_BYTES or once the whole exceeds the limit. Quote-aware: a newline inside a
    quoted field does not end a record (quotes are counted; an escaped quote `""` counts twice).
    With `digest` (a hashlib object), every byte scanned is also fed to it, in the same pass."""
    cap, total, start, quotes = max_data_bytes(), 0, 0, 0  # start: where the open record began
    while True:
        block = stream.read(_BLOCK)
        if not block:
            return
        if digest is not None:
            digest.update(block)
        arr = np.frombuffer(block, dtype=np.uint8)
        is_quote = arr == 34
        in_block = int(np.count_nonzero(is_quote))
        if in_block:
            before = quotes + np.cumsum(is_quote, dtype=np.int64) - is_quote  # quotes before each byte
            ends = np.flatnonzero((arr == 10) & (before % 2 == 0)) + total
        else:  # no quote in the block (the common case): every newline ends a record, or none does
            ends = np.flatnonzero(arr == 10) + total if quotes % 2 == 0 else np.empty(0, dtype=np.int64)
        if len(ends):
            lengths = np.diff(ends, prepend=start - 1)  # each record with its newline
            if lengths.max() > MAX_RECORD_BYTES:
                k = int(np.argmax(lengths > MAX_RECORD_BYTES))
                first = int(ends[k] - lengths[k] + 1)
                raise DataError(
                    f"{where}: the record starting at byte {first:,} is {int(lengths[k]):,} bytes long, "
                    f"more than the {MAX_RECORD_BYTES:,} a CSV record may hold; nothing was read"
                )
            start = int(ends[-1]) + 1
        quotes += in_block
        total += len(arr)
        if total - start > MAX_RECORD_BYTES:
            raise DataError(
                f"{where}: the record starting at byte {start:,} is more than {MAX_RECORD_BYTES:,} bytes "
                "long (the most a CSV record may hold; a quote left open, or no line ends); nothing "
                "was read"
            )
        if total > cap:
            raise _too_large(where, f"the file holds more than {_shown_bytes(cap)} (decompressed)")


def check_csv_file(path: str, fingerprint: bool = False) -> str | None:
    """`check_csv_stream` on a local CSV, decompressed as pandas would read it (.gz, .bz2, .zip, .xz, .zst).

    With `fingerprint`, an uncompressed file's SHA-256 (its bytes, as `sources.file_sha256`
    hashes them) is computed in the same pass and returned, so the file is read twice in all
    (this scan and pandas) rather than three times. A compressed file's scan sees the
    decompressed bytes, not the file's, so it returns None and is fingerprinted on its own."""
    if fingerprint and _common.infer_compression(path, "infer") is None:
        digest = hashlib.sha256()
        with open(path, "rb") as fh:
            check_csv_stream(path, fh, digest)
        return digest.hexdigest()
    with _common.get_handle(path, "rb", compression="infer", is_text=False) as handles:
        check_csv_stream(path, handles.handle)
    return None
