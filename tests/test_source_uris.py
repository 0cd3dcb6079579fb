"""Sources named by URI (issue 11): a cluster names its data hdfs://..., s3a://..., file://....

A URI source is read, listed and fingerprinted through pyarrow's filesystem for its scheme, so a
compile from `file:///abs/persons/` gives the same release and the same fingerprint as one from
the plain path; a location this machine cannot reach is a clear DataError, never a traceback,
and never a release without a fingerprint.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import dpspec
from dpspec.check.sources import directory_sha256, file_sha256, source_sha256
from dpspec.errors import DataError
from dpspec.publish.output import write_result
from tests.test_engine_data import SPEC, population, write_partitioned


def compile_from(tmp_path: Path, source: str, name: str, engine=None):
    folder = tmp_path / name
    folder.mkdir()
    spec = folder / "persons.dps"
    spec.write_text(SPEC.replace("SOURCE", source))
    result = dpspec.compile(str(spec), seed=5, engine=engine)
    out = tmp_path / f"{name}-out"
    write_result(result, str(out))
    manifest = json.loads((out / "manifest.json").read_text())
    return (out / "persons.csv").read_bytes(), manifest["data"]


def test_a_file_uri_directory_gives_the_plain_paths_release_and_fingerprint(tmp_path):
    data = write_partitioned(population(), tmp_path / "data" / "persons")
    plain = compile_from(tmp_path, str(data) + "/", "plain")
    uri = compile_from(tmp_path, data.as_uri() + "/", "uri")
    assert plain == uri
    assert source_sha256(data.as_uri()) == directory_sha256(str(data))


@pytest.mark.slow  # three compiles from three sources
def test_a_file_uri_parquet_file_and_csv_are_read_and_fingerprinted(tmp_path):
    frame = population(300)
    (tmp_path / "data").mkdir()
    parquet, csv = tmp_path / "data" / "persons.parquet", tmp_path / "data" / "persons.csv"
    frame.to_parquet(parquet, index=False)
    frame.to_csv(csv, index=False)
    assert source_sha256(parquet.as_uri()) == file_sha256(str(parquet))
    a = compile_from(tmp_path, parquet.as_uri(), "parquet")
    b = compile_from(tmp_path, csv.as_uri(), "csv")
    c = compile_from(tmp_path, str(csv), "plain")
    assert a[0] == b[0] == c[0]
    assert b[1] == c[1]  # the CSV's fingerprint, by URI or by path


def test_an_output_inside_a_file_uri_sources_folder_is_refused(tmp_path):
    from dpspec.publish.input_guard import UnsafeOutputError

    (tmp_path / "data").mkdir()
    population(50).to_csv(tmp_path / "data" / "persons.csv", index=False)
    spec = tmp_path / "persons.dps"
    spec.write_text(SPEC.replace("SOURCE", (tmp_path / "data" / "persons.csv").as_uri()))
    result = dpspec.compile(str(spec), seed=5)
    with pytest.raises(UnsafeOutputError, match="inside the folder holding the input"):
        write_result(result, str(tmp_path / "data" / "out"))


def test_an_unreachable_location_is_a_clear_data_error(tmp_path):
    """How fast it is said: benchmarks/bench_refusals.py."""
    with pytest.raises(DataError, match=r"hdfs://namenode\.invalid:8020/census/persons/: cannot reach this location"):
        compile_from(tmp_path, "hdfs://namenode.invalid:8020/census/persons/", "hdfs")
    with pytest.raises(DataError, match=r"nosuch://x/y/: cannot reach this location"):
        compile_from(tmp_path, "nosuch://x/y/", "scheme")


def test_spark_reads_a_file_uri_directory_as_the_local_engine_does(tmp_path, spark_session):
    from dpspec.engine.spark import SparkEngine

    data = write_partitioned(population(), tmp_path / "data" / "persons")
    local = compile_from(tmp_path, data.as_uri() + "/", "local")
    spark = compile_from(tmp_path, data.as_uri() + "/", "spark", engine=SparkEngine(session=spark_session))
    assert local == spark
