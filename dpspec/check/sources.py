"""Data sources that are directories: hive-partitioned Parquet (state=01/part-0.parquet, ...).

A directory is read as one table (partition columns as text, as the directory names spell them)
and fingerprinted by streaming every data file it holds, in a fixed order, through SHA-256: the
manifest then pins the exact bytes a release was computed from, as it does for a single file.
Files and folders whose names start with '.' or '_' (_SUCCESS, .crc files) are not data: Spark
and pyarrow skip them, and so does the fingerprint.
"""
from __future__ import annotations

import hashlib
import os

from dpspec.errors import DataError


def is_directory(path: str) -> bool:
    return os.path.isdir(path)


def is_parquet(path: str, declared_format: str) -> bool:
    """A source is Parquet when its name says so (.parquet, .pq) or when it is a directory."""
    return declared_format == "parquet" or is_directory(path)


def _hidden(name: str) -> bool:
    return name.startswith((".", "_"))


def data_files(path: str) -> list[str]:
    """The data files of a directory source, as paths relative to it, sorted (the fingerprint's order)."""
    out = []
    for root, dirs, files in os.walk(path):
        dirs[:] = sorted(d for d in dirs if not _hidden(d))
        rel = os.path.relpath(root, path)
        out.extend(os.path.normpath(os.path.join(rel, f)) for f in files if not _hidden(f))
    return sorted(out)


def directory_sha256(path: str) -> str:
    """SHA-256 over each data file's relative path, size and bytes, streamed a block at a time."""
    digest = hashlib.sha256(b"dpspec directory v1\x00")
    files = data_files(path)
    if not files:
        raise DataError(f"{path}: the directory holds no data files")
    for rel in files:
        name = rel.replace(os.sep, "/").encode("utf-8")
        full = os.path.join(path, rel)
        digest.update(len(name).to_bytes(8, "big") + name + os.path.getsize(full).to_bytes(8, "big"))
        _stream_into(digest, full)
    return digest.hexdigest()


def file_sha256(path: str) -> str:
    digest = hashlib.sha256()
    _stream_into(digest, path)
    return digest.hexdigest()


def _stream_into(digest, path: str) -> None:
    """Feed a file's bytes to `digest` a megabyte at a time (a table may not fit in memory)."""
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)


def source_sha256(path: str) -> str:
    """The fingerprint of a source: a file's SHA-256, or a directory's (`directory_sha256`)."""
    return directory_sha256(path) if is_directory(path) else file_sha256(path)


def read_parquet_directory(path: str, columns: list[str]):
    """A partitioned directory as one pandas frame, with those of `columns` that it has."""
    if not data_files(path):
        raise DataError(f"{path}: the directory holds no data files")
    dataset = parquet_dataset(path)
    present = set(dataset.schema.names)
    return dataset.to_table(columns=[c for c in columns if c in present]).to_pandas()


def parquet_dataset(path: str):
    """A pyarrow dataset of a Parquet file or hive-partitioned directory, partition values as text."""
    import pyarrow as pa
    import pyarrow.dataset as ds

    if not is_directory(path):  # a single file has no partitions
        return ds.dataset(path, format="parquet")
    probe = ds.dataset(path, format="parquet", partitioning="hive")
    names = probe.partitioning.schema.names if probe.partitioning is not None else []
    if not names:
        return probe
    text = ds.partitioning(pa.schema([(n, pa.string()) for n in names]), flavor="hive")
    return ds.dataset(path, format="parquet", partitioning=text)
