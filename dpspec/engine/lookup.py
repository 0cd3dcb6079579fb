"""A keyed lookup: each row of a child table takes values from the parent row its key names.

Why: carrying a swap along to a linked table (persons get their household's new geography) is
a left join of the persons on their household id, and at national size neither table fits the
driver. `Engine.lookup` does that join where the tables live and keeps its result there, like
`map_groups(collect=False)`; the driver gets only `LookupChecks`, the aggregates a caller needs
to refuse bad data: parent keys held by more than one parent row, child rows whose key names no
parent, child rows whose value disagrees with a parent column they must equal. Each problem
comes with its first few values (sorted, missing last) and how many rows hold them, so both
engines say the same thing about the same data.

This module holds the result type and the local engine's implementation (pandas, vectorized);
Spark's is `dpspec.engine.spark_lookup`.
"""

from __future__ import annotations

import attrs
import numpy as np
import pandas as pd

from dpspec.engine import frames

SHOW = 5  # problem values listed per check (as the data checks list bad values)
VALUE, PARENT_VALUE, COUNT = "value", "parent_value", "count"


@attrs.frozen(eq=False)
class LookupChecks:
    """What `Engine.lookup` found wrong, from aggregates (nothing row-level).

    duplicate_keys: parent key values held by more than one parent row (the join is then not
    done); duplicates: the first of them, columns [key, count] (count: parent rows).
    unmatched_rows: child rows whose key names no parent; unmatched: the first such key values,
    columns [key, count] (count: child rows).
    mismatched_rows: child column -> rows whose value differs from the parent column `compare`
    pairs it with (two missing values are equal); mismatched: child column -> the first
    differing pairs, columns [value, parent_value, count].
    """

    duplicate_keys: int = 0
    duplicates: pd.DataFrame | None = None
    unmatched_rows: int = 0
    unmatched: pd.DataFrame | None = None
    mismatched_rows: dict = attrs.Factory(dict)
    mismatched: dict = attrs.Factory(dict)

    @property
    def ok(self) -> bool:
        return not (self.duplicate_keys or self.unmatched_rows or any(self.mismatched_rows.values()))


def first_counts(values: pd.DataFrame, show: int) -> tuple[int, pd.DataFrame]:
    """(distinct rows of `values`, the first `show` of them in canonical order with their counts)."""
    cols = list(values.columns)
    counts = values.groupby(cols, dropna=False, sort=False).size().rename(COUNT).reset_index()
    counts = frames.sort_rows(counts, cols)
    return len(counts), counts.head(show).reset_index(drop=True).astype({COUNT: "int64"})


def lookup_frame(
    child: pd.DataFrame, key: str, parent: pd.DataFrame, take: dict, compare: dict, show: int = SHOW
) -> tuple[pd.DataFrame | None, LookupChecks]:
    """`Engine.lookup` on pandas frames, in this process (the local engine's implementation):
    the checks in the order a caller reports them (duplicate parents, then children without a
    parent, then disagreements), the joined table only when all pass."""
    child_kinds = frames.schema_of(child)
    parent_kinds = frames.schema_of(parent)
    parent_keys = frames.cast(parent[[key]], {key: child_kinds[key]})
    counts = parent_keys.groupby(key, dropna=False, sort=False).size()
    repeated = counts[counts > 1]
    if len(repeated):  # the join is not defined: say so before joining
        first = frames.sort_rows(repeated.rename(COUNT).reset_index(), [key]).head(show)
        return None, LookupChecks(duplicate_keys=int(len(repeated)), duplicates=_typed(first, {key: child_kinds[key]}))
    child_keys = frames.canonical(child[[key]])[key]
    pos = pd.Index(parent_keys[key]).get_indexer(child_keys)
    missing = pos < 0
    unmatched_rows = int(missing.sum())
    unmatched = None
    if unmatched_rows:
        _, unmatched = first_counts(pd.DataFrame({key: child_keys[missing]}), show)
        unmatched = _typed(unmatched, {key: child_kinds[key]})
    found = np.flatnonzero(~missing)
    mismatched_rows, mismatched = {}, {}
    for col, pcol in compare.items():
        mine = frames.canonical(child[[col]])[col].to_numpy()[found]
        theirs = _parent_values(parent, pcol, pos[found], child_kinds[col])
        differs = ~equal_or_both_missing(mine, theirs)
        mismatched_rows[col] = int(differs.sum())
        if mismatched_rows[col]:
            pairs = pd.DataFrame({VALUE: mine[differs], PARENT_VALUE: theirs[differs]})
            mismatched[col] = _typed(
                first_counts(pairs, show)[1], {VALUE: child_kinds[col], PARENT_VALUE: child_kinds[col]}
            )
    checks = LookupChecks(
        unmatched_rows=unmatched_rows, unmatched=unmatched, mismatched_rows=mismatched_rows, mismatched=mismatched
    )
    if not checks.ok:
        return None, checks
    out = child.copy(deep=False)  # columns are replaced, never written into: the input stays as it was
    for col, pcol in take.items():
        out[col] = _taken(parent[pcol], pos, child_kinds.get(col, parent_kinds[pcol]))
    return frames.compact(out), checks


def _typed(frame: pd.DataFrame, kinds: dict) -> pd.DataFrame:
    """A checks frame in canonical types (its count as int64)."""
    return frames.cast(frame, {**kinds, COUNT: "int64"})


def _parent_values(parent: pd.DataFrame, column: str, pos: np.ndarray, kind: str) -> np.ndarray:
    """The parent column's canonical values at `pos` (every position found), as the child's kind."""
    return frames.cast(parent[[column]].iloc[pos], {column: kind})[column].to_numpy()


def _taken(column: pd.Series, pos: np.ndarray, kind: str):
    """The parent column at `pos` (every child found its parent) in canonical kind `kind`; a
    text column stays categorical (its few labels, not a string per row)."""
    values = pd.Series(column.array.take(pos))
    if kind == "str" and isinstance(values.dtype, pd.CategoricalDtype):
        labels = frames.cast(pd.DataFrame({"c": values.cat.categories}), {"c": "str"})["c"]
        if not labels.duplicated().any():
            return values.cat.rename_categories(list(labels))
    return frames.cast(pd.DataFrame({"c": values}), {"c": kind})["c"].to_numpy()


def equal_or_both_missing(a, b) -> np.ndarray:
    """Elementwise equality in which two missing values count as equal."""
    a, b = np.asarray(a), np.asarray(b)
    a_na, b_na = np.asarray(pd.isna(a)), np.asarray(pd.isna(b))
    eq = (
        np.asarray(a == b, dtype=bool)
        if a.dtype == b.dtype
        else np.asarray(a.astype(object) == b.astype(object), dtype=bool)
    )
    return (eq & ~a_na & ~b_na) | (a_na & b_na)


def counts_differ_frames(a: pd.DataFrame, b: pd.DataFrame, by) -> int:
    """`Engine.counts_differ` of two count frames (`Engine.count`'s): cells, compared as text,
    whose counts differ (a cell missing on one side counts 0 there)."""
    by = list(by)
    if not by:
        return int(int(a[COUNT].sum()) != int(b[COUNT].sum()))

    def as_text(counts: pd.DataFrame) -> pd.Series:
        keys = counts[by].astype(str)  # as compile compares counts: the same text on both sides
        return pd.Series(counts[COUNT].to_numpy(dtype=np.int64), index=pd.MultiIndex.from_frame(keys))

    left, right = as_text(a), as_text(b)
    both = pd.concat([left.rename("a"), right.rename("b")], axis=1).fillna(0)
    return int((both["a"] != both["b"]).sum())
