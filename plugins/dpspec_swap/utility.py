"""How much a release distorts the tables analysts use (reported beside the budget).

Swapping keeps its invariant tables exact and distorts the others; these helpers measure the
distortion of any count table so the report can show what the budget bought.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from dpspec_swap.algorithm import check_columns


def count_table(df: pd.DataFrame, by) -> pd.Series:
    """Number of records in each observed combination of ``by`` (a Series indexed by it).

    Missing values form their own cells, as they do in the invariants. With no columns the
    table is the single total.
    """
    by = list(by)
    check_columns(df, by)
    if not by:
        return pd.Series([len(df)], index=pd.Index(["total"]), name="count", dtype=np.int64)
    counts = df.groupby(by, observed=True, dropna=False, sort=True).size()
    return counts.rename("count").astype(np.int64)


def mape(confidential: pd.Series, released: pd.Series) -> float:
    """Mean absolute percentage error (in percent) over the cells with a nonzero true count.

    The two tables are aligned on their index; a cell missing from one side counts as 0 there,
    because count tables omit empty cells. Cells whose true count is 0 are left out (their
    percentage error is undefined). NaN when no cell has a nonzero true count.
    """
    truth, released = confidential.align(released, join="outer", fill_value=0)
    truth = truth.to_numpy(dtype=float)
    released = released.to_numpy(dtype=float)
    nonzero = truth != 0
    if not nonzero.any():
        return float("nan")
    rel = np.abs(released[nonzero] - truth[nonzero]) / np.abs(truth[nonzero])
    return float(100.0 * rel.mean())
