"""The execution contract: what a mechanism may ask of an engine.

A mechanism splits its heavy work into units (a swapping stratum, a TopDown node, a SafeTab
cell), each a group of rows sharing a key, and asks the engine to map a function over them and
to aggregate counts. The engine decides where the units run (this process, a process pool, a
Spark cluster); the keyed random streams (`streams.unit_rng`) and canonical frames
(`frames`) make the result the same wherever they run.
"""

from __future__ import annotations

from typing import Callable, Iterable, Iterator

import pandas as pd

from dpspec.engine import frames, streams
from dpspec.errors import MechanismError
from dpspec.engine.table import EngineTable

# func(key, rows, rng) -> output rows, where key is a tuple of plain Python values.
UnitFunction = Callable[[tuple, pd.DataFrame, "object"], pd.DataFrame]
# func(key, payload, rng) -> a picklable result: a unit whose input is not rows of a table (a
# TopDown node's histograms), built by the driver.
ItemFunction = Callable[[tuple, object, "object"], object]


STREAM_CHUNK_ROWS = 500_000  # rows an engine moves to the driver at once in `stream`


class EngineUnavailable(Exception):
    """The requested engine cannot start here (not installed, no Java, master unreachable).

    Not a `DpspecError`: the command line reports it as a usage problem (exit 2), since the fix
    is in how dpspec was installed or invoked, not in the spec or the data.
    """


class UnitFailed(MechanismError):
    """A unit of work raised; the message names the stage and the unit's key."""


def unit_failure(stage: str, key: tuple, exc: BaseException) -> str:
    return f"{stage}: the unit of work {key!r} failed: {type(exc).__name__}: {exc}"


