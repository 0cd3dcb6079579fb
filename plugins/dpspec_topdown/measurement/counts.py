"""What TopDown reads of a table: its rows counted per combination of columns, by the engine that
holds it (on Spark the records never reach this process, only these counts) or by pandas."""

from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd

from .histogram import Schema


def person_counts(
    persons, levels: Sequence[str], schema: Schema, engine=None, flags: Sequence[str] = ()
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """What TopDown needs of the person table, as counts: (geography, cells).

    geography: the distinct combinations of the geography columns (one row per finest unit when
    the geography is a tree); cells: persons per (finest unit, histogram variables), as
    `count`; ``flags`` are further columns counted with the geography (the AIAN flag of the
    spine). With an engine the engine counts (on Spark the person table never reaches this
    process: only these counts do); without one, pandas counts the frame. Columns the table
    lacks are left out, for the hierarchy and the schema to report.
    """
    present = set(persons.columns)
    geo = [c for c in levels if c in present]
    finest = geo[-1:] if geo else []
    by_cell = finest + [v for v in schema.names if v in present]
    return table_counts(persons, geo + [f for f in flags if f in present], engine), table_counts(
        persons, by_cell, engine
    )


def table_counts(table, by, engine=None) -> pd.DataFrame:
    """Rows of a table per combination of `by`, as `count`: counted by the engine when there is
    one (it may hold the table), else by pandas."""
    if engine is not None:
        return engine.count(table, by)
    if not by:
        return pd.DataFrame({"count": [len(table)]}, dtype=np.int64)
    return table.groupby(list(by), observed=True, dropna=False, sort=True).size().rename("count").reset_index()
