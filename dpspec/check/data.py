"""Load each table from its declared source and validate it against the domain.

Values are read as text first so that codes such as `N` ("not applicable") stay values and
are never turned into missing data; only an empty field is missing. Every problem becomes a
DataError naming the file, table, column, row numbers and values (the first few of each kind
and how many in all).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from dpspec import ir
from dpspec.check.arrow_types import check_parquet_types
from dpspec.check.keys import materialized
from dpspec.check.limits import check_csv_file, check_csv_stream
from dpspec.check.sources import (  # noqa: F401 (file_sha256, resolve_path: re-exported)
    file_sha256,
    is_directory,
    is_parquet,
    is_uri,
    parquet_dataset,
    read_parquet_directory,
    resolve_path,
    source_sha256,
)
from dpspec.errors import DataError
from dpspec.language.reading import NotRegularFile, require_regular
from dpspec.language.values import shown as shown_value
from dpspec.check.sources import filesystem
from dpspec.lazy import LazyModule

# heavy libraries, imported on first use
pq = LazyModule("pyarrow.parquet", "pq", globals())

SHOW = 5
TRUE_WORDS = {"true", "t", "yes", "y", "1"}
FALSE_WORDS = {"false", "f", "no", "n", "0"}


def _read_raw(path: str, fmt: str, table: ir.Table, fingerprints: dict | None = None) -> pd.DataFrame:
    columns = list(table.column_names)
    if fmt == "parquet":
        check_parquet_types(path, table)
    try:
        if fmt == "parquet" and is_directory(path):  # hive-partitioned Parquet, as a cluster writes it
            return read_parquet_directory(path, columns)
        if is_uri(path):  # a cluster location (hdfs://, s3a://): through pyarrow's filesystem
            return _read_uri(path, fmt, columns)
        require_regular(path)
        if fmt == "parquet":
            present = set(pq.read_schema(path).names)
            frame = pd.read_parquet(path, columns=[c for c in columns if c in present])
        else:
            frame = _read_csv(path, columns, fingerprints)
    except FileNotFoundError:
        raise DataError(f"{path}: the data file does not exist") from None
    except pd.errors.EmptyDataError:
        raise DataError(f"{path}: the file is empty (not even a header line); there is no table to read") from None
    except NotRegularFile:
        raise DataError(f"{path}: not a regular file (a device, pipe or folder); data is read from files") from None
    except pd.errors.ParserError as exc:  # a row with more fields than the header: its extras would be dropped
        raise DataError(
            f"{path}: cannot read the file as {fmt}: {str(exc).strip()}; "
            "a row with more fields than the header is refused, not cut to fit"
        ) from None
    except (OSError, ValueError, ImportError) as exc:
        raise DataError(f"{path}: cannot read the file as {fmt}: {exc}") from None
    return frame


CSV_CHUNK_ROWS = 1_000_000


def _refuse_repeated(path: str, header: list) -> None:
    """A header naming a column twice is refused (pandas would quietly rename the second)."""
    seen: set = set()
    for name in header:
        if name in seen:
            raise DataError(
                f"{path}: the header names column '{name}' twice; dpspec would not know which one holds "
                "the data (pandas would quietly rename the second)"
            )
        seen.add(name)


def _read_csv(path: str, columns: list[str], fingerprints: dict | None = None) -> pd.DataFrame:
    """The declared columns of a CSV, as text. Every field of every row is tokenized (pandas
    would silently drop a row's extra fields when asked for some columns only), a chunk at a time
    so that undeclared columns never fill memory; a header naming a column twice is refused.
    With `fingerprints`, the limit scan also hashes an uncompressed file (fingerprints[path])."""
    # record lengths and size within the declared limits, before pandas allocates
    sha = check_csv_file(path, fingerprint=fingerprints is not None)
    if sha is not None:
        fingerprints[path] = sha
    header = pd.read_csv(path, nrows=1, header=None, dtype=str, keep_default_na=False).iloc[0].tolist()
    _refuse_repeated(path, header)
    wanted = [c for c in columns if c in set(header)]
    read = dict(dtype=str, keep_default_na=False, na_values=[""])
    if len(wanted) == len(header):
        return pd.read_csv(path, **read)
    chunks = [chunk[wanted] for chunk in pd.read_csv(path, chunksize=CSV_CHUNK_ROWS, **read)]
    return pd.concat(chunks, ignore_index=True) if chunks else pd.DataFrame(columns=wanted, dtype=str)


def _read_uri(path: str, fmt: str, columns: list[str]) -> pd.DataFrame:
    """A single file named by a URI; a CSV is streamed from the filesystem as a local one is read."""
    if fmt == "parquet":
        dataset = parquet_dataset(path)
        return dataset.to_table(columns=[c for c in columns if c in set(dataset.schema.names)]).to_pandas()

    handle, inner = filesystem(path)
    with handle.open_input_stream(inner) as fh:
        check_csv_stream(path, fh)
    with handle.open_input_stream(inner) as fh:
        _refuse_repeated(path, pd.read_csv(fh, nrows=1, header=None, dtype=str, keep_default_na=False).iloc[0].tolist())
    with handle.open_input_stream(inner) as fh:
        frame = pd.read_csv(fh, dtype=str, keep_default_na=False, na_values=[""])
    return frame[[c for c in columns if c in frame.columns]]


def _delimiter_hint(path: str) -> str:
    """When the header is one field holding ';', tab or '|', the file was written with another delimiter."""
    try:
        with open(path, "rb") as fh:
            first = fh.readline(1 << 16).decode("utf-8", "replace")
    except OSError:
        return ""
    if "," in first:
        return ""
    for delimiter, name in ((";", "semicolons"), ("\t", "tabs"), ("|", "'|'")):
        if delimiter in first:
            return (
                f"\nhint: the header line is separated by {name}, but dpspec reads comma-separated files; "
                "convert the file to commas (or to Parquet)"
            )
    return ""


class _Problems:
    def __init__(self, path: str, table: str):
        self.path, self.table = path, table
        self.lines: list[str] = []

    def add(self, column: str, what: str, mask: np.ndarray, values: pd.Series):
        bad = np.flatnonzero(mask)
        if not len(bad):
            return
        shown = ", ".join(f"row {i + 1}: {shown_value(values.iloc[i])}" for i in bad[:SHOW])
        more = f" (and {len(bad) - SHOW} more)" if len(bad) > SHOW else ""
        self.lines.append(f"  column '{column}': {len(bad)} {what}: {shown}{more}")

    def raise_if_any(self):
        if self.lines:
            head = f"{self.path}: table '{self.table}' does not match the domain (rows count data rows from 1):"
            raise DataError("\n".join([head, *self.lines]))


def _as_text(series: pd.Series) -> pd.Series:
    """Codes as text without touching every row: categoricals only rename their categories."""
    if isinstance(series.dtype, pd.CategoricalDtype):
        categories = series.cat.categories.astype(str)
        if categories.is_unique:
            return series.cat.rename_categories(categories)
    if series.dtype == object:
        return series
    return series.astype(str).where(series.notna(), None)


def _arrow_codes(text: pd.Series, values: list[str]) -> np.ndarray | None:
    """Each value's position in `values` (-1 outside the set or missing), for Arrow-backed text;
    None for any other dtype. Converting Arrow strings to Python objects dominated the load."""
    dtype = text.dtype
    if not (isinstance(dtype, pd.StringDtype) and dtype.storage == "pyarrow"):
        return None

    arr = pa.array(text.array)
    return pc.index_in(arr, value_set=pa.array(values, type=arr.type)).fill_null(-1).to_numpy(zero_copy_only=False)


def _validate_column(col: ir.Column, series: pd.Series, problems: _Problems) -> pd.Series:
    ty = col.type
    missing = series.isna().to_numpy()
    if not col.nullable and missing.any():  # the object copy only when there is something to show
        problems.add(
            col.name, "missing values where none are allowed", missing, series.astype(object).where(~missing, "<empty>")
        )
    present = ~missing
    if ty.kind == "int":
        numeric = pd.to_numeric(series, errors="coerce")
        finite = numeric.notna().to_numpy()
        integral = np.zeros(len(series), dtype=bool)
        integral[finite] = np.equal(np.mod(numeric.to_numpy()[finite], 1), 0)
        problems.add(col.name, "values that are not whole numbers", present & ~integral, series)
        ok = present & integral
        values = numeric.to_numpy()
        out_of_range = np.zeros(len(series), dtype=bool)
        out_of_range[ok] = (values[ok] < ty.low) | (values[ok] > ty.high)
        problems.add(col.name, f"values outside {ty.low}..{ty.high}", out_of_range, series)
        if col.nullable:
            return numeric.astype("Int64")
        return numeric.fillna(0).astype(np.int64) if ok.all() else numeric
    if ty.kind == "bool":
        if series.dtype == bool:
            return series
        text = series.astype(str).str.strip().str.lower()
        is_true, is_false = text.isin(TRUE_WORDS).to_numpy(), text.isin(FALSE_WORDS).to_numpy()
        problems.add(col.name, "values that are not true/false", present & ~is_true & ~is_false, series)
        return (
            pd.Series(is_true, index=series.index)
            if not col.nullable
            else pd.Series(np.where(missing, None, is_true), index=series.index, dtype="boolean")
        )
    text = _as_text(series)
    if ty.kind == "enum" or (ty.kind == "category" and ty.values):  # listed, or read from a public key file
        codes = _arrow_codes(text, list(ty.values))
        if codes is not None:  # text read by the CSV parser: codes in one vectorized pass, no object copy
            outside = present & (codes < 0)
            problems.add(col.name, f"values outside {{{', '.join(ty.values)}}}", outside, series)
            return pd.Categorical.from_codes(codes, categories=list(ty.values))
        allowed = set(ty.values)
        outside = present & ~text.isin(allowed).to_numpy()
        problems.add(col.name, f"values outside {{{', '.join(ty.values)}}}", outside, series)
        if isinstance(text.dtype, pd.CategoricalDtype):
            return text.cat.set_categories(list(ty.values))
        # values outside the set were reported above; they become missing here
        return pd.Categorical(text.where(~outside, None), categories=list(ty.values))
    return text if isinstance(text.dtype, pd.CategoricalDtype) else text.astype("category")


def load_table(spec: ir.Spec, source: ir.DataSource, fingerprints: dict | None = None) -> pd.DataFrame:
    """Read and validate one table; the file is only ever opened for reading. With
    `fingerprints` (a dict), a source whose fingerprint came with the read (an uncompressed
    local CSV, hashed by the limit scan) has it stored under its resolved path."""
    table = materialized(spec, spec.domain.table(source.table))
    path = resolve_path(spec, source)
    fmt = "parquet" if is_parquet(path, source.format) else source.format
    frame = _read_raw(path, fmt, table, fingerprints)
    missing = [c for c in table.column_names if c not in frame.columns]
    if missing:
        raise missing_columns_error(path, table, missing, fmt)
    if not len(frame):
        raise empty_table_error(path, table)
    problems = _Problems(path, table.name)
    out = {}
    for col in table.columns:
        if pd.api.types.is_string_dtype(
            frame[col.name].dtype
        ):  # NUL bytes in text: a binary or corrupt file, not a code
            nul = frame[col.name].str.contains("\x00", regex=False, na=False).to_numpy()
            problems.add(col.name, "values holding NUL bytes (is the file binary or corrupt?)", nul, frame[col.name])
        out[col.name] = _validate_column(col, frame[col.name], problems)
    problems.raise_if_any()
    result = pd.DataFrame(out)
    _check_nesting(table, result, path)
    _check_link_bound(table, result, path, spec)
    return result


def missing_columns_error(path: str, table: ir.Table, missing: list[str], fmt: str) -> DataError:
    return DataError(
        f"{path}: table '{table.name}' needs column(s) {', '.join(missing)}, which the file does not have"
        + (_delimiter_hint(path) if fmt != "parquet" else "")
    )


def empty_table_error(path: str, table: ir.Table) -> DataError:
    return DataError(
        f"{path}: table '{table.name}' has no rows (the file holds only its header): there is "
        "nothing to protect, and dpspec does not publish a release of nothing"
    )


def declared_bounds(table: ir.Table, spec: ir.Spec | None = None) -> list[tuple[int, str]]:
    """(k, the declaration in words) for each bound the spec states on how many rows of `table`
    one parent unit holds: the domain's `in P by ID at most K`, and the unit's `holds at most K`
    (the group-privacy figure rests on both, so the data must keep them)."""
    out = []
    if table.parent and table.link and table.link_bound is not None:
        out.append(
            (table.link_bound, f"the domain declares 'in {table.parent} by {table.link} at most {table.link_bound}'")
        )
    unit = spec.unit if spec is not None else None
    bound = unit.bound if unit is not None else None
    if bound is not None and bound.finer == table.name and table.link and table.parent == unit.table:
        out.append(
            (bound.k, f"the unit declares 'unit {unit.table} : {unit.relation} holds at most {bound.k} {table.name}'")
        )
    return out


def _check_link_bound(table: ir.Table, frame: pd.DataFrame, path: str, spec: ir.Spec | None = None):
    """Each declared bound on the rows per parent unit (`declared_bounds`), checked against the data."""
    if not declared_bounds(table, spec) or table.link not in frame.columns:
        return
    check_link_sizes(table, frame.groupby(table.link, observed=True).size(), path, spec)


def check_link_sizes(table: ir.Table, sizes: pd.Series, path: str, spec: ir.Spec | None = None):
    """DataError if a link value (index of `sizes`) holds more rows than a declared bound."""
    for k, declared in declared_bounds(table, spec):
        over = sizes[sizes > k]
        if len(over):
            shown = ", ".join(f"{key} ({v} rows)" for key, v in over.head(SHOW).items())
            raise DataError(
                f"{path}: table '{table.name}': {len(over)} {table.parent} {table.link} value"
                + ("s hold" if len(over) > 1 else " holds")
                + f" more than {k} {table.name} rows, "
                f"the bound {declared}: {shown}"
            )


def _check_nesting(table: ir.Table, frame: pd.DataFrame, path: str):
    """`county : category in state`: each county code must sit in exactly one state."""
    for col in table.columns:
        parent = col.type.parent
        if col.type.kind != "category" or not parent or col.name not in frame.columns or parent not in frame.columns:
            continue
        pairs = frame[[parent, col.name]].drop_duplicates()
        counts = pairs.groupby(col.name, observed=True)[parent].nunique()
        bad = counts[counts > 1]
        if len(bad):
            code = bad.index[0]
            parents = sorted(map(str, pairs.loc[pairs[col.name] == code, parent].unique()))
            raise DataError(
                f"{path}: table '{table.name}': {col.name} '{code}' lies in more than one {parent} "
                f"({', '.join(parents[:SHOW])}); the domain says {col.name} is nested in {parent}"
                + (f" ({len(bad)} such {col.name} codes in all)" if len(bad) > 1 else "")
            )


def load_data(spec: ir.Spec) -> tuple[dict[str, pd.DataFrame], dict[str, str]]:
    """All declared tables, and each source file's SHA-256 (for the manifest)."""
    frames, hashes, read = {}, {}, {}
    for source in spec.data:
        frames[source.table] = load_table(spec, source, read)
        hashes[source.path] = fingerprint(spec, source, read)
    return frames, hashes


def fingerprint(spec: ir.Spec, source: ir.DataSource, read: dict) -> str:
    """A source's SHA-256: the one its read computed (`load_table(..., fingerprints=read)`), else streamed now."""
    path = resolve_path(spec, source)
    return read.get(path) or source_sha256(path)