class Engine:
    """Base class of execution engines. Tables are pandas frames or the engine's own handles."""

    name = "?"

    def read_parquet(self, path: str, columns: Iterable[str] | None = None):
        """A table from a Parquet file or a (hive-)partitioned directory of Parquet files."""
        raise NotImplementedError

    def to_pandas(self, table) -> pd.DataFrame:
        """A table as one canonical pandas frame on the driver (rows sorted by all columns)."""
        raise NotImplementedError

    def parquet_columns(self, path: str) -> list[str]:
        """The column names of a Parquet source (partition columns included), reading no rows."""
        raise NotImplementedError

    def cast(self, table, kinds: dict[str, str]):
        """The table with the named columns converted to canonical kinds (frames.DTYPES).

        Used once a table's values were validated: whole numbers to int64, codes to text,
        true/false words to bool; other columns are kept. A table of the engine's own kind.
        """
        raise NotImplementedError

    def map_groups(
        self,
        table,
        by,
        func: UnitFunction,
        *,
        run_key: int,
        stage: str,
        schema: dict[str, str] | None = None,
        collect: bool = True,
        columns=None,
        ordered: bool = True,
    ) -> pd.DataFrame:
        """Run `func(key, rows, rng)` on every group of rows sharing the values of `by`.

        rows: the group's rows in canonical types and order (every column, keys included);
        rng: the unit's own ChaCha20 generator, keyed by (run key, stage, key).
        schema: column -> one of frames.DTYPES for the output (default: the input's).
        Returns every unit's output, in key order, each unit's rows in the order it returned.
        collect=False: the outputs stay where they were computed, as a table of the engine's own
        (a pandas frame locally, a cached Spark DataFrame on Spark) in no promised row order,
        for `count`, `stream` and `drop`: what a mechanism whose output is as large as its input
        (swapped microdata) returns without the driver ever holding it. Every unit has run (and
        a failed one raised, naming its key) when this returns.
        columns: the columns the units read (default every column; the keys always come along).
        ordered=False (only with collect=False): a unit may see its rows in any order, for a unit
        whose result depends on their multiset only (a sum); spares the engine sorting them.
        """
        raise NotImplementedError

    def stream(self, table, order_by=None, columns=None, chunk_rows: int | None = None) -> Iterator[pd.DataFrame]:
        """A table to the driver one chunk at a time, rows sorted by `order_by` (default: every
        returned column, in order; missing values last), in canonical types.

        columns: the columns to return (default all). chunk_rows: about how many rows the
        engine moves to the driver at once (default `STREAM_CHUNK_ROWS`), so the driver holds
        one chunk, not the table. Rows equal in every sorted column are interchangeable, so
        sorting by every column gives the same chunks' bytes on every engine and partitioning.
        """
        raise NotImplementedError

    def drop(self, table) -> None:
        """Forget a table `map_groups(collect=False)` returned (a Spark cache); a no-op by default."""

    def count(self, table, by) -> pd.DataFrame:
        """The number of rows for each observed combination of `by`, sorted, as `count`."""
        raise NotImplementedError

    def count_groups(self, table, groups) -> list[pd.DataFrame]:
        """`count(table, by)` for each `by` of `groups`, in their order: what a loader needs to
        check every column of a table. An engine may compute them in one pass over the table
        (Spark does, by grouping sets); by default, one `count` each."""
        return [self.count(table, by) for by in groups]

    def total(self, table, by, column: str = "count", *, stage: str = "total", collect: bool = True):
        """Per observed combination of `by`: the sum of the whole-number `column` over its rows.

        What a map-then-sum needs: units emit partial counts keyed by what they count (a
        geography unit and group), and the engine adds them up where they live. collect=True: a
        pandas frame on the driver, sorted by `by`; collect=False: a table of the engine's own,
        in no promised order, for `map_groups`, `count`, `stream` and `drop` (its rows are as
        many as the distinct keys, which may be far too many for the driver).
        """
        raise NotImplementedError

    def clipped_totals(self, table, by, clips) -> pd.DataFrame:
        """Per observed combination of `by` (sorted): `count`, its rows, and for each clip i
        (column, low, high) of `clips`: `sum{i}` of the column clipped to [low, high], `clipped{i}`
        how many of its values lay outside, `min{i}` and `max{i}` of the raw values. What a table
        of clipped sums and means needs, computed where the table lives, one row per group."""
        raise NotImplementedError

    def bucket_counts(self, table, by, column: str, low: int, step: int, high: int) -> pd.DataFrame:
        """Per observed combination of `by` and bucket (sorted): `count`, the rows whose value,
        clipped to [low, high], has bucket ceil((value - low) / step): how many values are at most
        each point of the grid low, low + step, ... (a quantile's ranks, by a cumulative sum)."""
        raise NotImplementedError

    def profile(self, table, column: str) -> dict:
        """One column summed up in one row, whatever its number of distinct values: `rows`,
        `distinct` (a missing value counts as one), `missing`, `nul` (text values holding a NUL
        byte) and `largest` (the rows of its most frequent value). Lets a loader check a column of
        millions of codes (a household id) without bringing them to the driver."""
        raise NotImplementedError

    def count_distinct(self, table, by, columns) -> pd.DataFrame:
        """Per observed combination of `by` (sorted): `count`, its rows, and for each of
        `columns` the number of distinct values it takes there (a missing value counts as one).
        One row per group, however many rows it holds: e.g. whether a stratum holds two
        different records, without the records."""
        raise NotImplementedError

    # ---- a keyed lookup: children take their parent's values (carrying swaps) ----

    def lookup(
        self, table, key: str, parent, take: dict, compare: dict | None = None, *, stage: str = "lookup", show: int = 5
    ):
        """`table` (children: persons) with each column of `take` (child column -> parent
        column) given the value of the parent row whose `key` equals the child's `key` (a left
        join on a key unique among the parents; a parent value is cast to the child column's
        kind), kept where it was computed as `map_groups(collect=False)` keeps its outputs.

        compare: child column -> parent column it must equal before anything is taken (two
        missing values are equal). Returns (table or None, `lookup.LookupChecks`): the parent
        keys held by more than one parent row (then no join is made), the child rows whose key
        names no parent, the child rows that disagree with `compare`, each with its first
        `show` values (canonical order) and row counts; aggregates only reach the driver. The
        table is None unless every check passed.
        """
        raise NotImplementedError

    def counts_differ(self, table, other, by) -> int:
        """The number of cells of the count by `by` (values compared as text, a missing value
        as one more value) in which two tables differ: 0 when every combination has as many
        rows in both. Computed where the tables live, so checking that a release kept an
        invariant by a household id brings one number to the driver, not a row per household."""
        raise NotImplementedError

    def map_items(self, items, func: ItemFunction, *, run_key: int, stage: str, per_item: bool = False) -> list:
        """Run `func(key, payload, rng)` on every (key, payload) of `items`; results in their order.

        For units whose input the driver builds (payloads must pickle: numpy arrays, attrs
        classes); rng is the unit's own stream, keyed by (run key, stage, key) as in map_groups.
        per_item: each item a task of its own (heavy items, such as a sweep's runs: the engine
        balances them and its progress counts them), instead of batches of the engine's
        parallelism.
        """
        raise NotImplementedError

    def close(self) -> None:
        """Release resources the engine started (a Spark session it created)."""


def unit_stream(run_key: int, stage: str, key: tuple, position: int = 0):
    """The generator of one unit: the stage name is part of the key, so two maps never share."""
    return streams.unit_rng(run_key, (stage, key), position)


def keyed_rng(run_key: int, stage: str, key, position: int = 0):
    """`EngineRun.rng` from the run key alone: a unit of work that runs elsewhere (a Spark
    executor, a pool worker) draws from the same stream as the driver would, from `position`
    (`streams.stream_position`) on."""
    key = key if isinstance(key, tuple) else (key,)
    return unit_stream(run_key, stage, frames.group_key(key, len(key)), position)


