"""A table the engine holds: what a mechanism that opted in gets instead of a pandas frame.

Why: a national person table does not fit the driver. When a spec's source is Parquet and the
mechanism declares `engine_tables = True`, compile has the engine read the source itself
(`Engine.read_parquet`), validates it with the engine's aggregates (`dpspec.check.engine_data`)
and hands the mechanism this handle. On the local engine the handle is a pandas frame (the data
lives in this process anyway); on Spark it is a Spark DataFrame, and nothing row-level comes back
to the driver unless the mechanism asks for it (`engine.to_pandas`, `engine.map_groups`).
"""

from __future__ import annotations

import attrs
import pandas as pd


@attrs.frozen
class EngineTable:
    """A validated table held by an engine, with what the driver knows of it from aggregates.

    handle: the engine's table (pandas frame on the local engine, Spark DataFrame on Spark),
    columns already in canonical kinds (codes as text, whole numbers as int64, bool);
    name, path: the domain table and the source it was read from;
    rows: how many rows it holds;
    kinds: column -> canonical kind (frames.DTYPES);
    categories: column -> the value set a pandas frame of this table would have as categories
    (the domain's values for enumerations, the observed codes, sorted, for open categories), so
    a mechanism can give its microdata the same column types as a compile from pandas would;
    engine: the engine that holds it, so that steps without an engine (a mechanism's
    `public_facts`, compile's invariant check) can still aggregate it where it lives (`count`,
    `count_distinct`).
    """

    handle: object = attrs.field(repr=False)
    name: str
    path: str
    rows: int
    kinds: dict
    categories: dict = attrs.Factory(dict)
    engine: object = attrs.field(default=None, repr=False, eq=False)

    def count(self, by) -> "pd.DataFrame":
        """Rows per observed combination of `by` (`Engine.count`), counted by the engine that
        holds the table (for steps that get no engine, such as `Mechanism.public_facts`)."""
        return self._engine().count(self.handle, list(by))

    def count_distinct(self, by, columns) -> "pd.DataFrame":
        """Per combination of `by`: its rows and the distinct values of each of `columns`
        (`Engine.count_distinct`), computed by the engine that holds the table."""
        return self._engine().count_distinct(self.handle, list(by), list(columns))

    def _engine(self):
        if self.engine is None:
            raise ValueError(f"table '{self.name}' was built without the engine that holds it")
        return self.engine

    def __len__(self) -> int:
        return self.rows

    @property
    def columns(self) -> list[str]:
        return list(self.kinds)

    def dtype(self, column: str):
        """The pandas dtype a loaded frame would give `column` (a CategoricalDtype for codes)."""
        if column in self.categories:
            return pd.CategoricalDtype(list(self.categories[column]))
        return {"int64": "int64", "float64": "float64", "bool": "bool", "boolean": "boolean"}.get(
            self.kinds[column], "object"
        )
