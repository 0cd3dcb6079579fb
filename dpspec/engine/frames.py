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
    if pd.api.types.is_bool_dtype(dtype):
        return "bool"
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
        if isinstance(col.dtype, pd.CategoricalDtype):
            col = col.astype(col.cat.categories.dtype)
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
    labels = np.array([str(c) for c in col.cat.categories] + [None], dtype=object)
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


def lexical(frame: pd.DataFrame) -> pd.DataFrame:
    """`frame` with each categorical's categories in the order of their canonical values (text
    by code point, numbers by value), so that sorting by the codes (fast: no strings compared)
    gives `sort_rows`' order of the canonical frame."""
    out = {}
    for name in frame.columns:
        col = frame[name]
        if isinstance(col.dtype, pd.CategoricalDtype) and len(col.cat.categories) > 1:
            cats = col.cat.categories
            key = [str(c) for c in cats] if dtype_name(col) == "str" else list(cats)
            order = sorted(range(len(cats)), key=key.__getitem__)
            col = col.cat.reorder_categories(cats[order])
        out[name] = col
    return pd.DataFrame(out, index=frame.index) if out else frame


def compact(frame: pd.DataFrame) -> pd.DataFrame:
    """A canonical frame held for later counts and sorts: text columns as categoricals (one
    label per distinct value: grouping and sorting compare codes, not strings)."""
    return frame.assign(**{c: frame[c].astype("category") for c in frame.columns
                           if frame[c].dtype == object and dtype_name(frame[c]) == "str"})


def tag_output(out: pd.DataFrame, key: tuple, by: list[str], schema: dict[str, str], in_schema: dict[str, str]) -> pd.DataFrame:
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
    frame = frames_or_frame if isinstance(frames_or_frame, pd.DataFrame) else (
        pd.concat(frames_or_frame, ignore_index=True) if frames_or_frame else None)
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
