"""Swaps carried along to a linked table on the engine: persons take their household's new values.

Why: `algorithm.carry_along` joins persons to households in this process, so from Parquet a
national person table would have to come to the driver. Here the join is an engine operation
(`engine.lookup`): each person row takes the swapped values of the household row its link
names, from the swapped households the engine still holds (they keep their values before the
swap beside them, `on_engine.BEFORE`, for the check that a person agreed with its household).
The persons stay on the engine and are released as a `StreamedTable` sorted by every column,
like the households. The data errors say what `carry_along` says, with a count of rows in place
of a row number (rows have no order on a cluster), in the same words on every engine.
"""

from __future__ import annotations

import pandas as pd

from dpspec.api import DataError, EngineTable, StreamedTable, shown
from dpspec_swap.on_engine import BEFORE


def carry_on_engine(engine, child, link: str, held_parent, parent: EngineTable, carried) -> StreamedTable:
    """The child table (an `EngineTable`, or a frame read in this process) with `carried`
    columns taken from the swapped parent rows (`held_parent`, from `swap_engine_table` with
    `keep_before=carried`), as a streamed release; DataError if a check fails."""
    carried = list(carried)
    joined, checks = engine.lookup(
        child, link, held_parent, {c: c for c in carried}, {c: BEFORE + c for c in carried}, stage="carry"
    )
    if not checks.ok:
        raise DataError(carry_error(checks, link))
    columns = list(child.columns)
    dtypes = release_dtypes(child, parent, carried)

    def chunks():
        for chunk in engine.stream(joined, order_by=columns, columns=columns):
            yield chunk.astype(dtypes)

    return StreamedTable(
        columns,
        len(child),
        chunks,
        dtypes=dtypes,
        counter=lambda by: engine.count(joined, by),
        engine_bound=True,
        release=lambda: engine.drop(joined),
        held=joined,
    )


def release_dtypes(child, parent: EngineTable, carried) -> dict:
    """The child release's column types: as a compile from pandas gives them, except that a
    carried code column also admits the parent's codes (a household's county that no person
    had before), so that no carried value is lost to a narrower category set."""

    def dtype(table, col):
        return table.dtype(col) if isinstance(table, EngineTable) else table[col].dtype

    out = {c: dtype(child, c) for c in child.columns}
    for col in carried:
        mine, theirs = out[col], dtype(parent, col)
        if isinstance(mine, pd.CategoricalDtype) and isinstance(theirs, pd.CategoricalDtype):
            extra = [v for v in theirs.categories if v not in set(mine.categories)]
            if extra:
                out[col] = pd.CategoricalDtype([*mine.categories, *extra])
    return out


def carry_error(checks, link: str) -> str:
    """`carry_along`'s messages, from the lookup's aggregates: the first value with its rows,
    and how many rows (or keys) in all when there are more."""
    if checks.duplicate_keys:
        first = checks.duplicates.iloc[0]
        text = (
            f"column {link!r}: key {shown(first[link])} names more than one parent record "
            f"({_rows(first['count'], 'record')})"
        )
        if checks.duplicate_keys > 1:
            text += f"; {checks.duplicate_keys} keys do: " + _listing(
                checks.duplicates, [link], "record", checks.duplicate_keys
            )
        return text
    if checks.unmatched_rows:
        first = checks.unmatched.iloc[0]
        text = f"column {link!r}: value {shown(first[link])} ({_rows(first['count'])}) matches no parent record"
        if checks.unmatched_rows > first["count"]:
            text += f"; {_rows(checks.unmatched_rows)} in all match none: " + _listing(
                checks.unmatched, [link], "row", None, checks.unmatched_rows
            )
        return text
    for col, n in checks.mismatched_rows.items():
        if not n:
            continue
        pairs = checks.mismatched[col]
        first = pairs.iloc[0]
        text = (
            f"column {col!r}: value {shown(first['value'])} ({_rows(first['count'])}) differs from its "
            f"parent's {shown(first['parent_value'])} before the swap"
        )
        if n > first["count"]:
            listed = ", ".join(
                f"{shown(r['value'])} vs {shown(r['parent_value'])} ({_rows(r['count'])})" for _, r in pairs.iterrows()
            )
            more = ", ..." if int(pairs["count"].sum()) < n else ""
            text += f"; {_rows(n)} in all differ: {listed}{more}"
        return text
    return "the linked table does not match its parent table"


def _rows(n, what: str = "row") -> str:
    return f"{int(n)} {what}" + ("" if int(n) == 1 else "s")


def _listing(frame: pd.DataFrame, cols, what: str, values: int | None = None, rows: int | None = None) -> str:
    """'7 (2 rows), 9 (3 rows)', with ', ...' when the frame lists fewer values or rows than exist."""
    listed = ", ".join(
        f"{', '.join(shown(row[c]) for c in cols)} ({_rows(row['count'], what)})" for _, row in frame.iterrows()
    )
    short = (values is not None and len(frame) < values) or (rows is not None and int(frame["count"].sum()) < rows)
    return listed + (", ..." if short else "")