def run_unit(
    func: UnitFunction,
    run_key: int,
    stage: str,
    key,
    rows: pd.DataFrame,
    by: list[str],
    in_schema: dict[str, str],
    out_schema: dict[str, str],
    canonical: bool = False,
    ordered: bool = True,
) -> pd.DataFrame:
    """Run one unit in canonical form and tag its output; shared by every engine.

    canonical: the rows are already in canonical types and order, and units run in key order
    (the local engine sorts the whole table once, which is much cheaper than once per unit);
    the output is then only cast, not tagged for a later sort. ordered=False: the rows are cast
    to canonical types but not sorted (`Engine.map_groups`).
    """
    key = frames.group_key(key, len(by))
    if canonical:
        rows = rows.reset_index(drop=True)
    else:
        rows = frames.cast(rows, in_schema)
        rows = frames.sort_rows(rows) if ordered else rows
    try:
        out = func(key, rows, unit_stream(run_key, stage, key))
        if canonical:
            if not isinstance(out, pd.DataFrame):
                raise TypeError(f"a unit of work must return a pandas DataFrame, not {type(out).__name__}")
            return frames.cast(out, out_schema)
        return frames.tag_output(out, key, by, out_schema, in_schema)
    except Exception as exc:
        raise UnitFailed(unit_failure(stage, key, exc)) from exc


def run_item(func: ItemFunction, run_key: int, stage: str, key, payload):
    """Run one driver-built unit with its keyed stream; a failure names the stage and key."""
    key = key if isinstance(key, tuple) else (key,)
    key = frames.group_key(key, len(key))
    try:
        return func(key, payload, unit_stream(run_key, stage, key))
    except Exception as exc:
        raise UnitFailed(unit_failure(stage, key, exc)) from exc


class EngineRun:
    """An engine bound to one run's key: what a mechanism's `run(..., engine=)` receives."""

    def __init__(self, engine: Engine, run_key: int):
        self.engine = engine
        self.run_key = run_key

    @property
    def name(self) -> str:
        return self.engine.name

    def map_groups(
        self,
        table,
        by,
        func: UnitFunction,
        *,
        stage: str,
        schema=None,
        collect: bool = True,
        columns=None,
        ordered: bool = True,
    ):
        """See `Engine.map_groups`; collect=False keeps the outputs on the engine."""
        if not ordered and collect:
            raise ValueError("map_groups(ordered=False) keeps its outputs on the engine: pass collect=False")
        return self.engine.map_groups(
            handle(table),
            list(by),
            func,
            run_key=self.run_key,
            stage=stage,
            schema=schema,
            collect=collect,
            columns=columns,
            ordered=ordered,
        )

    def stream(self, table, order_by=None, columns=None, chunk_rows: int | None = None) -> Iterator[pd.DataFrame]:
        return self.engine.stream(handle(table), order_by, columns, chunk_rows)

    def drop(self, table) -> None:
        self.engine.drop(handle(table))

    def count(self, table, by) -> pd.DataFrame:
        return self.engine.count(handle(table), list(by))

    def count_groups(self, table, groups) -> list[pd.DataFrame]:
        """See `Engine.count_groups`: `count` by each of several groups, in one pass where the engine can."""
        return self.engine.count_groups(handle(table), [list(by) for by in groups])

    def total(self, table, by, column: str = "count", *, stage: str = "total", collect: bool = True):
        """See `Engine.total`: sums of `column` per combination of `by`."""
        return self.engine.total(handle(table), list(by), column, stage=stage, collect=collect)

    def count_distinct(self, table, by, columns) -> pd.DataFrame:
        return self.engine.count_distinct(handle(table), list(by), list(columns))

    def clipped_totals(self, table, by, clips) -> pd.DataFrame:
        """See `Engine.clipped_totals`: counts and clipped sums per combination of `by`."""
        return self.engine.clipped_totals(handle(table), list(by), [tuple(c) for c in clips])

    def bucket_counts(self, table, by, column: str, low: int, step: int, high: int) -> pd.DataFrame:
        """See `Engine.bucket_counts`: rows per combination of `by` and grid bucket."""
        return self.engine.bucket_counts(handle(table), list(by), column, int(low), int(step), int(high))

    def map_items(self, items, func: ItemFunction, *, stage: str, per_item: bool = False) -> list:
        return self.engine.map_items(list(items), func, run_key=self.run_key, stage=stage, per_item=per_item)

    def lookup(
        self, table, key: str, parent, take: dict, compare: dict | None = None, *, stage: str = "lookup", show: int = 5
    ):
        """See `Engine.lookup`: children take their parent's values where the tables live."""
        return self.engine.lookup(
            handle(table), key, handle(parent), dict(take), dict(compare or {}), stage=stage, show=show
        )

    def read_parquet(self, path: str, columns=None):
        return self.engine.read_parquet(path, columns)

    def to_pandas(self, table) -> pd.DataFrame:
        return self.engine.to_pandas(handle(table))

    def rng(self, stage: str, key) -> object:
        """A unit's generator for work done outside `map_groups` (same stream as inside it)."""
        return keyed_rng(self.run_key, stage, key)


def handle(table):
    """The engine's own table behind an `EngineTable` (a validated engine-side table), else `table`."""

    return table.handle if isinstance(table, EngineTable) else table
