"""Write a release table as CSV, whether a frame or a `StreamedTable` written chunk by chunk.

One writer for both, so a streamed table's file holds exactly the bytes its concatenated frame
would: the header once, then every chunk's rows in order (pandas formats each value alone).

Released CSVs are opened in spreadsheets, which run a cell such as `=cmd|' /C calc'!A0` as a
formula. Escaping it (a leading `'`) would change the data every program reads, so a release
holding a text value that a spreadsheet would evaluate (it starts with = + - @, a tab or a
carriage return, and is not a number) is refused instead, before anything is published: the
data's codes must be recoded. See docs/guides/safety.md.

A streamed table with `write_parts` writes its rows where its units live, as header-less part
files formatted here too (`write_csv_part`, each checked for formulas); the driver writes the
header and joins the parts after it by kernel copy (`os.copy_file_range`: bytes only), so the
file holds the same bytes as the chunks written one after another.
"""

from __future__ import annotations

import errno
import os
import re
from typing import Iterable

import numpy as np
import pandas as pd

from dpspec.contract.streamed import StreamedTable
from dpspec.errors import DataError, MechanismError
from dpspec.language.values import shown


def write_table_csv(table, path: str, scratch=None) -> int:
    """Write `table` to `path` (a staged file); returns the number of rows written.

    scratch: a folder for a streamed table's parts (`output_set.scratch_beside`); a table with
    `write_parts` is then written in parts and joined, else from its chunks."""
    if not isinstance(table, StreamedTable):
        refuse_formulas(table, path)
        table.to_csv(path, index=False)
        return int(len(table))
    if scratch is not None and table.write_parts is not None:
        return _joined(table, path, scratch)
    rows = 0
    with open(path, "w", encoding="utf-8", newline="") as fh:
        try:
            for chunk in table.iter_chunks():
                refuse_formulas(chunk, path)
                chunk.to_csv(fh, index=False, header=fh.tell() == 0)
                rows += len(chunk)
        except ValueError as exc:
            raise MechanismError(f"the mechanism streamed a malformed table: {exc}") from None
        if fh.tell() == 0:  # no chunk, or only empty ones: the header alone, as an empty frame writes it
            fh.write(_header(table.columns))
    if rows != table.rows:
        raise MechanismError(f"the mechanism announced {table.rows} rows for a streamed table but streamed {rows}")
    return rows


def write_csv_part(chunks: Iterable[pd.DataFrame], path: str, label: str) -> int:
    """Rows of a release table as CSV without a header, in a new file `path` (a part of the
    file `label`, which a refusal names): each chunk checked for formulas and formatted as
    `write_table_csv` formats it, so the parts joined after the header hold the same bytes.
    Returns the number of rows written."""
    rows = 0
    named = os.path.join(os.path.dirname(path), label)  # refuse_formulas names the file by its basename
    with open(path, "x", encoding="utf-8", newline="") as fh:
        for chunk in chunks:
            refuse_formulas(chunk, named)
            chunk.to_csv(fh, index=False, header=False)
            rows += len(chunk)
    return rows


def _header(columns) -> str:
    """The header line of a table with these columns, as pandas writes it before the rows."""
    return pd.DataFrame(columns=list(columns)).to_csv(index=False)


def _joined(table: StreamedTable, path: str, scratch) -> int:
    """`table` written by its `write_parts` into `scratch`, then joined after the header into
    `path`, each part removed once copied; a part that is missing is the mechanism's bug."""
    names = list(table.write_parts(scratch.path, os.path.basename(path)))
    with open(path, "wb") as out:
        out.write(_header(table.columns).encode("utf-8"))
        out.flush()
        for name in names:
            if not isinstance(name, str) or os.path.basename(name) != name or name.startswith("."):
                raise MechanismError(f"the mechanism named a part {name!r} of a streamed table, not a file name")
            try:
                src = os.open(name, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0), dir_fd=scratch.fd)
            except FileNotFoundError:
                raise MechanismError(f"the mechanism named a part {name!r} of a streamed table that it did not write")
            try:
                append_file(src, out.fileno())
            finally:
                os.close(src)
            os.unlink(name, dir_fd=scratch.fd)
    return table.rows


_NO_KERNEL_COPY = {errno.EXDEV, errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP, errno.EBADF, errno.ETXTBSY}


def append_file(src: int, dst: int, block: int = 1 << 20) -> int:
    """Copy the rest of the open file `src` to the end of the open file `dst` (both positions
    advance): by `os.copy_file_range`, the bytes never leaving the kernel, and by a plain
    read-write loop where the system or the file systems cannot. Returns the bytes copied."""
    size = os.fstat(src).st_size - os.lseek(src, 0, os.SEEK_CUR)
    done = 0
    copy = getattr(os, "copy_file_range", None)
    while copy is not None and done < size:
        try:
            n = copy(src, dst, min(size - done, 1 << 30))
        except OSError as exc:
            if exc.errno not in _NO_KERNEL_COPY:
                raise
            break
        if n == 0:
            break
        done += n
    while True:  # what the kernel copy left (all of it where there is none)
        data = os.read(src, block)
        if not data:
            return done
        view = memoryview(data)
        while view:
            written = os.write(dst, view)
            view = view[written:]
        done += len(data)


_FORMULA = re.compile(r"^[=+\-@\t\r]")


def formula_cells(values) -> list[str]:
    """The distinct text values a spreadsheet would evaluate as a formula (numbers such as -3 are not)."""
    text = pd.Series(pd.unique(np.asarray(values, dtype=object)), dtype=object).dropna().astype(str)
    risky = text[text.str.match(_FORMULA)]
    return risky[pd.to_numeric(risky, errors="coerce").isna()].tolist()


def refuse_formulas(frame: pd.DataFrame, path: str) -> None:
    """DataError if a text column of a release table holds a value a spreadsheet would run."""
    for column in frame.columns:
        series = frame[column]
        if isinstance(series.dtype, pd.CategoricalDtype):
            values = series.cat.categories
        elif pd.api.types.is_object_dtype(series.dtype) or pd.api.types.is_string_dtype(series.dtype):
            values = series.to_numpy()
        else:
            continue
        bad = formula_cells(values)
        if bad:
            raise DataError(
                f"{os.path.basename(path)}: column '{column}' would release {shown(bad[0])}"
                + (f" (and {len(bad) - 1} more such values)" if len(bad) > 1 else "")
                + ", which a spreadsheet opening the file runs as a formula; nothing was published. "
                "Recode such values in the data (a value may not start with = + - @, a tab or a carriage return "
                "unless it is a number)"
            )
