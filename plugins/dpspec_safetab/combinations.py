"""Records as their distinct combinations of some columns, each with a count.

Why: every check and every count SafeTab makes is a sum over records of something that depends
only on a few of a record's columns. So records are reduced to their distinct combinations of
those columns with how many records each stands for, and codes are encoded and flattened once
per combination instead of once per record, the counts being weighted sums: the driver checks
the records from their code combinations (`validate`, counted by the engine for its table, so
on Spark only these rows reach the driver), and each unit of work reduces its partition so
(`truths`). A pandas frame (a CSV source, or a caller handing records directly) is reduced in
this process, keeping for each combination the number of its first record, so that a bad
record is still named by its row; an engine table has no row order, so its messages name the
value and how many rows hold it.
"""

from __future__ import annotations

import attrs
import numpy as np
import pandas as pd

from dpspec.api import EngineTable, MechanismError


@attrs.frozen
class Origin:
    """What the rows SafeTab encodes stand for: `weight` records each, the first of them at the
    0-based row `first_row` of the source (None: an engine table, whose rows have no numbers)."""

    weight: np.ndarray
    first_row: np.ndarray | None

    @classmethod
    def records(cls, n: int) -> "Origin":
        """Each row one record, numbered as it stands (the frame as the caller gave it)."""
        return cls(np.ones(n, dtype=np.int64), np.arange(n, dtype=np.int64))

    @property
    def numbered(self) -> bool:
        return self.first_row is not None

    def row(self, i: int) -> int:
        """The 1-based source row of the first record of row `i` (only when `numbered`)."""
        return int(self.first_row[i]) + 1

    def count(self, rows) -> int:
        """How many records the rows `rows` (indices or a mask) stand for."""
        return int(self.weight[rows].sum())


def rows_text(n: int) -> str:
    return f"{n} row" + ("" if n == 1 else "s")


def combinations(data, columns: list[str], engine=None) -> tuple[pd.DataFrame, Origin]:
    """(one row per distinct combination of `columns`, what each stands for).

    data: a pandas frame (reduced here; combinations in the order of their first record) or an
    `EngineTable` (counted by `engine`; combinations in the engine's sorted order)."""
    if isinstance(data, EngineTable):
        if engine is None:
            raise MechanismError(f"{data.path}: an engine-held table needs the engine that holds it")
        counts = engine.count(data, columns)
        return counts[columns].reset_index(drop=True), Origin(counts["count"].to_numpy(dtype=np.int64), None)
    label = combination_labels(data, columns)
    # labels number combinations by first appearance: a row is a first one iff it exceeds every label before it
    seen = np.maximum.accumulate(label) if len(label) else label
    first = np.flatnonzero(np.r_[True, label[1:] > seen[:-1]]) if len(label) else np.zeros(0, dtype=np.int64)
    weight = np.bincount(label, minlength=len(first)).astype(np.int64)
    return data[columns].iloc[first].reset_index(drop=True), Origin(weight, first.astype(np.int64))


def combination_labels(frame: pd.DataFrame, columns: list[str]) -> np.ndarray:
    """Each row's combination of `columns` as 0..k-1, numbered in order of first appearance
    (missing values are a value of their own). Mixed-radix keys over per-column codes, folded
    back to dense labels before they could overflow: faster than a multi-column groupby."""
    key = np.zeros(len(frame), dtype=np.int64)
    size = 1
    for col in columns:
        codes, uniques = pd.factorize(frame[col], use_na_sentinel=True)
        radix = len(uniques) + 1  # + missing
        if size * radix >= 2**62:
            key, seen = pd.factorize(key)
            size = len(seen)
        key = key * radix + (codes.astype(np.int64) + 1)
        size *= radix
    labels, _ = pd.factorize(key)
    return labels.astype(np.int64)


def text_codes(values: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """(each value's position in `labels`, -1 where missing; the distinct values as text).

    What `values.astype(str)` would give, computed on the distinct values only: a column of a
    few thousand codes over millions of rows is hashed once, not converted row by row."""
    codes, uniques = pd.factorize(values, use_na_sentinel=True)
    text = np.array([str(u) for u in uniques], dtype=object)
    merged, labels = pd.factorize(text)  # values equal only as text (1 and "1") are one label
    codes = codes.astype(np.int64)
    if len(labels) < len(text):
        codes = through(merged, codes)
    return codes, np.asarray(labels, dtype=object)


def through(mapping: np.ndarray, codes: np.ndarray) -> np.ndarray:
    """mapping[codes] as int64, with -1 (missing) kept -1, even when `mapping` is empty."""
    return np.append(np.asarray(mapping, dtype=np.int64), -1)[codes]
