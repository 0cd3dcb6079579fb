"""The Apache Spark engine: units of work run as grouped pandas UDFs on a Spark cluster.

pyspark is imported only here and only when this engine is used, so dpspec works without it.
Each unit runs `base.run_unit`, the same function the local engine runs, so a unit sees the
same rows and the same keyed stream whichever engine and partitioning ran it.
"""

from __future__ import annotations

import contextvars
import os
import pickle
import shutil
import socket
import sys
import threading
import uuid
import warnings
from contextlib import contextmanager
from urllib.parse import urlsplit

import numpy as np
import pandas as pd
import pyarrow as pa

from dpspec import progress
from dpspec.engine import frames
from dpspec.engine.base import Engine, EngineUnavailable, UnitFailed, handle, run_item, run_unit, STREAM_CHUNK_ROWS
from dpspec.errors import DataError
from dpspec.lazy import MissingExtra, require, LazyModule
from dpspec.check.sources import is_directory, local_files
from dpspec.engine.local import count_frame, LocalEngine, profile_series, count_distinct_frame
from dpspec.engine.spark_lookup import lookup, counts_differ

# an optional extra's library, imported on first use (MissingExtra names the extra)
T = LazyModule("pyspark.sql.types", "T", globals(), extra="spark", purpose="the Spark engine")
_sql = LazyModule("pyspark.sql", "_sql", globals(), extra="spark", purpose="the Spark engine")
F = LazyModule("pyspark.sql.functions", "F", globals(), extra="spark", purpose="the Spark engine")
_pyspark = LazyModule("pyspark", "_pyspark", globals(), extra="spark", purpose="the Spark engine")

INSTALL = (
    "the Spark engine needs pyspark and a Java 17 runtime: run pip install 'dpspec[spark]' and "
    "install Java (on Debian: apt-get install openjdk-17-jre-headless)"
)
CONNECT_TIMEOUT = 10.0  # seconds to reach a master before giving up


def find_java() -> str | None:
    """The java executable Spark would launch: $JAVA_HOME/bin/java, else `java` on the PATH."""
    home = os.environ.get("JAVA_HOME")
    if home:
        candidate = os.path.join(home, "bin", "java")
        return candidate if os.access(candidate, os.X_OK) else None
    return shutil.which("java")


def master_addresses(master: str) -> list[tuple[str, int]]:
    """The (host, port) pairs to probe before starting; [] for masters with nothing to probe."""
    if master.startswith("local") or master == "yarn":
        return []
    if master.startswith("spark://"):
        out = []
        for item in master[len("spark://") :].split(","):
            host, _, port = item.rpartition(":")
            if not host or not port.isdigit():
                raise EngineUnavailable(f"cannot read the Spark master URL {master!r}: expected spark://HOST:PORT")
            out.append((host.strip("[]"), int(port)))
        return out
    if master.startswith("k8s://"):
        url = urlsplit(master[len("k8s://") :])
        if not url.hostname:
            raise EngineUnavailable(f"cannot read the Spark master URL {master!r}: expected k8s://https://HOST:PORT")
        return [(url.hostname, url.port or (443 if url.scheme == "https" else 80))]
    raise EngineUnavailable(f"unknown Spark master URL {master!r}: use local[N], spark://HOST:PORT, k8s://URL or yarn")


