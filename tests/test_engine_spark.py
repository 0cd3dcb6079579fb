"""The Spark engine gives byte-identical results to the local engine (one local[2] session).

Skipped, with the reason, only when pyspark or a Java runtime is missing; each test runs as
few Spark jobs as it can, since starting a job costs seconds on a loaded machine.
"""

from __future__ import annotations

import pandas as pd
import pytest

from dpspec.engine import EngineRun, LocalEngine, UnitFailed
from tests.test_engine import people, shuffle_within

pytestmark = pytest.mark.slow  # every test here runs on the Spark session


@pytest.fixture
def spark(spark_session):
    from dpspec.engine.spark import SparkEngine

    return SparkEngine(session=spark_session)


def test_units_are_byte_identical_on_spark_under_any_partitioning(spark, spark_session):
    from dpspec.engine.spark import SparkEngine

    frame = people(n=2000)
    local = EngineRun(LocalEngine(), 2026).map_groups(frame, ["state", "size"], shuffle_within, stage="swap")
    repartitioned = SparkEngine(session=spark_session, partitions=5)
    shuffled = frame.sample(frac=1, random_state=1)
    on_spark = EngineRun(repartitioned, 2026).map_groups(shuffled, ["state", "size"], shuffle_within, stage="swap")
    assert on_spark.to_csv(index=False).encode() == local.to_csv(index=False).encode()
    assert list(on_spark.dtypes) == list(local.dtypes)


def test_a_plugin_on_the_contract_releases_the_same_bytes_on_both_engines(tmp_path, spark, stratified_plugin):
    import dpspec
    from dpspec.publish.output import write_result
    from tests.conftest import write_stratified_case

    path = write_stratified_case(str(tmp_path))
    on_local = dpspec.compile(path, seed=41, engine="local")
    on_spark = dpspec.compile(path, seed=41, engine=spark)
    assert on_spark.engine == "spark"
    write_result(on_local, str(tmp_path / "local"))
    write_result(on_spark, str(tmp_path / "spark"))
    files = sorted(p.name for p in (tmp_path / "local").iterdir() if p.suffix == ".csv")
    assert files
    for name in files:
        assert (tmp_path / "spark" / name).read_bytes() == (tmp_path / "local" / name).read_bytes()
    other_seed = dpspec.compile(path, seed=42, engine="local")
    assert not other_seed.published["histogram"].equals(on_local.published["histogram"])


def test_partitioned_parquet_read_and_counted_alike(tmp_path, spark):
    frame = people(n=1500).astype({"state": str})
    frame.to_parquet(tmp_path / "people", partition_cols=["state"])
    local, remote = LocalEngine(), spark
    a, b = local.read_parquet(str(tmp_path / "people")), remote.read_parquet(str(tmp_path / "people"))
    assert local.count(a, ["state", "size"]).equals(remote.count(b, ["state", "size"]))
    sizes = {"state": "str", "n": "int64", "total": "int64"}

    def totals(key, rows, rng):
        return pd.DataFrame(
            {"state": [key[0]], "n": [len(rows)], "total": [int(rows["value"].sum()) + int(rng.integers(0, 10))]}
        )

    on_local = EngineRun(local, 3).map_groups(a, ["state"], totals, stage="totals", schema=sizes)
    on_spark = EngineRun(remote, 3).map_groups(b, ["state"], totals, stage="totals", schema=sizes)
    assert on_spark.equals(on_local)
    assert on_local["n"].sum() == 1500


def test_a_failed_unit_on_spark_names_its_key(spark):
    def fails_on_ct(key, rows, rng):
        if key == ("CT",):
            raise ValueError("bad stratum")
        return rows

    with pytest.raises(UnitFailed, match=r"\('CT',\) failed: ValueError: bad stratum"):
        EngineRun(spark, 1).map_groups(people(n=300), ["state"], fails_on_ct, stage="check")


def test_a_mechanism_without_the_engine_gives_the_same_release(small_spec, spark):
    import dpspec

    a = dpspec.compile(str(small_spec), seed=9, engine="local")
    b = dpspec.compile(str(small_spec), seed=9, engine=spark)
    for name in a.published:
        assert a.published[name].to_csv(index=False) == b.published[name].to_csv(index=False)


def test_a_failed_spark_compile_names_the_key_and_leaves_no_output_set(tmp_path, spark, stratified_plugin):
    from tests.test_engine import compile_failing_unit

    compile_failing_unit(tmp_path, "--engine", "spark", "--spark-master", "local[2]")
