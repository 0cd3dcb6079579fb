"""Data sources that are directories: hive-partitioned Parquet (state=01/part-0.parquet, ...).

A directory is read as one table (partition columns as text, as the directory names spell them)
and fingerprinted by streaming every data file it holds, in a fixed order, through SHA-256: the
manifest then pins the exact bytes a release was computed from, as it does for a single file.
Files and folders whose names start with '.' or '_' (_SUCCESS, .crc files) are not data: Spark
and pyarrow skip them, and so does the fingerprint.

A source may also be a URI (hdfs://, s3a://, gs://, file://), as a cluster names its data: it is
listed, read and fingerprinted through pyarrow's filesystem for that scheme, so the manifest pins
its bytes as it pins a local file's. A location this machine cannot reach is a DataError saying
so, since dpspec never publishes a release it could not fingerprint.

A local folder is walked once, by `data_files`, and that list is both what is fingerprinted and
what is read (pyarrow and Spark get the files, not the folder): a device, pipe or socket in it
(or a link to one) is refused before a byte is read, and a folder reached twice (a symlink loop
such as `loop -> ..`, or two links to one folder) is refused rather than read twice.
"""

from __future__ import annotations

import hashlib
import os
import re
import stat

from dpspec import ir
from dpspec.errors import DataError
from dpspec.lazy import LazyModule

# heavy libraries, imported on first use
fs = LazyModule("pyarrow.fs", "fs", globals())
pa = LazyModule("pyarrow", "pa", globals())
ds = LazyModule("pyarrow.dataset", "ds", globals())

_URI = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")
# Hadoop's S3 connectors name the same buckets pyarrow reads as s3://
_SCHEMES = {"s3a": "s3", "s3n": "s3"}


def is_uri(path: str) -> bool:
    return bool(_URI.match(path))


def filesystem(path: str):
    """(pyarrow filesystem, path within it) for a URI; a DataError when it cannot be reached."""
    scheme, rest = path.split("://", 1)
    try:
        return fs.FileSystem.from_uri(f"{_SCHEMES.get(scheme.lower(), scheme)}://{rest}")
    except (OSError, ValueError, ImportError) as exc:  # unknown scheme, no libhdfs, no credentials
        raise DataError(
            f"{path}: cannot reach this location from here to read and fingerprint it "
            f"({str(exc).splitlines()[0] if str(exc) else type(exc).__name__}); give a path this "
            "machine can read, or run dpspec where the cluster's filesystem is mounted"
        ) from None


def local_path(path: str) -> str | None:
    """The local path a source names (a file:// URI's path), or None for a remote location."""
    if not is_uri(path):
        return path
    return path[len("file://") :] if path.lower().startswith("file://") else None


def resolve_path(spec: ir.Spec, source: ir.DataSource) -> str:
    """A source's path: relative to the spec's folder, unless absolute or a URI (hdfs://...)."""
    if os.path.isabs(source.path) or is_uri(source.path):
        return source.path
    return os.path.join(spec.base_dir, source.path)


def input_paths(spec) -> list[str]:
    """Every file a compile of `spec` reads: the spec itself and each data source."""
    paths = [spec.path] if spec.path else []
    local = (local_path(resolve_path(spec, source)) for source in spec.data)  # a remote URI holds no local folder
    return paths + [p for p in local if p is not None]


def is_directory(path: str) -> bool:
    if is_uri(path):
        handle, inner = filesystem(path)
        return handle.get_file_info(inner.rstrip("/") or "/").type == fs.FileType.Directory
    return os.path.isdir(path)


def is_parquet(path: str, declared_format: str) -> bool:
    """A source is Parquet when its name says so (.parquet, .pq) or when it is a directory."""
    return declared_format == "parquet" or is_directory(path)


def _hidden(name: str) -> bool:
    return name.startswith((".", "_"))


