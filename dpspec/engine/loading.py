"""A spec's Parquet tables read and validated by the engine, never collected on the driver.

`dpspec.check.data.load_table` reads a table into pandas and checks it row by row. For a
national table on Spark that is exactly what must not happen, so here every check is made from
aggregates the engine computes (`Engine.count`): the distinct values of each column with their
row counts, and of each chain of nested columns (state > county > tract) together. The driver
then holds distinct codes and counts, never rows. The same checks as `load_table` (columns
present, table not empty, values in their declared domains, no missing values where none are
allowed, no NUL bytes, geography nesting, link bounds), with the same wording except that a bad
value is shown with how many rows hold it instead of its row numbers (rows have no order on a
cluster). Both engines run this code, so they accept and refuse the same data in the same words.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from dpspec import ir
from dpspec.check import data as checks
from dpspec.check.arrow_types import check_parquet_types
from dpspec.check.keys import materialized
from dpspec.check.sources import is_parquet
from dpspec.engine.base import Engine
from dpspec.engine.table import EngineTable
from dpspec.errors import DataError
from dpspec.language.values import shown as shown_value


def takes_engine_tables(mechanism) -> bool:
    """Whether a mechanism declared it can run on engine-held tables (`Mechanism.engine_tables`)."""
    return bool(getattr(mechanism, "engine_tables", False))


def load_data_on(spec: ir.Spec, engine: Engine, mechanism) -> tuple[dict, dict]:
    """Each declared table and its source's fingerprint, as `check.data.load_data` gives them,
    except that a Parquet source of a mechanism that takes engine tables is an `EngineTable`."""
    engine_side = takes_engine_tables(mechanism)
    tables, hashes, read = {}, {}, {}
    for source in spec.data:
        path = checks.resolve_path(spec, source)
        if engine_side and is_parquet(path, source.format):
            tables[source.table] = load_engine_table(spec, source, engine)
        else:
            tables[source.table] = checks.load_table(spec, source, read)
        hashes[source.path] = checks.fingerprint(spec, source, read)
    return tables, hashes


class _Tally:
    """Problems found in the distinct values of columns, shown with their row counts."""

    def __init__(self, path: str, table: str):
        self.path, self.table = path, table
        self.lines: list[str] = []
        self.rows: np.ndarray = np.zeros(0, dtype=np.int64)  # row count of each distinct value

    def add(self, column: str, what: str, mask: np.ndarray, values: pd.Series):
        bad = np.flatnonzero(mask)
        if not len(bad):
            return
        n = int(self.rows[bad].sum())
        shown = ", ".join(f"{shown_value(values.iloc[i])} ({_rows(self.rows[i])})" for i in bad[: checks.SHOW])
        more = f" (and {len(bad) - checks.SHOW} more distinct values)" if len(bad) > checks.SHOW else ""
        self.lines.append(f"  column '{column}': {n} {what}: {shown}{more}")

    def raise_if_any(self):
        if self.lines:
            head = f"{self.path}: table '{self.table}' does not match the domain (each value with its number of rows):"
            raise DataError("\n".join([head, *self.lines]))


def _rows(n) -> str:
    return f"{int(n)} row" + ("" if n == 1 else "s")


def column_groups(table: ir.Table) -> list[list[str]]:
    """Columns counted together: each chain of nested categories (parent first), every other alone."""
    parent = {c.name: c.type.parent for c in table.columns if c.type.kind == "category" and c.type.parent}
    root = {}
    for name in table.column_names:
        top, seen = name, set()
        while top in parent and parent[top] in table.column_names and top not in seen:
            seen.add(top)
            top = parent[top]
        root[name] = top
    groups: dict[str, list[str]] = {}
    for name in table.column_names:
        groups.setdefault(root[name], []).append(name)
    return list(groups.values())


def kind_of(col: ir.Column) -> str:
    """The canonical kind a validated column is cast to (nullable whole numbers travel as floats,
    nullable bools as pandas' nullable "boolean")."""
    kind = col.type.kind
    if kind == "int":
        return "float64" if col.nullable else "int64"
    if kind == "bool":
        return "boolean" if col.nullable else "bool"
    return "str"


# A unit id column (the column a table links by, such as a household id: an open category, not
# nested) with more distinct codes than this is checked from its `Engine.profile` (one row)
# instead of its codes with their counts (a row per household on the driver). It then has no
# value set: a release query by it would have more cells than `count_table` lists in full anyway
# (FULL_TABLE_CELLS).
VALUE_SET_LIMIT = 1_000_000


def _profiled(engine: Engine, raw, table: ir.Table, ids: set, spec: ir.Spec | None = None) -> dict:
    """{column: profile} of the id columns (`ids`) too large to count value by value and clean
    by their profile; a column with a problem is counted in full, so the error shows its values
    exactly as for any other column."""
    out = {}
    for group in column_groups(table):
        col = table.column(group[0])
        if len(group) != 1 or col.name not in ids or col.type.kind != "category" or col.type.parent:
            continue
        prof = engine.profile(raw, col.name)
        if prof["distinct"] <= VALUE_SET_LIMIT:
            continue
        bounds = [k for k, _ in checks.declared_bounds(table, spec)] if table.link == col.name else []
        if (prof["missing"] and not col.nullable) or prof["nul"] or (bounds and prof["largest"] > min(bounds)):
            continue
        out[col.name] = prof
    return out


def load_engine_table(spec: ir.Spec, source: ir.DataSource, engine: Engine) -> EngineTable:
    """Read a Parquet source on the engine, validate it from aggregates, cast it; see the module doc."""
    table = materialized(spec, spec.domain.table(source.table))
    path = checks.resolve_path(spec, source)
    present = engine.parquet_columns(path)
    missing = [c for c in table.column_names if c not in present]
    if missing:
        raise checks.missing_columns_error(path, table, missing, "parquet")
    check_parquet_types(path, table)
    raw = engine.read_parquet(path, list(table.column_names))
    ids = {t.link for t in spec.domain.tables if t.link}  # the columns that name a unit (household ids)
    profiled = _profiled(engine, raw, table, ids, spec)
    counted = [group for group in column_groups(table) if not (len(group) == 1 and group[0] in profiled)]
    group_counts = list(zip(counted, engine.count_groups(raw, counted)))
    rows = int(group_counts[0][1]["count"].sum()) if group_counts else next((p["rows"] for p in profiled.values()), 0)
    if rows == 0:
        raise checks.empty_table_error(path, table)
    tally = _Tally(path, table.name)
    categories = {}
    for col in table.columns:
        if col.name in profiled:  # clean by its profile; too many codes to list as a value set
            continue
        group = next(counts for names, counts in group_counts if col.name in names)
        values, tally.rows = distinct(group, col.name)
        if pd.api.types.is_string_dtype(values.dtype):
            nul = values.str.contains("\x00", regex=False, na=False).to_numpy()
            tally.add(col.name, "values holding NUL bytes (is the file binary or corrupt?)", nul, values)
        typed = checks._validate_column(col, values, tally)
        if col.type.kind == "enum" or col.type.values:
            categories[col.name] = tuple(col.type.values)
        elif col.type.kind == "category":
            categories[col.name] = tuple(typed.cat.categories)
    tally.raise_if_any()
    for names, counts in group_counts:
        checks._check_nesting(table, counts, path)
        if checks.declared_bounds(table, spec) and table.link in names:
            values, sizes = distinct(counts, table.link)
            checks.check_link_sizes(table, pd.Series(sizes, index=values.to_numpy()), path, spec)
    kinds = {c.name: kind_of(c) for c in table.columns}
    return EngineTable(engine.cast(raw, kinds), table.name, path, rows, kinds, categories, engine=engine)


def distinct(counts: pd.DataFrame, column: str) -> tuple[pd.Series, np.ndarray]:
    """A column's distinct values (missing last) and the rows of each, from a counts frame."""
    per = counts.groupby(column, sort=True, dropna=False)["count"].sum()
    values = pd.Series(per.index.to_numpy(), dtype=per.index.dtype if per.index.dtype != object else object)
    return values.reset_index(drop=True), per.to_numpy(dtype=np.int64)
