"""The release's tables as the input's codes: each geography and variable column with the input's
categories (jointly solved tables share the union of theirs)."""
from __future__ import annotations




def _categories(spec, table, names) -> dict:
    """The input's categorical dtypes per column, so the release's codes compare exactly."""
    import pandas as pd

    from dpspec.api import EngineTable

    out = {}
    for col in [*spec.domain.geography.levels, *names]:
        dtype = table.dtype(col) if isinstance(table, EngineTable) else table[col].dtype if col in table.columns else None
        if isinstance(dtype, pd.CategoricalDtype):
            out[col] = dtype
    return out


def _geography_categories(spec, tables) -> dict:
    """Jointly solved tables share one geography: a unit of either may hold records of both in
    the release, so each geography column's categories are the union of the tables' (if any)."""
    import pandas as pd

    out = {}
    for col in spec.domain.geography.levels:
        found = [_categories(spec, t, [])[col] for t in tables if col in _categories(spec, t, [])]
        if found:
            values = pd.Index([])
            for dtype in found:
                values = values.union(pd.Index(dtype.categories))
            out[col] = pd.CategoricalDtype(values)
    return out