def data_files(path: str) -> list[str]:
    """The data files of a directory source, as paths relative to it, sorted (the fingerprint's order).

    Links are followed (a partition may live elsewhere), but each folder is entered once: one
    reached again is a loop or a second copy of the same rows, and is refused; so is anything that
    is not a regular file. Both checks use stat only, so a hostile folder is refused in bounded time."""
    if is_uri(path):
        return _uri_data_files(path)
    out: list[str] = []
    seen: dict[tuple[int, int], str] = {}
    stack = [(path, ".")]
    while stack:
        folder, rel = stack.pop()
        info = _stat(folder)
        key = (info.st_dev, info.st_ino)
        if key in seen:
            raise DataError(
                f"{path}: the folder {_shown_rel(rel)} is the folder {_shown_rel(seen[key])} reached again "
                "through a link (a symlink loop or a second link to the same data); its rows would be "
                "read twice. Remove the link"
            )
        seen[key] = rel
        try:
            names = sorted(os.listdir(folder))
        except OSError as exc:
            raise DataError(f"{path}: cannot list the folder {_shown_rel(rel)}: {exc.strerror or exc}") from None
        for name in names:
            if _hidden(name):
                continue
            full, inner = os.path.join(folder, name), os.path.normpath(os.path.join(rel, name))
            mode = _stat(full).st_mode
            if stat.S_ISDIR(mode):
                stack.append((full, inner))
            elif stat.S_ISREG(mode):
                out.append(inner)
            else:
                raise DataError(
                    f"{path}: {inner} is not a regular file ({_kind(mode)}"
                    f"{', through a link' if os.path.islink(full) else ''}); a data folder holds "
                    "only files and folders, and this one could block or never end when read"
                )
    return sorted(out)


def _stat(full: str) -> os.stat_result:
    try:
        return os.stat(full)
    except OSError as exc:  # a dangling link, a link loop (ELOOP), no permission
        raise DataError(f"{full}: cannot read it: {exc.strerror or exc}") from None


def _shown_rel(rel: str) -> str:
    return "(the source itself)" if rel == "." else rel


def _kind(mode: int) -> str:
    for test, name in (
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISFIFO, "a named pipe"),
        (stat.S_ISSOCK, "a socket"),
    ):
        if test(mode):
            return name
    return "not a file"


def local_files(path: str) -> list[str]:
    """The full paths of a local directory source's data files (what is read and fingerprinted)."""
    return [os.path.join(path, rel) for rel in data_files(path)]


def _uri_data_files(path: str) -> list[str]:
    handle, inner = filesystem(path)
    inner = inner.rstrip("/")
    out = []
    for info in handle.get_file_info(fs.FileSelector(inner, recursive=True)):
        rel = info.path[len(inner) :].lstrip("/")
        if info.type == fs.FileType.File and not any(_hidden(part) for part in rel.split("/")):
            out.append(rel.replace("/", os.sep))
    return sorted(out)


def _size(path: str) -> int:
    if is_uri(path):
        handle, inner = filesystem(path)
        return int(handle.get_file_info(inner).size)
    return os.path.getsize(path)


def directory_sha256(path: str) -> str:
    """SHA-256 over each data file's relative path, size and bytes, streamed a block at a time."""
    digest = hashlib.sha256(b"dpspec directory v1\x00")
    files = data_files(path)
    if not files:
        raise DataError(f"{path}: the directory holds no data files")
    for rel in files:
        name = rel.replace(os.sep, "/").encode("utf-8")
        full = path.rstrip("/") + "/" + rel.replace(os.sep, "/") if is_uri(path) else os.path.join(path, rel)
        digest.update(len(name).to_bytes(8, "big") + name + _size(full).to_bytes(8, "big"))
        _stream_into(digest, full)
    return digest.hexdigest()


def file_sha256(path: str) -> str:
    digest = hashlib.sha256()
    _stream_into(digest, path)
    return digest.hexdigest()


def _stream_into(digest, path: str) -> None:
    """Feed a file's bytes to `digest` a megabyte at a time (a table may not fit in memory)."""
    if is_uri(path):
        handle, inner = filesystem(path)
        try:
            stream = handle.open_input_stream(inner)
        except FileNotFoundError:
            raise DataError(f"{path}: the data file does not exist") from None
        with stream as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                digest.update(block)
        return
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
    """A pyarrow dataset of a Parquet file or hive-partitioned directory, partition values as text.

    A local directory is read from the files `data_files` lists (and fingerprints), never
    rediscovered by pyarrow, which would follow a symlink loop and read rows again."""
    directory = is_directory(path)
    where = {}
    if is_uri(path):
        where["filesystem"], path = filesystem(path)
    if not directory:  # a single file has no partitions
        return ds.dataset(path, format="parquet", **where)
    if not where:
        files = local_files(path)
        if not files:
            raise DataError(f"{path}: the directory holds no data files")
        where = {"partition_base_dir": path}
        source = files
    else:
        source = path
    probe = ds.dataset(source, format="parquet", partitioning=ds.partitioning(flavor="hive"), **where)
    names = probe.partitioning.schema.names if probe.partitioning is not None else []
    if not names:
        return probe
    text = ds.partitioning(pa.schema([(n, pa.string()) for n in names]), flavor="hive")
    return ds.dataset(source, format="parquet", partitioning=text, **where)
