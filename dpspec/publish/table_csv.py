"""Write a release table as CSV, whether a frame or a `StreamedTable` written chunk by chunk.

One writer for both, so a streamed table's file holds exactly the bytes its concatenated frame
would: the header once, then every chunk's rows in order (pandas formats each value alone).

Released CSVs are opened in spreadsheets, which run a cell such as `=cmd|' /C calc'!A0` as a
formula. Escaping it (a leading `'`) would change the data every program reads, so a release
holding a text value that a spreadsheet would evaluate (it starts with = + - @, a tab or a
carriage return, and is not a number) is refused instead, before anything is published: the
data's codes must be recoded. See docs/guides/safety.md.
"""

from __future__ import annotations

import os
import re

import numpy as np
import pandas as pd

from dpspec.contract.streamed import StreamedTable
from dpspec.errors import DataError, MechanismError
from dpspec.language.values import shown


def write_table_csv(table, path: str) -> int:
    """Write `table` to `path` (a staged file); returns the number of rows written."""
    if not isinstance(table, StreamedTable):
        refuse_formulas(table, path)
        table.to_csv(path, index=False)
        return int(len(table))
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
            pd.DataFrame(columns=list(table.columns)).to_csv(fh, index=False)
    if rows != table.rows:
        raise MechanismError(f"the mechanism announced {table.rows} rows for a streamed table but streamed {rows}")
    return rows


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
