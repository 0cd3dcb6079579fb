"""On Spark with the records split into several tabulating partitions, one partition (and only
one) emits the buckets' marker rows, so every declared unit is measured, the empty ones included,
and the release is the local one byte for byte: the path a national run takes, kept small here by
lowering the partition and bucket sizes."""

from __future__ import annotations

import pandas as pd
import pytest

import dpspec
from dpspec_safetab import plan as plan_mod
from dpspec_safetab import tabulate
from tests.test_safetab_engine_input import DATA, release, spec_reading, write_sources

GEOGRAPHY = DATA / "geography.csv"


def _unsuppressed(path: str) -> str:
    """The spec without zero suppression: every measured group has a row, so the release's keys
    show every unit it measured."""
    text = open(path).read()
    line = "  suppress_at: county, tract, place, aiannh\n"
    assert line in text
    open(path, "w").write(text.replace(line, ""))
    return path


@pytest.mark.slow  # a Spark compile: a few seconds on an idle machine (CI runs every test)
def test_several_partitions_give_one_marker_owner_and_the_local_release_with_every_empty_unit(
    tmp_path, spark_session, monkeypatch
):
    from dpspec.engine.spark import SparkEngine

    people = pd.read_parquet(DATA / "persons.parquet")
    counties = sorted(people["county"].astype(str).unique())[:3]
    people = people[people["county"].astype(str).isin(counties)].iloc[:600].reset_index(drop=True)
    monkeypatch.setattr(plan_mod, "ROWS_PER_PARTITION", 1)  # split by the finest level the data allow
    monkeypatch.setattr(plan_mod, "ROWS_PER_BUCKET", 100)  # several buckets per block
    owners = []
    real_owner = tabulate.marker_owner

    def owner(data, by):
        found = real_owner(data, by)
        owners.append((tuple(by), found, len(data.count(by)) if by else 1))
        return found

    monkeypatch.setattr(tabulate, "marker_owner", owner)
    inputs = tmp_path / "in"
    sources = write_sources(people, inputs)
    local = dpspec.compile(_unsuppressed(spec_reading(inputs, sources["csv"], name="csv")), seed=5)
    on_spark = dpspec.compile(
        _unsuppressed(spec_reading(inputs, sources["dir"], name="dir")),
        seed=5,
        engine=SparkEngine(session=spark_session, partitions=3),
    )
    spark_runs = [o for o in owners if o[0]]
    assert spark_runs, owners  # the Spark run split the records
    ((by, found, partitions),) = spark_runs
    assert partitions > 1 and found is not None, spark_runs  # several partitions, one owner
    assert release(on_spark, tmp_path / "spark") == release(local, tmp_path / "local")
    assert on_spark.release.internal == local.release.internal
    counts = on_spark.published["counts"]
    counts = counts.to_pandas() if hasattr(counts, "to_pandas") else counts
    declared = pd.read_csv(GEOGRAPHY, dtype=str)
    for level in ("county", "tract"):
        released = set(counts.loc[counts["geography"] == level, "geocode"].astype(str))
        assert released == set(declared[level]), level  # the empty declared units too
    assert len(set(declared["county"])) > len(counties)  # there were empty ones
