"""The embedded engine: units of work run in this process (or a process pool), on pandas frames."""

from __future__ import annotations

import multiprocessing
from concurrent.futures import ProcessPoolExecutor, as_completed

import numpy as np
import pandas as pd

from dpspec import progress
from dpspec.engine import frames
from dpspec.engine.base import Engine, handle, run_item, run_unit, STREAM_CHUNK_ROWS
from dpspec.check.sources import parquet_dataset
from dpspec.errors import DataError
from dpspec.engine.casting import cast_column
from dpspec.engine.lookup import lookup_frame, counts_differ_frames


def run_units(func, run_key, stage, units, by, in_schema, out_schema) -> list:
    """A batch of units, for one pool task (module level, so a worker process can import it)."""
    return [run_unit(func, run_key, stage, key, rows, by, in_schema, out_schema) for key, rows in units]


class LocalEngine(Engine):
    name = "local"

    def __init__(self, processes: int | None = None):
        """processes: run units in a pool of this many worker processes (the unit function must
        then be picklable: a module-level function or a functools.partial of one)."""
        self.processes = processes if processes and processes > 1 else None

    def read_parquet(self, path: str, columns=None) -> pd.DataFrame:
        """Text as categoricals (a label per distinct code, not a string per row); partition
        columns as text, as written in the directory names (state=01 stays "01", as on Spark)."""
        try:
            dataset = parquet_dataset(path)
            table = dataset.to_table(columns=list(columns) if columns is not None else None)
        except FileNotFoundError:
            raise DataError(f"{path}: no such Parquet file or directory") from None
        except (OSError, ValueError) as exc:  # pyarrow's ArrowInvalid is a ValueError
            raise DataError(f"{path}: cannot read as Parquet: {exc}") from None
        return table.to_pandas(strings_to_categorical=True)

    def parquet_columns(self, path: str) -> list[str]:
        try:
            return list(parquet_dataset(path).schema.names)
        except FileNotFoundError:
            raise DataError(f"{path}: no such Parquet file or directory") from None
        except (OSError, ValueError) as exc:
            raise DataError(f"{path}: cannot read as Parquet: {exc}") from None

    def cast(self, table, kinds) -> pd.DataFrame:

        return table.assign(**{name: cast_column(table[name], kind) for name, kind in kinds.items()})

    def to_pandas(self, table) -> pd.DataFrame:
        return frames.sort_rows(frames.canonical(handle(table)))

    def map_groups(
        self, table, by, func, *, run_key, stage, schema=None, collect=True, columns=None, ordered=True
    ) -> pd.DataFrame:
        """collect=False changes nothing here: this process is where the outputs live anyway."""
        by = list(by)
        if columns is not None:
            table = handle(table)[list(dict.fromkeys([*by, *columns]))]
        if not ordered:
            return frames.compact(self._map_unordered(table, by, func, run_key, stage, schema))
        out = self._map_groups(table, by, func, run_key, stage, schema)
        return out if collect else frames.compact(out)

    def _map_unordered(self, table, by, func, run_key, stage, schema) -> pd.DataFrame:
        """Units over the rows as stored: no sort, each group only cast to canonical types."""
        raw = handle(table)
        in_schema = frames.schema_of(raw)
        out_schema = dict(schema) if schema is not None else in_schema
        groups = raw.groupby(by, sort=False, dropna=False, observed=True) if by else [((), raw)]
        total = groups.ngroups if by else 1
        parts = []
        for done, (key, rows) in enumerate(groups, start=1):
            rows = frames.cast(rows, in_schema)
            parts.append(run_unit(func, run_key, stage, key, rows, by, in_schema, out_schema, canonical=True))
            progress.report(stage, done, total)
        return frames.cast(pd.concat(parts, ignore_index=True), out_schema)

    def _map_groups(self, table, by, func, run_key, stage, schema) -> pd.DataFrame:
        raw = handle(table)
        if not by:
            frame = frames.canonical(raw)
            in_schema = frames.schema_of(frame)
            out_schema = dict(schema) if schema is not None else in_schema
            parts = [run_unit(func, run_key, stage, (), frame, by, in_schema, out_schema)]
            return frames.untag(parts, by, out_schema)
        # One sort of the whole table by the keys, then every column: each group's rows come out
        # in the canonical order a unit must see (`frames.sort_rows`), with no per-unit sort.
        # Ordered on the stored codes (`frames.canonical_order`), then decoded.
        frame = frames.canonical(raw.take(frames.canonical_order(raw, [*by, *(c for c in raw.columns if c not in by)])))
        in_schema = frames.schema_of(frame)
        out_schema = dict(schema) if schema is not None else in_schema
        groups = frame.groupby(by, sort=True, dropna=False, observed=True)
        if self.processes and groups.ngroups > 1:
            return frames.untag(
                self._in_pool(func, run_key, stage, list(groups), by, in_schema, out_schema), by, out_schema
            )
        total, parts, rows = groups.ngroups, [], None
        for done, (key, rows) in enumerate(groups, start=1):
            parts.append(run_unit(func, run_key, stage, key, rows, by, in_schema, out_schema, canonical=True))
            progress.report(stage, done, total)
        del groups, frame, rows  # the decoded input: not held while the outputs are combined
        # groupby(sort=True, dropna=False) visits the keys in `frames.untag`'s order (missing last)
        return frames.cast(pd.concat(parts, ignore_index=True), out_schema)

    def _in_pool(self, func, run_key, stage, units, by, in_schema, out_schema) -> list:
        """Units in batches of similar row counts over a pool; each batch's result as it ends."""
        batches, batch, rows_in_batch = [], [], 0
        target = max(1, sum(len(rows) for _, rows in units) // (4 * self.processes))
        for unit in units:
            batch.append(unit)
            rows_in_batch += len(unit[1])
            if rows_in_batch >= target:
                batches.append(batch)
                batch, rows_in_batch = [], 0
        if batch:
            batches.append(batch)
        parts, done = [], 0
        # forkserver: a worker never inherits the driver's threads (or a JVM gateway) mid-state
        with ProcessPoolExecutor(self.processes, mp_context=multiprocessing.get_context("forkserver")) as pool:
            futures = [pool.submit(run_units, func, run_key, stage, b, by, in_schema, out_schema) for b in batches]
            for future in as_completed(futures):
                parts.extend(future.result())
                done += 1
                progress.report(stage, done, len(batches))
        return parts

    def count(self, table, by) -> pd.DataFrame:
        return count_frame(handle(table), by)

    def total(self, table, by, column="count", *, stage="total", collect=True):
        frame = handle(table)
        by = list(by)
        if not by:
            return frames.cast(pd.DataFrame({column: [frame[column].sum()]}), {column: "int64"})
        summed = frame.groupby(by, sort=False, dropna=False, observed=True)[column].sum().reset_index()
        summed = sums_in_order(summed, by, column, {**frames.schema_of(summed[by]), column: "int64"})
        return summed if collect else frames.compact(summed)

    def count_distinct(self, table, by, columns) -> pd.DataFrame:
        return count_distinct_frame(handle(table), by, columns)

    def profile(self, table, column: str) -> dict:
        return profile_series(handle(table)[column])

    def clipped_totals(self, table, by, clips) -> pd.DataFrame:
        frame = handle(table)
        by = list(by)
        work = {c: frame[c] for c in by}
        work["count"] = np.ones(len(frame), dtype=np.int64)
        named = {"count": "sum"}
        for i, (column, low, high) in enumerate(clips):
            raw = frame[column].to_numpy(dtype=np.int64)
            clipped = np.clip(raw, low, high)
            work.update(
                {f"sum{i}": clipped, f"clipped{i}": (clipped != raw).astype(np.int64), f"min{i}": raw, f"max{i}": raw}
            )
            named.update({f"sum{i}": "sum", f"clipped{i}": "sum", f"min{i}": "min", f"max{i}": "max"})
        work = pd.DataFrame(work)
        if not by:
            out = (
                pd.DataFrame({k: [getattr(work[k], how)()] for k, how in named.items()})
                if len(work)
                else pd.DataFrame({k: [] for k in named})
            )
        else:
            out = work.groupby(by, sort=True, dropna=False, observed=True).agg(named).reset_index()
        return frames.cast(out, {**frames.schema_of(out[by]), **{k: "int64" for k in named}})

    def bucket_counts(self, table, by, column, low, step, high) -> pd.DataFrame:
        frame = handle(table)
        by = list(by)
        clipped = np.clip(frame[column].to_numpy(dtype=np.int64), low, high)
        work = pd.DataFrame({**{c: frame[c] for c in by}, "bucket": -((low - clipped) // step)})
        out = work.groupby([*by, "bucket"], sort=True, dropna=False, observed=True).size().rename("count").reset_index()
        return frames.cast(out, {**frames.schema_of(out[by]), "bucket": "int64", "count": "int64"})

    def stream(self, table, order_by=None, columns=None, chunk_rows=None):
        """The frame sorted once, then handed out in slices of `chunk_rows` in canonical types."""

        frame = handle(table)
        frame = frame[list(columns)] if columns is not None else frame
        frame = frame.take(frames.canonical_order(frame, order_by))  # ordered on codes, decoded per chunk
        schema = frames.schema_of(frame)  # the table's kinds, not a chunk's (a chunk may miss no value)
        size = max(1, int(chunk_rows or STREAM_CHUNK_ROWS))
        for start in range(0, len(frame), size):
            yield frames.canonical(frame.iloc[start : start + size], schema)

    def lookup(self, table, key, parent, take, compare=None, *, stage="lookup", show=5):
        """Joined in this process (`lookup.lookup_frame`): the tables live here anyway."""

        return lookup_frame(handle(table), key, handle(parent), dict(take), dict(compare or {}), show)

    def counts_differ(self, table, other, by) -> int:

        return counts_differ_frames(count_frame(handle(table), by), count_frame(handle(other), by), by)

    def map_items(self, items, func, *, run_key, stage, per_item=False) -> list:  # items run one by one anyway
        out = []
        for done, (key, payload) in enumerate(items, start=1):
            out.append(run_item(func, run_key, stage, key, payload))
            progress.report(stage, done, len(items))
        return out


def count_frame(table: pd.DataFrame, by) -> pd.DataFrame:
    """`Engine.count` of a pandas frame, in this process (any engine counts a driver's frame so)."""
    by = list(by)
    if not by:
        return pd.DataFrame({"count": [len(table)]}, dtype="int64")
    frame = table[by]
    # Grouped as stored (categoricals by their codes: fast at millions of rows), then the
    # resulting rows cast to canonical types; values equal only once cast are merged.
    counts = frame.groupby(by, sort=False, dropna=False, observed=True).size().rename("count").reset_index()
    return sums_in_order(counts, by, "count", {**frames.schema_of(frame), "count": "int64"})


def sums_in_order(sums: pd.DataFrame, by: list[str], column: str, schema: dict[str, str]) -> pd.DataFrame:
    """Per-group sums of a frame grouped as stored, as one row per canonical combination of `by`,
    in `frames.sort_rows` order: ordered on the stored codes (`frames.order_key`: no text compared
    row by row), then cast; groups equal only once cast (categories 1 and "1") are added up."""
    key = frames.order_key(sums, by)
    order = np.argsort(key, kind="stable")
    first = np.flatnonzero(np.diff(key[order], prepend=-1))  # one row per distinct canonical key
    out = frames.cast(sums.iloc[order[first]], schema)
    if len(first) < len(sums):
        out[column] = np.add.reduceat(sums[column].to_numpy(dtype=out[column].dtype)[order], first)
    return out


def profile_series(series: pd.Series) -> dict:
    """`Engine.profile` of one pandas column (a categorical's text is searched per category)."""
    sizes = series.value_counts(dropna=False, sort=False)
    missing = int(series.isna().sum())
    if isinstance(series.dtype, pd.CategoricalDtype):
        labels = pd.Series(series.cat.categories)
        bad = np.flatnonzero(labels.astype(str).str.contains("\x00", regex=False).to_numpy()) if len(labels) else []
        nul = int(np.isin(series.cat.codes.to_numpy(), bad).sum()) if len(bad) else 0
    elif pd.api.types.is_string_dtype(series.dtype) or series.dtype == object:
        nul = int(series.astype(str).str.contains("\x00", regex=False).sum()) if len(series) else 0
    else:
        nul = 0
    return {
        "rows": int(len(series)),
        "distinct": int(len(sizes[sizes > 0])),
        "missing": missing,
        "nul": nul,
        "largest": int(sizes.max()) if len(sizes) else 0,
    }


def count_distinct_frame(table: pd.DataFrame, by, columns) -> pd.DataFrame:
    """`Engine.count_distinct` of a pandas frame, in this process."""
    by, columns = list(by), list(columns)
    if not by:
        return pd.DataFrame(
            {"count": [len(table)], **{c: [table[c].nunique(dropna=False)] for c in columns}}, dtype="int64"
        )
    grouped = table[by + columns].groupby(by, sort=False, dropna=False, observed=True)
    out = grouped[columns].nunique(dropna=False) if columns else pd.DataFrame(index=grouped.size().index)
    out.insert(0, "count", grouped.size())
    schema = {**frames.schema_of(table[by]), "count": "int64", **{c: "int64" for c in columns}}
    return frames.sort_rows(frames.cast(out.reset_index(), schema), by)
