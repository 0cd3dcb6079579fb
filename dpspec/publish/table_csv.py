"""Write a release table as CSV, whether a frame or a `StreamedTable` written chunk by chunk.

One writer for both, so a streamed table's file holds exactly the bytes its concatenated frame
would: the header once, then every chunk's rows in order (pandas formats each value alone).
"""
from __future__ import annotations

import pandas as pd

from dpspec.contract.streamed import StreamedTable
from dpspec.errors import MechanismError


def write_table_csv(table, path: str) -> int:
    """Write `table` to `path` (a staged file); returns the number of rows written."""
    if not isinstance(table, StreamedTable):
        table.to_csv(path, index=False)
        return int(len(table))
    rows = 0
    with open(path, "w", encoding="utf-8", newline="") as fh:
        try:
            for chunk in table.iter_chunks():
                chunk.to_csv(fh, index=False, header=fh.tell() == 0)
                rows += len(chunk)
        except ValueError as exc:
            raise MechanismError(f"the mechanism streamed a malformed table: {exc}") from None
        if fh.tell() == 0:  # no chunk, or only empty ones: the header alone, as an empty frame writes it
            pd.DataFrame(columns=list(table.columns)).to_csv(fh, index=False)
    if rows != table.rows:
        raise MechanismError(f"the mechanism announced {table.rows} rows for a streamed table but streamed {rows}")
    return rows
