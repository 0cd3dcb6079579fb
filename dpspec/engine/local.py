"""The embedded engine: units of work run in this process, in key order, on pandas frames."""
from __future__ import annotations

import pandas as pd

from dpspec import progress
from dpspec.engine import frames
from dpspec.engine.base import Engine, run_unit
from dpspec.errors import DataError


class LocalEngine(Engine):
    name = "local"

    def read_parquet(self, path: str, columns=None) -> pd.DataFrame:
        import pyarrow.dataset as ds

        try:
            dataset = ds.dataset(path, format="parquet", partitioning="hive")
            table = dataset.to_table(columns=list(columns) if columns is not None else None)
        except FileNotFoundError:
            raise DataError(f"{path}: no such Parquet file or directory") from None
        except (OSError, ValueError) as exc:  # pyarrow's ArrowInvalid is a ValueError
            raise DataError(f"{path}: cannot read as Parquet: {exc}") from None
        return table.to_pandas()

    def to_pandas(self, table) -> pd.DataFrame:
        return frames.sort_rows(frames.canonical(table))

    def map_groups(self, table, by, func, *, run_key, stage, schema=None) -> pd.DataFrame:
        by = list(by)
        frame = frames.canonical(table)
        in_schema = frames.schema_of(frame)
        out_schema = dict(schema) if schema is not None else in_schema
        if not by:
            parts = [run_unit(func, run_key, stage, (), frame, by, in_schema, out_schema)]
            return frames.untag(parts, by, out_schema)
        groups = frame.groupby(by, sort=True, dropna=False, observed=True)
        total = groups.ngroups
        parts = []
        for done, (key, rows) in enumerate(groups, start=1):
            parts.append(run_unit(func, run_key, stage, key, rows, by, in_schema, out_schema))
            progress.report(stage, done, total)
        return frames.untag(parts, by, out_schema)

    def count(self, table, by) -> pd.DataFrame:
        by = list(by)
        frame = frames.canonical(table[by] if by else table)
        if not by:
            return pd.DataFrame({"count": [len(frame)]}, dtype="int64")
        counts = frame.groupby(by, sort=True, dropna=False, observed=True).size().rename("count").reset_index()
        schema = {**frames.schema_of(frame), "count": "int64"}
        return frames.sort_rows(frames.cast(counts, schema), by)
