"""The PSA on a table the engine holds: nothing row-level passes through the driver but the release.

Why: a national household table does not fit the driver. When compile hands the mechanism an
`EngineTable` (a Parquet source read by the engine), every step is an engine operation:

- public facts (b, strata, the alternative keys) from per-stratum engine aggregates: records and
  distinct values of each other column, one row per stratum;
- one unit of work per stratum (`map_groups(..., collect=False)`): it gets its stratum's rows
  in canonical order (sorted by every column) and returns them swapped, drawing from the
  stratum's keyed stream exactly as `stratum_sources` does on a pandas frame, plus a hidden
  flag saying which rows received another record's values;
- the release: a `StreamedTable` read from the engine sorted by every column (a function of the
  swapped multiset only, the same bytes on every engine and partitioning), counted where it lives;
- internal figures (swapped records, strata touched, MAPE per released count table) from engine
  counts of the input and the output.
"""

from __future__ import annotations

import functools

import numpy as np
import pandas as pd

from dpspec.api import StreamedTable, ir
from dpspec_swap.algorithm import plain_value, stratum_sources
from dpspec_swap.theorem import as_rate
from dpspec_swap.accuracy import table_error, table_name

SELECTED = "__swap_selected"  # hidden output column: the row received another record's values
BEFORE = "__swap_before_"  # hidden output columns: a swapping column's value before the swap (carrying along)


def engine_stratification(table, key, others) -> dict:
    """`whatif.stratification` of an engine-held table from one engine aggregate: per stratum
    of `key`, its records and the distinct values of every other column (a stratum holds two
    different records exactly when some column takes two values in it). The driver gets one
    row per stratum. Ties for b go to the first key in sorted order (rows have no order here)."""
    key = list(key)
    others = [c for c in dict.fromkeys(others) if c not in key]
    per = table.count_distinct(key, others)
    sizes = per["count"].to_numpy(dtype=np.int64)
    differs = (per[others].to_numpy() >= 2).any(axis=1) if others else np.zeros(len(per), dtype=bool)
    eligible = np.where(differs, sizes, 0)
    b = int(eligible.max(initial=0))
    where = None
    if b:
        first = int(np.flatnonzero(eligible == b)[0])
        where = {c: plain_value(per[c].iloc[first]) for c in key}
    return {
        "match": key,
        "b": b,
        "largest_stratum": where,
        "strata": int(len(per)),
        "strata_of_two_or_more": int((sizes >= 2).sum()),
    }


def alternative_measure(table):
    """`whatif.stratifications`' measure on an engine table: rows with the pandas rows' fields."""

    def measure(key, others) -> dict:
        return {k: v for k, v in engine_stratification(table, key, others).items() if k != "strata"}

    return measure


def swap_stratum_rows(key, rows: pd.DataFrame, rng, rate, swap, before=()) -> pd.DataFrame:
    """One stratum as a unit of work: its rows (canonical order) with the chosen rows' swapping
    columns taken from their derangement targets, and the hidden `SELECTED` flag; `before`:
    swapping columns whose own values are kept too (hidden `BEFORE` columns), for the check
    that carried units agreed with their parent before the swap. The draws never depend on it."""
    chosen, targets = stratum_sources(len(rows), rate, rng)
    out = rows.copy()
    for col in before:
        out[BEFORE + col] = rows[col].to_numpy()
    for col in swap:
        values = rows[col].to_numpy()
        column = values.copy()
        column[chosen] = values[targets]
        out[col] = column
    flag = np.zeros(len(rows), dtype=bool)
    flag[chosen] = True
    out[SELECTED] = flag
    return out


def swap_engine_table(engine, table, match, swap, rate, keep_before=()):
    """Run the PSA on an `EngineTable`; the swapped rows stay on the engine (its own table).
    keep_before: swapping columns whose values before the swap stay beside them (`BEFORE`)."""
    keep_before = list(keep_before)
    schema = {
        **{c: table.kinds[c] for c in table.columns},
        SELECTED: "bool",
        **{BEFORE + c: table.kinds[c] for c in keep_before},
    }
    extra = {"before": keep_before} if keep_before else {}  # a plain unit's call stays as it was
    unit = functools.partial(swap_stratum_rows, rate=as_rate(rate), swap=list(swap), **extra)
    return engine.map_groups(table, list(match), unit, stage="swap", schema=schema, collect=False)


def streamed_release(engine, table, held) -> StreamedTable:
    """The swapped microdata as the release: sorted by every column, in the domain's column
    order, with the column types a compile from pandas gives (codes as categoricals)."""
    columns = list(table.columns)
    dtypes = {c: table.dtype(c) for c in columns}

    def chunks():
        for chunk in engine.stream(held, order_by=columns, columns=columns):
            yield chunk.astype(dtypes)

    return StreamedTable(
        columns,
        table.rows,
        chunks,
        dtypes=dtypes,
        counter=lambda by: engine.count(held, by),
        engine_bound=True,
        release=lambda: engine.drop(held),
        held=held,
    )


def run_figures(engine, held, match) -> dict:
    """Swapped records and strata touched, from two engine counts of the output's flag."""
    flags = engine.count(held, [SELECTED])
    swapped = int(flags.loc[flags[SELECTED].astype(bool), "count"].sum())
    touched = 0
    if swapped:
        by_key = engine.count(held, [*match, SELECTED])
        touched = int(by_key[SELECTED].astype(bool).sum())
    return {"swapped_records": swapped, "strata_touched": touched}


def count_series(counts: pd.DataFrame, by) -> pd.Series:
    """An engine count as `utility.count_table` gives it: a Series of counts indexed by `by`."""
    by = list(by)
    if not by:
        return pd.Series([int(counts["count"].sum())], index=pd.Index(["total"]), name="count", dtype=np.int64)
    index = pd.MultiIndex.from_frame(counts[by]) if len(by) > 1 else pd.Index(counts[by[0]], name=by[0])
    return pd.Series(counts["count"].to_numpy(dtype=np.int64), index=index, name="count")


def table_errors(tables, invariants, counters: dict) -> dict:
    """`accuracy.table_errors` from counts: counters maps a table name to (input counter, output
    counter), each `by -> count frame` computed where the table lives."""

    out = {}
    for q in tables:
        if q.table not in counters:
            continue
        before, after = counters[q.table]
        out[table_name(q)] = table_error(
            q,
            invariants,
            count_series(before(list(q.columns)), q.columns),
            count_series(after(list(q.columns)), q.columns),
        )
    return out


def default_query(table: ir.Table, swap, hold) -> ir.CountQuery:
    return ir.CountQuery(table.name, tuple(list(swap) + list(hold)))