@contextmanager
def _quiet():
    """pyspark warns about every pandas newer than it was tested with (the engine exchanges only
    plain integer, float, boolean and string columns, which it handles), and about a failed
    Arrow collect, which the engine reports itself as the failed unit."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="PySpark does not yet fully support pandas", category=FutureWarning)
        warnings.filterwarnings("ignore", message="toPandas attempted Arrow optimization", category=UserWarning)
        warnings.filterwarnings("ignore", message="The copy keyword is deprecated")
        yield


def local_cores(master: str) -> int:
    """The worker threads of a local[N] master (local: 1; local[*]: every core)."""
    inside = master[len("local[") :].split("]")[0].split(",")[0] if master.startswith("local[") else "1"
    return os.cpu_count() or 1 if inside == "*" else max(1, int(inside)) if inside.isdigit() else 1


def probe_master(master: str, timeout: float = CONNECT_TIMEOUT) -> None:
    """Fail within `timeout` seconds per address if no address of the master accepts a connection."""
    addresses = master_addresses(master)
    errors = []
    for host, port in addresses:
        try:
            with socket.create_connection((host, port), timeout=timeout):
                return
        except OSError as exc:
            errors.append(f"{host}:{port}: {exc.strerror or exc}")
    if addresses:
        raise EngineUnavailable(
            f"cannot reach the Spark master {master} (waited at most {timeout:g} s per address; {'; '.join(errors)})"
        )


def check_available(master: str, timeout: float = CONNECT_TIMEOUT) -> None:
    """Everything the engine needs, checked in seconds, before a job is planned."""
    try:
        require("pyspark", "spark", "the Spark engine")
    except MissingExtra:
        raise EngineUnavailable(INSTALL) from None
    if find_java() is None:
        raise EngineUnavailable(INSTALL)
    probe_master(master, timeout)


_SPARK_TYPES = {
    "int64": "LongType",
    "float64": "DoubleType",
    "bool": "BooleanType",
    "boolean": "BooleanType",
    "str": "StringType",
}
# Spark has one boolean type, nullable or not: a column cast to dpspec's nullable "boolean" says so
# in its field metadata, so units and counts read its missing values back as missing.
KIND_METADATA = "dpspec_kind"


def _struct(schema: dict[str, str]):
    return T.StructType(
        [
            T.StructField(
                name, getattr(T, _SPARK_TYPES[kind])(), True, {KIND_METADATA: kind} if kind == "boolean" else None
            )
            for name, kind in schema.items()
        ]
    )


def _dtype_of(field) -> str:
    t = field.dataType
    if isinstance(t, T.BooleanType):
        return "boolean" if (field.metadata or {}).get(KIND_METADATA) == "boolean" else "bool"
    if isinstance(t, (T.ByteType, T.ShortType, T.IntegerType, T.LongType)):
        return "int64"
    if isinstance(t, (T.FloatType, T.DoubleType)):
        return "float64"
    if isinstance(t, T.StringType):
        return "str"
    raise DataError(
        f"column '{field.name}' has the Spark type {t.simpleString()}; engines exchange integers, floats, booleans and strings"
    )


class SparkEngine(Engine):
    name = "spark"

    def __init__(
        self,
        master: str = "local[*]",
        session=None,
        partitions: int | None = None,
        timeout: float = CONNECT_TIMEOUT,
        conf: dict | None = None,
    ):
        """master: a Spark master URL; session: an existing SparkSession to use instead (never
        stopped by `close`); partitions: repartition input tables into this many partitions;
        conf: extra Spark settings (executor memory, a cluster's options, ...)."""
        self.master = master
        self.conf = dict(conf or {})
        self.partitions = partitions
        self._session = session
        self._owned = False
        if session is None:
            check_available(master, timeout)

    @property
    def session(self):
        if self._session is None:
            # A session already running in this process (a notebook's, a test run's) is reused
            # by getOrCreate; it belongs to whoever started it, so `close` leaves it running.
            self._owned = _sql.SparkSession.getActiveSession() is None
            with _quiet():
                self._session = self._start()
        return self._session

    def _start(self):
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
        builder = (
            _sql.SparkSession.builder.master(self.master)
            .appName("dpspec")
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
            .config("spark.sql.execution.arrow.pyspark.enabled", "true")
            .config("spark.sql.session.timeZone", "UTC")
        )
        if self.master.startswith("local"):
            # Workers are local processes: give them this interpreter's import path (a plugin
            # installed in development mode, or a test module, must import on the workers too).
            builder = (
                builder.config("spark.executorEnv.PYTHONPATH", os.pathsep.join(p for p in sys.path if p))
                .config("spark.driver.bindAddress", "127.0.0.1")
                .config("spark.driver.host", "127.0.0.1")
                .config("spark.sql.shuffle.partitions", str(local_cores(self.master)))
                .config("spark.default.parallelism", str(local_cores(self.master)))
            )
        for name, value in self.conf.items():
            builder = builder.config(name, str(value))
        try:
            session = builder.getOrCreate()
        except Exception as exc:  # the JVM did not start: no usable Java, or a refused master
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise EngineUnavailable(f"could not start Spark on {self.master} ({first}); {INSTALL}") from None
        running = session.sparkContext.master
        if not self.master.startswith("local") and running != self.master:
            # getOrCreate hands back a session already running in this process, whatever master
            # was asked for: the work would silently run there, not on the cluster named
            raise EngineUnavailable(
                f"a Spark session on {running} is already running in this process, so Spark "
                f"cannot connect to {self.master}; stop it (spark.stop()) or start a new process"
            )
        session.sparkContext.setLogLevel("ERROR")
        return session

    def close(self) -> None:
        if self._owned and self._session is not None:
            self._session.stop()
        self._session, self._owned = None, False

    # ---- tables ---------------------------------------------------------------------------

    def _spark_frame(self, table):
        """(Spark DataFrame, canonical schema) for a pandas frame or a Spark DataFrame."""
        table = handle(table)
        if isinstance(table, pd.DataFrame):
            frame = frames.canonical(table)
            schema = frames.schema_of(frame)
            return self.session.createDataFrame(frame, schema=_struct(schema)), schema
        schema = {f.name: _dtype_of(f) for f in table.schema.fields}
        return table, schema

    def read_parquet(self, path: str, columns=None):
        with _quiet():
            return self._read_parquet(path, columns)

    def _read_parquet(self, path: str, columns=None):
        if "://" not in path and not os.path.exists(path):  # cluster paths (hdfs://, s3a://) are Spark's to check
            raise DataError(f"{path}: no such Parquet file or directory")
        # Partition values as text, as the directory names spell them (state=01 stays "01"): the
        # domain, not Spark's guess, says what a column holds. The setting is read when the files
        # are listed, here, so it is restored at once.
        conf = self.session.conf
        key = "spark.sql.sources.partitionColumnTypeInference.enabled"
        before = conf.get(key, "true")
        conf.set(key, "false")
        try:
            frame = _reader(self.session, path)
        except Exception as exc:  # Spark's AnalysisException: not Parquet, or no files in it
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise DataError(f"{path}: cannot read as Parquet: {first}") from None
        finally:
            conf.set(key, before)
        return frame.select(*columns) if columns is not None else frame

    def parquet_columns(self, path: str) -> list[str]:
        with _quiet():
            return list(self._read_parquet(path).columns)

    def cast(self, table, kinds):
        sdf, schema = self._spark_frame(table)
        text = (T.StringType, T.BinaryType)
        out = []
        for field in sdf.schema.fields:
            kind, col = kinds.get(field.name), F.col(field.name)
            if kind == "int64" and isinstance(field.dataType, text):
                col = col.cast("double").cast("long")  # "3.0" is a whole number, as in pandas
            elif kind is not None:
                col = col.cast(
                    {"int64": "long", "float64": "double", "bool": "boolean", "boolean": "boolean", "str": "string"}[
                        kind
                    ]
                )
            out.append(
                col.alias(field.name, metadata={KIND_METADATA: kind}) if kind == "boolean" else col.alias(field.name)
            )
        return sdf.select(*out)

    def to_pandas(self, table) -> pd.DataFrame:
        with _quiet():
            sdf, schema = self._spark_frame(table)
            return frames.sort_rows(frames.cast(sdf.toPandas(), schema))

    def map_groups(self, table, by, func, *, run_key, stage, schema=None, collect=True, columns=None, ordered=True):
        with _quiet():
            return self._map_groups(
                table,
                by,
                func,
                run_key=run_key,
                stage=stage,
                schema=schema,
                collect=collect,
                columns=columns,
                ordered=ordered,
            )

    def _map_groups(self, table, by, func, *, run_key, stage, schema=None, collect=True, columns=None, ordered=True):
        by = list(by)
        sdf, in_schema = self._spark_frame(table)
        if columns is not None:
            keep = list(dict.fromkeys([*by, *columns]))
            sdf, in_schema = sdf.select(*keep), {c: in_schema[c] for c in keep}
        out_schema = dict(schema) if schema is not None else in_schema
        tagged = {
            **out_schema,
            **{k: in_schema[c] for k, c in zip(frames.key_columns(len(by)), by)},
            frames.SEQ: "int64",
        }
        if self.partitions:
            sdf = sdf.repartition(self.partitions)

        def unit(key, rows):
            return run_unit(func, run_key, stage, key if by else (), rows, by, in_schema, out_schema, ordered=ordered)

        grouped = sdf.groupBy(*by) if by else sdf.groupBy(F.lit(0).alias(frames.HIDDEN + "all"))
        if not collect:
            return self._held(grouped.applyInPandas(unit, schema=_struct(tagged)).select(*out_schema), stage)
        try:
            with job_progress(self.session.sparkContext, stage):
                result = grouped.applyInPandas(unit, schema=_struct(tagged)).toPandas()
        except Exception as exc:
            raise _unit_error(exc) from None
        return frames.untag(result, by, out_schema)

    def _held(self, sdf, stage: str):
        """Units' outputs kept on the executors: cached (memory, then disk) and computed now, so
        that a failed unit is reported here with its key and later counts and streams read the
        cache. Should Spark lose a cached block it recomputes it; units draw from keyed streams,
        so the recomputed rows are the same rows."""
        held = sdf.persist(_pyspark.StorageLevel.MEMORY_AND_DISK)
        try:
            with job_progress(self.session.sparkContext, stage):
                held.count()
        except Exception as exc:
            held.unpersist()
            raise _unit_error(exc) from None
        return held

    def drop(self, table) -> None:
        table = handle(table)
        if not isinstance(table, pd.DataFrame) and hasattr(table, "unpersist"):
            table.unpersist()

    def stream(self, table, order_by=None, columns=None, chunk_rows=None):
        """Sorted on the executors (range partitions of about `chunk_rows` rows, each sorted),
        then fetched a partition at a time (`toLocalIterator`) as Arrow batches packed on the
        executors: the driver holds about one partition, and no row becomes a Python object."""

        size = max(1, int(chunk_rows or STREAM_CHUNK_ROWS))
        with _quiet():
            sdf, schema = self._spark_frame(table)
            if columns is not None:
                sdf, schema = sdf.select(*columns), {c: schema[c] for c in columns}
            packed, parts = self._sorted_batches(
                sdf, list(order_by) if order_by is not None else list(sdf.columns), size
            )
            rows = iter(packed.toLocalIterator(prefetchPartitions=parts > 1))
        pending, held = [], 0
        for row in rows:
            frame = _unpack(row[0])
            pending.append(frame)
            held += len(frame)
            if held >= size:
                yield frames.cast(pd.concat(pending, ignore_index=True), schema)
                pending, held = [], 0
        if pending:
            yield frames.cast(pd.concat(pending, ignore_index=True), schema)

    def _sorted_batches(self, sdf, order: list, size: int):
        """(a DataFrame of one binary column: each row an Arrow IPC stream of consecutive rows in
        the global order, partitions in order; its number of partitions)."""
        keys = [F.col(c).asc_nulls_last() for c in order]
        rows = sdf.count()
        parts = max(1, -(-rows // size))
        ordered = (sdf.repartitionByRange(parts, *keys) if parts > 1 else sdf.coalesce(1)).sortWithinPartitions(*keys)
        return ordered.mapInArrow(_pack_batches, "chunk binary"), parts

    def count(self, table, by) -> pd.DataFrame:
        with _quiet():
            return self._count(table, by)

    def _count(self, table, by) -> pd.DataFrame:
        table = handle(table)
        if isinstance(table, pd.DataFrame):  # already on the driver: shipping it to count is waste
            return count_frame(table, by)
        by = list(by)
        sdf, schema = self._spark_frame(table)
        if not by:
            return pd.DataFrame({"count": [sdf.count()]}, dtype="int64")
        counts = sdf.groupBy(*by).count().toPandas()
        return frames.sort_rows(frames.cast(counts, {**_returned_kinds(counts, schema, by), "count": "int64"}), by)

    def count_groups(self, table, groups) -> list[pd.DataFrame]:
        """One pass over the table for every group (grouping sets), not one job each: a table
        of 18 column groups is read once. The sets come back as one Arrow table told apart by
        grouping_id, so a key column keeps its type (a large id never passes through floats)
        and each set is typed as `count` types it."""
        table = handle(table)
        groups = [list(by) for by in groups]
        if isinstance(table, pd.DataFrame) or len(groups) < 2 or not all(groups):
            return [self.count(table, by) for by in groups]
        with _quiet():
            sdf, schema = self._spark_frame(table)
            if not hasattr(sdf, "groupingSets"):  # before Spark 4.0
                return [self._count(table, by) for by in groups]
            columns = list(dict.fromkeys(c for by in groups for c in by))
            unique = list(dict.fromkeys(tuple(by) for by in groups))
            gid = frames.HIDDEN + "grouping"
            counted = sdf.groupingSets([list(by) for by in unique], *columns).agg(
                F.grouping_id().alias(gid), F.count(F.lit(1)).alias("count")
            )
            arrow = counted.toArrow()
        ids = arrow.column(gid).to_numpy()
        out = {}
        for by in unique:  # grouping_id: a bit per column, 1 where the set does not group by it
            bits = sum(1 << (len(columns) - 1 - i) for i, c in enumerate(columns) if c not in by)
            sub = arrow.filter(pa.array(ids == bits)).select([*by, "count"]).to_pandas()
            out[by] = frames.sort_rows(
                frames.cast(sub, {**_returned_kinds(sub, schema, list(by)), "count": "int64"}), list(by)
            )
        return [out[tuple(by)] for by in groups]

    def total(self, table, by, column="count", *, stage="total", collect=True):
        with _quiet():
            sdf, schema = self._spark_frame(table)
            by = list(by)
            summed = (sdf.groupBy(*by) if by else sdf.groupBy()).agg(F.sum(column).cast("long").alias(column))
            if not collect:
                return self._held(summed, stage)
            out = summed.toPandas()
        kinds = _returned_kinds(out, schema, by)
        return frames.sort_rows(frames.cast(out.fillna({column: 0}), {**kinds, column: "int64"}), by)

    def clipped_totals(self, table, by, clips) -> pd.DataFrame:
        table = handle(table)
        if isinstance(table, pd.DataFrame):  # already on the driver
            return LocalEngine().clipped_totals(table, by, clips)

        by = list(by)
        with _quiet():
            sdf, schema = self._spark_frame(table)
            aggs = [F.count(F.lit(1)).cast("long").alias("count")]
            for i, (column, low, high) in enumerate(clips):
                raw = F.col(column).cast("long")
                clipped = F.least(F.greatest(raw, F.lit(int(low))), F.lit(int(high)))
                aggs += [
                    F.sum(clipped).cast("long").alias(f"sum{i}"),
                    F.sum((clipped != raw).cast("long")).cast("long").alias(f"clipped{i}"),
                    F.min(raw).alias(f"min{i}"),
                    F.max(raw).alias(f"max{i}"),
                ]
            out = (sdf.groupBy(*by) if by else sdf.groupBy()).agg(*aggs).toPandas()
        if not by and len(out) and out["count"].iloc[0] == 0:
            out = out.iloc[:0]
        kinds = _returned_kinds(out, schema, by)
        return frames.sort_rows(frames.cast(out, {**kinds, **{c: "int64" for c in out.columns if c not in by}}), by)

    def bucket_counts(self, table, by, column, low, step, high) -> pd.DataFrame:
        table = handle(table)
        if isinstance(table, pd.DataFrame):
            return LocalEngine().bucket_counts(table, by, column, low, step, high)

        by = list(by)
        with _quiet():
            sdf, schema = self._spark_frame(table)
            clipped = F.least(F.greatest(F.col(column).cast("long"), F.lit(int(low))), F.lit(int(high)))
            bucket = F.ceil((clipped - F.lit(int(low))) / F.lit(int(step))).cast("long").alias("bucket")
            out = sdf.groupBy(*by, bucket).agg(F.count(F.lit(1)).cast("long").alias("count")).toPandas()
        kinds = _returned_kinds(out, schema, by)
        return frames.sort_rows(frames.cast(out, {**kinds, "bucket": "int64", "count": "int64"}), [*by, "bucket"])

    def profile(self, table, column: str) -> dict:
        table = handle(table)
        if isinstance(table, pd.DataFrame):
            return profile_series(table[column])

        with _quiet():
            sdf, _ = self._spark_frame(table)
            col = F.col(column)
            text = isinstance(sdf.schema[column].dataType, T.StringType)
            has_nul = (F.instr(col, "\x00") > 0).cast("long") if text else F.lit(0).cast("long")
            # one row per distinct value, then one row of sums, in one pass over the table:
            # nothing the size of the column comes back
            per = sdf.groupBy(col).agg(
                F.count(F.lit(1)).alias("n"),
                F.max(col.isNull().cast("long")).alias("null"),
                F.max(has_nul).alias("nul"),
            )
            row = per.agg(
                F.sum("n").alias("rows"),
                F.count(F.lit(1)).alias("distinct"),
                F.sum(F.when(F.col("null") == 1, F.col("n")).otherwise(0)).alias("missing"),
                F.sum(F.when(F.col("nul") == 1, F.col("n")).otherwise(0)).alias("nul"),
                F.max("n").alias("largest"),
            ).collect()[0]
        return {k: int(row[k] or 0) for k in ("rows", "distinct", "missing", "nul", "largest")}

    def count_distinct(self, table, by, columns) -> pd.DataFrame:
        table = handle(table)
        if isinstance(table, pd.DataFrame):
            return count_distinct_frame(table, by, columns)

        with _quiet():
            sdf, schema = self._spark_frame(table)
            # countDistinct skips nulls: a column's missing values are one more value when present
            aggs = [F.count(F.lit(1)).alias("count")] + [
                (F.countDistinct(c) + F.max(F.col(c).isNull().cast("int"))).alias(c) for c in columns
            ]
            out = (sdf.groupBy(*by).agg(*aggs) if by else sdf.agg(*aggs)).toPandas()
        return frames.sort_rows(
            frames.cast(out, {**{c: schema[c] for c in by}, "count": "int64", **{c: "int64" for c in columns}}), by
        )

    def lookup(self, table, key, parent, take, compare=None, *, stage="lookup", show=5):
        """A left join on the executors, its checks observed in the same pass (`spark_lookup`)."""

        with _quiet():
            return lookup(
                self,
                table,
                key,
                parent,
                dict(take),
                dict(compare or {}),
                stage=stage,
                show=show,
                kind_metadata=KIND_METADATA,
            )

    def counts_differ(self, table, other, by) -> int:
        """Both counts and their full outer join on the executors; one number comes back."""

        with _quiet():
            return counts_differ(self, table, other, list(by))

    def map_items(self, items, func, *, run_key, stage, per_item=False) -> list:
        """Driver-built units as Spark jobs over RDDs; results back in the items' order.

        Units are shipped in batches of at most `MAX_JOB_BYTES` of payload, one job each, so
        the driver never serializes a whole level at once (TopDown's block level holds
        gigabytes of noisy measurements at 10M persons) and the driver JVM holds one batch.
        A task carries its units in its own message, which Spark refuses over
        `spark.rpc.message.maxSize` (128 MiB by default): a job's units are split into tasks
        of at most half that (`task_chunks`), and a unit larger than that alone travels as a
        broadcast variable."""
        with _quiet():
            if not items:
                return []
            context = self.session.sparkContext
            limit = task_payload_limit(context)
            parallel = self.partitions or context.defaultParallelism
            sizes = [payload_bytes(payload) for _, payload in items]  # each unit pickled once to size it
            results = []
            try:
                with job_progress(context, stage):
                    for batch in payload_batches(items, MAX_JOB_BYTES, sizes):
                        tasks = [[unit] for unit in batch] if per_item else task_chunks(batch, limit, parallel, sizes)
                        big = {i: context.broadcast(payload) for i, (_, payload) in _oversize(tasks, limit, sizes)}
                        tasks = [[(i, (key, None if i in big else payload)) for i, (key, payload) in t] for t in tasks]

                        def work(task, big=big):
                            return [
                                (i, run_item(func, run_key, stage, key, big[i].value if i in big else payload))
                                for i, (key, payload) in task
                            ]

                        try:
                            results.extend(context.parallelize(tasks, len(tasks)).flatMap(work).collect())
                        finally:
                            for value in big.values():
                                value.destroy()
            except Exception as exc:
                raise _unit_error(exc) from None
            return [r for _, r in sorted(results, key=lambda pair: pair[0])]


def _pack_batches(batches):
    """On an executor: each Arrow batch of a partition as one row holding its IPC stream bytes
    (order kept: a partition's batches arrive in its row order)."""
    for batch in batches:
        if batch.num_rows == 0:
            continue
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, batch.schema) as writer:
            writer.write_batch(batch)
        yield pa.RecordBatch.from_arrays([pa.array([sink.getvalue().to_pybytes()], pa.binary())], names=["chunk"])


def _unpack(blob: bytes) -> pd.DataFrame:
    return pa.ipc.open_stream(blob).read_pandas()


MAX_JOB_BYTES = 256 << 20  # payload bytes shipped to Spark in one map_items job


def task_payload_limit(context) -> int:
    """Payload bytes one task may carry: half of `spark.rpc.message.maxSize` (MiB), leaving
    room for the task's own description."""
    return int(context.getConf().get("spark.rpc.message.maxSize", "128")) << 19


def task_chunks(batch, limit: int, parallel: int, sizes=None) -> list[list]:
    """A job's (index, item) pairs as consecutive tasks of about equal payload: at least
    `parallel` of them (or one per unit) so every executor has work, and none over `limit`
    bytes unless one unit alone is larger. `sizes[index]`, when given, is each item's
    payload size, so a caller that has measured them does not pickle the units again."""
    sizes = np.array([payload_bytes(item[1]) if sizes is None else sizes[i] for i, item in batch], dtype=np.float64)
    total = float(sizes.sum())
    n_tasks = max(min(len(batch), parallel), int(-(-total // max(limit, 1))))
    middle = np.cumsum(sizes) - sizes / 2  # a unit goes where the middle of its bytes falls
    group = np.minimum((middle * n_tasks // total).astype(np.int64), n_tasks - 1) if total else np.zeros(len(batch))
    out = []
    for g in np.unique(group):
        members = np.flatnonzero(group == g)
        task, size = [], 0.0
        for j in members:  # a task over the limit is cut where it would pass it
            if task and size + sizes[j] > limit:
                out.append(task)
                task, size = [], 0.0
            task.append(batch[j])
            size += sizes[j]
        out.append(task)
    return out


def _oversize(tasks, limit: int, sizes):
    """The (index, item) pairs that alone carry more than `limit` payload bytes (`sizes[index]`)."""
    return [unit for task in tasks for unit in task if len(task) == 1 and sizes[unit[0]] > limit]


def payload_bytes(payload) -> int:
    """A payload's pickled size, its arrays counted without copying them (out-of-band buffers)."""
    buffers = []
    head = pickle.dumps(payload, protocol=5, buffer_callback=buffers.append)
    return len(head) + sum(b.raw().nbytes for b in buffers)


def payload_batches(items, limit: int, sizes=None) -> list[list]:
    """(index, item) pairs in consecutive batches of at most `limit` payload bytes (at least
    one item); `sizes`, when given, holds each item's payload size."""
    out, batch, size = [], [], 0
    for i, item in enumerate(items):
        n = payload_bytes(item[1]) if sizes is None else sizes[i]
        if batch and size + n > limit:
            out.append(batch)
            batch, size = [], 0
        batch.append((i, item))
        size += n
    if batch:
        out.append(batch)
    return out


@contextmanager
def job_progress(context, stage: str, every: float = 0.5):
    """Report a Spark job's progress as it runs: its finished tasks out of all its tasks.

    A task is a batch of units of work (a partition), so the bar moves as batches finish; the
    jobs are found by a job group of their own, polled from a thread that carries the caller's
    progress reporter (a context variable).
    """
    group = f"dpspec-{uuid.uuid4().hex}"
    context.setJobGroup(group, f"dpspec: {stage}")
    stop = threading.Event()
    tracker = context.statusTracker()

    def counts() -> tuple[int, int]:
        done = total = 0
        for job in tracker.getJobIdsForGroup(group):
            info = tracker.getJobInfo(job)
            for stage_id in info.stageIds if info is not None else ():
                stage_info = tracker.getStageInfo(stage_id)
                if stage_info is not None:
                    done, total = done + stage_info.numCompletedTasks, total + stage_info.numTasks
        return done, total

    def poll():
        while not stop.wait(every):
            done, total = counts()
            if total:
                progress.report(stage, min(done, total - 1), total)  # done only when collected

    progress.report(stage, 0, 1)
    thread = threading.Thread(target=contextvars.copy_context().run, args=(poll,), daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
        context.setLocalProperty("spark.jobGroup.id", None)
    total = max(counts()[1], 1)
    progress.report(stage, total, total)


def _returned_kinds(frame: pd.DataFrame, schema: dict, by: list) -> dict:
    """The canonical kinds of grouping columns Spark returned: a missing integer or boolean key
    comes back as NaN or None, so such a column is typed as pandas would type it."""
    kinds = {c: schema[c] for c in by}
    for c in by:
        if kinds[c] in ("int64", "bool") and frame[c].isna().any():
            kinds[c] = "float64" if kinds[c] == "int64" else "str"
    return kinds


def _unit_error(exc: Exception) -> Exception:
    """A failed Spark job as the unit failure it carries (its stage and key), else unchanged."""
    text = str(exc)
    marker = UnitFailed.__name__ + ": "
    if marker in text:
        line = next(line for line in text.splitlines() if marker in line)
        return UnitFailed(line.split(marker, 1)[1].strip())
    return exc


def _reader(session, path: str):
    """A local folder is read from the files `data_files` lists and fingerprints (Spark's own
    listing would follow a symlink loop), with the folder as base for the partition columns."""

    if "://" in path or not is_directory(path):
        return session.read.parquet(path)
    return session.read.option("basePath", path).parquet(*local_files(path))
