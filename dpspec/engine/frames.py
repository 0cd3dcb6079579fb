"""The canonical forms that make engines interchangeable: column types, row order, output order.

A unit of work must see byte-identical input on every engine, whatever order the rows arrived in
and however the table was partitioned; and the engine's combined output must come back in one
order. Both engines use these functions, so equivalence is by construction, not by luck.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

# The column types units of work exchange with an engine (Spark's Long/Double/Boolean/String);
# "boolean" is a bool column that may be missing (pandas' nullable BooleanDtype): a plain bool
# cannot hold a missing value, and turning one into False would change the data.
DTYPES = ("int64", "float64", "bool", "boolean", "str")
HIDDEN = "__dpspec_"
SEQ = HIDDEN + "seq"


def key_columns(n: int) -> list[str]:
    return [f"{HIDDEN}k{i}" for i in range(n)]


def dtype_name(series: pd.Series) -> str:
    """The canonical type of a column: categoricals by their categories, every width widened."""
    dtype = series.dtype
    if isinstance(dtype, pd.CategoricalDtype):
        dtype = dtype.categories.dtype
    if isinstance(dtype, pd.BooleanDtype):
        return "boolean"
    if pd.api.types.is_bool_dtype(dtype):  # a categorical of bools may still miss values
        return "boolean" if isinstance(series.dtype, pd.CategoricalDtype) and series.isna().any() else "bool"
    if pd.api.types.is_integer_dtype(dtype):
        return "int64" if not series.isna().any() else "float64"
    if pd.api.types.is_float_dtype(dtype):
        return "float64"
    return "str"


def cast(frame: pd.DataFrame, schema: dict[str, str]) -> pd.DataFrame:
    """`frame` with exactly the columns of `schema`, in its order and types (a new frame)."""
    missing = [c for c in schema if c not in frame.columns]
    if missing:
        raise ValueError(f"the unit of work returned no column(s) {', '.join(missing)}")
    out = {}
    for name, kind in schema.items():
        col = frame[name].reset_index(drop=True)
        if kind == "str" and isinstance(col.dtype, pd.CategoricalDtype):
            out[name] = _decode_text(col)
            continue
        if isinstance(col.dtype, pd.CategoricalDtype):  # ints or bools with missing: via object
            cats = col.cat.categories.dtype
            col = col.astype(object if cats.kind in "iub" and col.hasnans else cats)
        if kind == "str":
            values = col.astype(object)
            if pd.api.types.infer_dtype(values, skipna=True) not in ("string", "empty"):
                values = values.map(str, na_action="ignore").astype(object)  # only for columns not already text
            out[name] = values.where(values.notna(), None) if values.hasnans else values
        elif kind == "bool":
            out[name] = col.astype(bool)
        elif kind == "boolean":
            out[name] = col.astype("boolean")
        else:
            out[name] = col.astype(np.dtype(kind))
    return pd.DataFrame(out, index=pd.RangeIndex(len(frame)))


def _decode_text(col: pd.Series) -> pd.Series:
    """A categorical column as text, by indexing its (few) category labels with its codes."""
    cats = col.cat.categories
    if isinstance(cats.dtype, pd.StringDtype):  # text already: converted at once, not one by one
        labels = np.append(cats.to_numpy(dtype=object), np.array([None], dtype=object))
    else:
        labels = np.array([str(c) for c in cats] + [None], dtype=object)
    codes = col.cat.codes.to_numpy()
    return pd.Series(labels[np.where(codes < 0, len(labels) - 1, codes)], dtype=object)


def schema_of(frame: pd.DataFrame) -> dict[str, str]:
    return {str(c): dtype_name(frame[c]) for c in frame.columns}


def canonical(frame: pd.DataFrame, schema: dict[str, str] | None = None) -> pd.DataFrame:
    """`frame` in canonical column types (categoricals decoded, integers as int64)."""
    return cast(frame, schema or schema_of(frame))


def sort_rows(frame: pd.DataFrame, columns=None) -> pd.DataFrame:
    """Rows in the canonical order: lexicographic by `columns` (default all), missing last.

    Rows equal in every column are interchangeable, so sorting by all columns gives a unit of
    work the same input however the rows were stored or partitioned.
    """
    cols = list(frame.columns) if columns is None else list(columns)
    if not cols or len(frame) < 2:
        return frame.reset_index(drop=True)
    return frame.sort_values(cols, kind="mergesort", na_position="last").reset_index(drop=True)


def canonical_order(frame: pd.DataFrame, columns=None) -> np.ndarray:
    """The row positions in `sort_rows(canonical(frame), columns)`' order, found without decoding
    the frame: a categorical ranks its few categories once (no string compared per row), and one
    stable argsort of a single int64 key replaces a sort by many columns. Ties keep the stored
    order, as `sort_rows`' stable sort does, so taking these rows then decoding them gives that
    frame byte for byte."""
    cols = list(frame.columns) if columns is None else list(columns)
    if not cols or len(frame) < 2:
        return np.arange(len(frame))
    return np.argsort(order_key(frame, cols), kind="stable")


def order_key(frame: pd.DataFrame, columns) -> np.ndarray:
    """One int64 per row that orders the rows as their canonical values in `columns` do
    (lexicographically, missing last), and is equal for two rows exactly when those values are:
    categories equal only once cast (1 and "1") share a rank, so a caller can merge them."""
    return mixed_radix(canonical_rank(frame[c]) for c in columns)


def canonical_rank(series: pd.Series) -> np.ndarray:
    """Each row's dense rank among the column's canonical values (text by code point, numbers by
    value, False before True), missing values last; equal canonical values share a rank."""
    kind = dtype_name(series)
    if isinstance(series.dtype, pd.CategoricalDtype):
        cats = series.cat.categories
        labels = (
            pd.Series(cats)
            if kind == "str" and isinstance(cats.dtype, pd.StringDtype)  # text already
            else cast(pd.DataFrame({"v": cats}), {"v": kind})["v"]
        )
        ranks = _dense_rank(labels)  # per category; code -1 (missing) takes the extra last rank
        return np.append(ranks, ranks.max(initial=-1) + 1)[series.cat.codes.to_numpy()]
    if kind == "str" and pd.api.types.infer_dtype(series, skipna=True) in ("string", "empty"):
        return _dense_rank(series)  # text already (missing as None, NaN or NA): no cast, no copy
    return _dense_rank(cast(pd.DataFrame({"v": series}), {"v": kind})["v"])


def _dense_rank(values: pd.Series) -> np.ndarray:
    """Ranks of a canonical column: its values hashed once (`pd.factorize`), then only the
    distinct ones sorted; missing (None, NaN, NA) ranks after every value."""
    if isinstance(values.dtype, pd.StringDtype):  # pandas' text: sorted by its own (Arrow) sort,
        codes, uniques = values.factorize()  # UTF-8 bytes in code point order, not str by str
        rank_of = np.empty(len(uniques), dtype=np.int64)
        rank_of[uniques.argsort()] = np.arange(len(uniques))  # distinct values: a permutation
        return np.append(rank_of, len(uniques))[codes]
    if isinstance(values.dtype, pd.BooleanDtype):
        values = values.to_numpy(dtype=np.float64, na_value=np.nan)  # False < True, NA missing
    codes, uniques = pd.factorize(np.asarray(values))
    rank_of = np.unique(uniques, return_inverse=True)[1].reshape(-1).astype(np.int64)
    return np.append(rank_of, rank_of.max(initial=-1) + 1)[codes]


def mixed_radix(ranks) -> np.ndarray:
    """One int64 per row ordering the rows as the rank columns do lexicographically (first most
    significant): one argsort of it is much faster than a lexsort of many columns. The columns
    are folded in one at a time (an iterable: only the key and one column are held at once, not
    every column's ranks). Before the radix product could overflow, the key so far is replaced by
    its dense rank (order kept)."""
    key, size = None, 1
    for rank in ranks:
        radix = int(rank.max()) + 1 if len(rank) else 1
        if key is None:
            key, size = np.array(rank, dtype=np.int64), radix
            continue
        if size * radix >= 2**62:
            key = np.unique(key, return_inverse=True)[1].reshape(-1).astype(np.int64)
            size = int(key.max()) + 1 if len(key) else 1
        key *= radix
        key += rank
        size *= radix
    return key if key is not None else np.zeros(0, dtype=np.int64)


def compact(frame: pd.DataFrame) -> pd.DataFrame:
    """A canonical frame held for later counts and sorts: text columns as categoricals (one
    label per distinct value: grouping and sorting compare codes, not strings)."""
    return frame.assign(
        **{
            c: frame[c].astype("category")
            for c in frame.columns
            if frame[c].dtype == object and dtype_name(frame[c]) == "str"
        }
    )


def tag_output(
    out: pd.DataFrame, key: tuple, by: list[str], schema: dict[str, str], in_schema: dict[str, str]
) -> pd.DataFrame:
    """A unit's output in `schema`, with hidden key and sequence columns for the final ordering."""
    if not isinstance(out, pd.DataFrame):
        raise TypeError(f"a unit of work must return a pandas DataFrame, not {type(out).__name__}")
    out = cast(out, schema)
    n = len(out)
    for name, col, value in zip(key_columns(len(by)), by, key):
        out[name] = constant(value, in_schema[col], n)
    out[SEQ] = np.arange(n, dtype=np.int64)
    return out


def constant(value, kind: str, n: int) -> np.ndarray:
    """n copies of one key value in the canonical type `kind` (missing: None, or NaN for floats)."""
    if kind == "str":
        out = np.empty(n, dtype=object)
        out[:] = None if value is None else str(value)
        return out
    if kind == "float64":
        return np.full(n, np.nan if value is None else float(value), dtype=np.float64)
    return np.full(n, value, dtype=np.dtype(kind))


def untag(frames_or_frame, by: list[str], schema: dict[str, str]) -> pd.DataFrame:
    """Combine tagged unit outputs in key order (missing keys last), then sequence; drop tags."""
    frame = (
        frames_or_frame
        if isinstance(frames_or_frame, pd.DataFrame)
        else (pd.concat(frames_or_frame, ignore_index=True) if frames_or_frame else None)
    )
    if frame is None or frame.empty:
        return cast(pd.DataFrame({c: [] for c in schema}), schema)
    frame = frame.sort_values([*key_columns(len(by)), SEQ], kind="mergesort", na_position="last")
    return cast(frame, schema)


def group_key(key, n: int) -> tuple:
    """A group key as a tuple of plain Python values (pandas gives scalars for one column)."""
    key = key if isinstance(key, tuple) else (key,)
    if len(key) != n:
        raise ValueError(f"expected a key of {n} value(s), got {key!r}")
    return tuple(_plain(k) for k in key)


def _plain(value):
    """One key value as plain Python; every kind of missing (NaN, NA, None) becomes None."""
    if value is None or (not isinstance(value, (str, bytes)) and pd.isna(value)):
        return None
    return value.item() if isinstance(value, np.generic) else value
