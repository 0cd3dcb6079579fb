"""A release table written piece by piece: what a mechanism returns when no process should hold it.

Why: a national release (hundreds of millions of person records) does not fit the driver, and an
engine may hold it on its executors. A mechanism then puts a `StreamedTable` in
`Release.outputs` instead of a pandas frame. The core never asks for the whole table: it writes
the chunks one after another (the bytes equal those of the concatenated frame written at once),
checks invariants and tabulates release queries from `count`, and reads its size from `rows`.

A table whose rows are made where its units live (an engine's executors, a process pool) may
also write them there: `write_parts` (API 1.7) hands it a scratch folder, and the core joins
the part files it returns into the one file a reader gets (`dpspec.publish.table_csv`).
"""

from __future__ import annotations

from typing import Callable, Iterator, Sequence

import attrs
import pandas as pd


@attrs.frozen
class StreamedTable:
    """A table known by its chunks.

    columns: the column names, in order; every chunk has exactly these.
    rows: the number of rows (a mechanism knows it before writing: the report shows it).
    chunks: returns a fresh iterator of pandas frames, in the table's final row order; each call
    starts again from the first row.
    dtypes: column -> pandas dtype of the chunks (a CategoricalDtype says the column's value set:
    release queries then list every cell, zeros included, as for a frame).
    counter: by -> rows per observed combination of `by`, as `count`, sorted by `by`; computed
    where the rows live (an engine). Without it `count` goes through the chunks.
    engine_bound: the chunks are read from an execution engine, which must still run when they
    are read (the command line writes the release before stopping the engine).
    release: frees what holds the rows (a Spark cache), called once the table is no longer
    needed, e.g. for the extra runs of `--runs R`, which are only measured, never written.
    held: the engine's own table behind the chunks (what `map_groups(collect=False)` or
    `lookup` returned), so that compile compares its counts with the input's where both live
    (`Engine.counts_differ`) instead of bringing both counts to the driver.
    write_parts (optional, API 1.7): `write_parts(folder, filename)` writes the table's rows, as
    CSV without a header, into part files in `folder`, one per range of units, each written by
    `write_csv_part` (so its bytes are those the driver would write for the same rows, and its
    values are checked for spreadsheet formulas, a refusal naming `filename`, the file the parts
    become), and returns the parts' names in the table's row order, having written exactly
    `rows` rows. The core writes the header, joins the parts after it by kernel copy and removes
    them; the file holds the bytes the chunks would give. `folder` is a private scratch folder
    beside the output set, which other processes of this user on this machine can write
    through; a part that fails fails the compile, and nothing is published. The hook may use
    the engine, so a table read whole before its engine stops (`compile` given an engine's name)
    is written from its chunks.
    """

    columns: tuple = attrs.field(converter=tuple)
    rows: int
    chunks: Callable[[], Iterator[pd.DataFrame]] = attrs.field(repr=False)
    dtypes: dict = attrs.field(factory=dict, repr=False)
    counter: Callable[[list], pd.DataFrame] | None = attrs.field(default=None, repr=False)
    engine_bound: bool = False
    release: Callable[[], None] | None = attrs.field(default=None, repr=False)
    held: object = attrs.field(default=None, repr=False)
    write_parts: Callable[[str, str], Sequence[str]] | None = attrs.field(default=None, repr=False)

    def __len__(self) -> int:
        return self.rows

    def iter_chunks(self) -> Iterator[pd.DataFrame]:
        """The chunks, each checked to have the declared columns (a mechanism bug otherwise)."""
        for chunk in self.chunks():
            if list(chunk.columns) != list(self.columns):
                raise ValueError(
                    f"a chunk of a streamed table has the columns {list(chunk.columns)}, "
                    f"not the declared {list(self.columns)}"
                )
            yield chunk

    def count(self, by) -> pd.DataFrame:
        """Rows per observed combination of `by` (sorted), as `count`; one row when `by` is empty."""
        by = list(by)
        if not by:
            return pd.DataFrame({"count": [self.rows]}, dtype="int64")
        if self.counter is not None:
            return self.counter(by)
        parts = [c.groupby(by, observed=True, dropna=False, sort=False).size() for c in self.iter_chunks()]
        if not parts:
            return pd.DataFrame(
                {
                    **{c: pd.Series([], dtype=self.dtypes.get(c, object)) for c in by},
                    "count": pd.Series([], dtype="int64"),
                }
            )
        total = pd.concat(parts).groupby(level=list(range(len(by))), dropna=False, sort=True).sum()
        return total.rename("count").reset_index().astype({"count": "int64"})

    def to_pandas(self) -> pd.DataFrame:
        """The whole table as one frame: for small tables and tests, never on a national path."""
        parts = list(self.iter_chunks())
        if not parts:
            return pd.DataFrame({c: pd.Series([], dtype=self.dtypes.get(c, object)) for c in self.columns})
        return pd.concat(parts, ignore_index=True)


def frame_chunks(frame: pd.DataFrame, size: int) -> Callable[[], Iterator[pd.DataFrame]]:
    """A `chunks` callable over an in-memory frame, `size` rows at a time (tests, small engines)."""

    def chunks():
        for start in range(0, len(frame), max(1, int(size))):
            yield frame.iloc[start : start + size]

    return chunks
