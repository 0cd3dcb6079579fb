"""`Engine.lookup` on Spark: a left join on the executors, its checks counted in the same pass.

Why a module of its own: the join, its observed metrics and the error-path aggregates are one
job (`dpspec.engine.lookup` says what it is for). The success path costs one aggregate of the
parent's keys (duplicates) and one join whose result is cached; the rows that fail a check are
counted while the join runs (a Spark `Observation`), so no second pass is made unless there is
an error to describe. Only aggregates come back: a few problem values with their counts.
"""

from __future__ import annotations

from functools import reduce

import pandas as pd

from dpspec.engine import frames
from dpspec.engine.lookup import COUNT, PARENT_VALUE, VALUE, LookupChecks
from dpspec.lazy import LazyModule

# an optional extra's library, imported on first use (MissingExtra names the extra)
_sql = LazyModule("pyspark.sql", "_sql", globals(), extra="spark", purpose="the Spark engine")
F = LazyModule("pyspark.sql.functions", "F", globals(), extra="spark", purpose="the Spark engine")

FOUND = frames.HIDDEN + "lookup_found"  # true on the parent side: null after the join = no parent
KEY = frames.HIDDEN + "lookup_key"


def _spark_type(kind: str) -> str:
    return {"int64": "long", "float64": "double", "bool": "boolean", "boolean": "boolean", "str": "string"}[kind]


def lookup(engine, table, key: str, parent, take: dict, compare: dict, *, stage: str, show: int, kind_metadata: str):
    """`SparkEngine.lookup`; kind_metadata: the field metadata key that marks a nullable bool."""
    child, child_kinds = engine._spark_frame(table)
    par, parent_kinds = engine._spark_frame(parent)
    key_type = _spark_type(child_kinds[key])
    parent_key = F.col(key).cast(key_type)

    repeated = par.groupBy(parent_key.alias(key)).count().filter(F.col(COUNT) > 1)
    first = repeated.orderBy(F.col(key).asc_nulls_last()).limit(show).toPandas()
    if len(first):  # the join is not defined: say so before joining
        return None, LookupChecks(
            duplicate_keys=int(repeated.count()), duplicates=_typed(first, {key: child_kinds[key]})
        )

    taken = {col: f"{frames.HIDDEN}take{i}" for i, col in enumerate(take)}
    compared = {col: f"{frames.HIDDEN}compare{i}" for i, col in enumerate(compare)}
    right = par.select(
        parent_key.alias(KEY),
        F.lit(True).alias(FOUND),
        *[F.col(take[c]).alias(h) for c, h in taken.items()],
        *[F.col(compare[c]).alias(h) for c, h in compared.items()],
    )
    joined = child.join(right, child[key].eqNullSafe(right[KEY]), "left")
    missing = F.col(FOUND).isNull()

    def kind(col: str) -> str:
        return child_kinds.get(col) or parent_kinds[take[col]]

    def theirs(col: str):
        return F.col(compared[col]).cast(_spark_type(child_kinds[col]))

    def differs(col: str):
        return F.col(FOUND).isNotNull() & ~F.col(col).eqNullSafe(theirs(col))

    observation = _sql.Observation()
    observed = joined.observe(
        observation,
        F.count(F.lit(1)).alias("rows"),
        F.sum(missing.cast("long")).alias("unmatched"),
        *[F.sum(differs(c).cast("long")).alias(f"m{i}") for i, c in enumerate(compared)],
    )
    columns = [*child.columns, *(c for c in take if c not in child.columns)]
    out = observed.select(
        *[
            _as(F.col(taken[c]).cast(_spark_type(kind(c))), c, kind(c), kind_metadata) if c in take else F.col(c)
            for c in columns
        ]
    )
    held = engine._held(out, stage)
    metrics = observation.get
    unmatched_rows = int(metrics.get("unmatched") or 0)
    mismatched_rows = {c: int(metrics.get(f"m{i}") or 0) for i, c in enumerate(compared)}
    unmatched, mismatched = None, {}
    if unmatched_rows:
        unmatched = _typed(
            joined.filter(missing)
            .groupBy(F.col(key))
            .count()
            .orderBy(F.col(key).asc_nulls_last())
            .limit(show)
            .toPandas(),
            {key: child_kinds[key]},
        )
    for col, n in mismatched_rows.items():
        if n:
            pairs = (
                joined.filter(differs(col))
                .groupBy(F.col(col).alias(VALUE), theirs(col).alias(PARENT_VALUE))
                .count()
                .orderBy(F.col(VALUE).asc_nulls_last(), F.col(PARENT_VALUE).asc_nulls_last())
                .limit(show)
                .toPandas()
            )
            mismatched[col] = _typed(pairs, {VALUE: child_kinds[col], PARENT_VALUE: child_kinds[col]})
    checks = LookupChecks(
        unmatched_rows=unmatched_rows, unmatched=unmatched, mismatched_rows=mismatched_rows, mismatched=mismatched
    )
    if not checks.ok:
        held.unpersist()
        return None, checks
    return held, checks


def _as(column, name: str, kind: str, metadata_key: str):
    """A column under its name; a nullable bool says so in its metadata, as `SparkEngine.cast` does."""
    return column.alias(name, metadata={metadata_key: kind}) if kind == "boolean" else column.alias(name)


def _typed(frame: pd.DataFrame, kinds: dict) -> pd.DataFrame:
    """A checks frame in canonical types and order (Spark sorted it already; ties kept)."""
    return frames.sort_rows(frames.cast(frame, {**kinds, COUNT: "int64"}), list(kinds))


def counts_differ(engine, table, other, by: list) -> int:
    """`Engine.counts_differ` on Spark: each table counted by `by` (as text), the two counts
    joined (full outer, missing values equal) and the differing cells counted there."""
    left, _ = engine._spark_frame(table)
    right, _ = engine._spark_frame(other)
    if not by:
        return int(left.count() != right.count())

    def counted(sdf, name):
        return (
            sdf.groupBy(*[F.col(c).cast("string").alias(c) for c in by]).agg(F.count(F.lit(1)).alias(name)).alias(name)
        )

    a, b = counted(left, "a"), counted(right, "b")
    same_cell = reduce(lambda x, y: x & y, [F.col(f"a.{c}").eqNullSafe(F.col(f"b.{c}")) for c in by])
    joined = a.join(b, same_cell, "full_outer")
    return int(joined.filter(F.coalesce(F.col("a.a"), F.lit(0)) != F.coalesce(F.col("b.b"), F.lit(0))).count())
