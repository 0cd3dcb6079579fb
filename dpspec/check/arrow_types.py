"""Which Arrow types a Parquet column may have for each kind of domain column.

Parquet carries types, and the loaders (pandas on the local engine, Spark's casts on a cluster)
only know what to do with numbers, text and booleans. A date, a decimal, raw bytes or a list in
a declared column would reach them as Python objects or Spark types no check expects, and crash
or depend on the hash seed; so every data file's schema is compared with the domain first, from
its footer alone (no rows are read), and anything else is a DataError naming the file, the
column and the type. Every file of a partitioned folder is checked, since each carries its own
schema.
"""

from __future__ import annotations

import os

from dpspec import ir
from dpspec.errors import DataError
from dpspec.check.sources import data_files, filesystem, is_directory, is_uri, local_files
from dpspec.language.reading import NotRegularFile, require_regular
from dpspec.lazy import LazyModule

# heavy libraries, imported on first use
pt = LazyModule("pyarrow.types", "pt", globals())
pq = LazyModule("pyarrow.parquet", "pq", globals())

# imported on first use: at import they would load numpy with this module
_limits = LazyModule("dpspec.check.limits", "_limits", globals())

# kind -> (predicate names of pyarrow.types that the kind accepts, what it wants in words)
_ACCEPTED = {
    "int": (
        ("is_integer", "is_floating", "is_string", "is_large_string", "is_null"),
        "whole numbers (an integer type, a float holding whole numbers, or text)",
    ),
    "bool": (
        ("is_boolean", "is_integer", "is_string", "is_large_string", "is_null"),
        "true/false (a boolean, 0/1 integers or text)",
    ),
    "enum": (
        ("is_string", "is_large_string", "is_integer", "is_boolean", "is_floating", "is_null"),
        "codes (text or integers)",
    ),
    "category": (
        ("is_string", "is_large_string", "is_integer", "is_boolean", "is_floating", "is_null"),
        "codes (text or integers)",
    ),
}


def type_problem(arrow_type, kind: str) -> str | None:
    """Why a column of `arrow_type` cannot hold a domain column of `kind`, or None if it can."""
    if pt.is_dictionary(arrow_type):  # a dictionary-encoded column: its values are what count
        arrow_type = arrow_type.value_type
    names, wanted = _ACCEPTED.get(kind, _ACCEPTED["category"])
    if any(getattr(pt, name)(arrow_type) for name in names):
        return None
    return f"is stored as {arrow_type}, but the domain declares it {kind}, which needs {wanted}"


def check_parquet_types(path: str, table: ir.Table) -> None:
    """DataError unless every data file of the Parquet source `path` has a usable type for each
    declared column it holds, and no column name twice."""
    tally = _limits.FooterTally(path)
    for where, metadata in _schemas(path):
        tally.add(where, metadata, table.column_names)  # declared limits, before any row is read
        schema = metadata.schema.to_arrow_schema()
        counts: dict[str, int] = {}
        for name in schema.names:
            counts[name] = counts.get(name, 0) + 1
        twice = [c for c in table.column_names if counts.get(c, 0) > 1]
        if twice:
            raise DataError(
                f"{where}: column '{twice[0]}' appears {counts[twice[0]]} times in the file; "
                "dpspec would not know which one holds the data"
            )
        problems = []
        for col in table.columns:
            if col.name in counts:
                why = type_problem(schema.field(col.name).type, col.type.kind)
                if why:
                    problems.append(f"  column '{col.name}' {why}")
        if problems:
            raise DataError(
                "\n".join(
                    [
                        f"{where}: table '{table.name}' has column types dpspec cannot read as the "
                        "domain says (convert them, or declare the column as what it holds):",
                        *problems,
                    ]
                )
            )


def _schemas(path: str):
    """(file, Parquet footer) of each data file: footers only, no rows."""
    try:
        if is_uri(path):  # every file's own footer: a dataset's schema is its first file's only
            handle, inner = filesystem(path)
            if not is_directory(path):
                yield path, pq.read_metadata(inner, filesystem=handle)
                return
            for rel in data_files(path):
                name = rel.replace(os.sep, "/")
                yield f"{path.rstrip('/')}/{name}", pq.read_metadata(f"{inner.rstrip('/')}/{name}", filesystem=handle)
            return
        if not is_directory(path):
            require_regular(path)
            yield path, pq.read_metadata(path)
            return
        for full in local_files(path):
            yield full, pq.read_metadata(full)
    except FileNotFoundError:
        raise DataError(f"{path}: the data file does not exist") from None
    except NotRegularFile:
        raise DataError(f"{path}: not a regular file (a device, pipe or folder); data is read from files") from None
    except (OSError, ValueError) as exc:  # pyarrow's ArrowInvalid is a ValueError
        raise DataError(f"{path}: cannot read as Parquet: {exc}") from None
