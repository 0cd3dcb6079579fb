"""Validated columns to their canonical kinds on the local engine (Spark casts in its own plan).

The values were checked beforehand (`dpspec.check.engine_data`), so a cast never has to decide
what a bad value means. Text stays categorical: one label per distinct code, not a string per
row, which is what keeps a few million rows of geocodes small in this process.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

TRUE_WORDS = frozenset({"true", "t", "yes", "y", "1"})


def _values(series: pd.Series, convert) -> pd.Series:
    """convert applied to a categorical's categories only (then expanded), else to every value."""
    if isinstance(series.dtype, pd.CategoricalDtype):
        labels = convert(pd.Series(series.cat.categories))
        codes = series.cat.codes.to_numpy()
        out = labels.to_numpy()[np.where(codes < 0, 0, codes)] if len(labels) else np.zeros(len(series))
        out = pd.Series(out, index=series.index)
        return out.where(codes >= 0, None) if (codes < 0).any() else out
    return convert(series)


def _text(series: pd.Series) -> pd.Series:
    if isinstance(series.dtype, pd.CategoricalDtype):
        categories = series.cat.categories.astype(str)
        if categories.is_unique:
            return series.cat.rename_categories(categories)
        return series.astype(str).where(series.notna(), None).astype("category")
    if series.dtype == object:
        return series.astype("category")
    return series.astype("category").cat.rename_categories(lambda v: str(v))


def _whole(series: pd.Series) -> pd.Series:
    numeric = pd.to_numeric(series, errors="coerce")
    return numeric.astype(np.int64) if not numeric.isna().any() else numeric


def _truth(series: pd.Series) -> pd.Series:
    if pd.api.types.is_bool_dtype(series.dtype):
        return series
    return series.astype(str).str.strip().str.lower().isin(TRUE_WORDS)


def cast_column(series: pd.Series, kind: str) -> pd.Series:
    """One column as `kind`: "str" (categorical text), "int64", "float64", "bool" or "boolean"."""
    if kind == "str":
        return _text(series)
    if kind == "int64":
        return _whole(_values(series, lambda s: pd.to_numeric(s, errors="coerce")))
    if kind == "float64":
        return pd.to_numeric(_values(series, lambda s: pd.to_numeric(s, errors="coerce")), errors="coerce")
    if kind == "bool":
        return _values(series, _truth).astype(bool)
    if kind == "boolean":  # a nullable bool: missing stays missing, never False
        truth = _values(series, _truth).astype(object)
        return truth.where(~series.isna().to_numpy(), None).astype("boolean")
    raise ValueError(f"unknown column kind {kind!r}")
