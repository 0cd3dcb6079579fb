"""`Engine.total` (a map-then-sum's sum) and `map_groups(columns=, ordered=False)`: the same
results on the local engine and on Spark, whatever the partitioning and row order."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from dpspec.engine import EngineRun, LocalEngine


def shares(n: int = 3000, seed: int = 0) -> pd.DataFrame:
    """Partial counts as units emit them: repeated keys, a missing text key, a categorical."""
    rng = np.random.default_rng(seed)
    geo = rng.choice(np.array(["25001", "25003", "US", None], dtype=object), n)
    return pd.DataFrame(
        {
            "block": rng.integers(0, 3, n),
            "geocode": pd.Series(geo, dtype=object),
            "group": rng.integers(-1, 4, n),
            "count": rng.integers(0, 50, n),
        }
    )


def expected(frame: pd.DataFrame, by: list) -> pd.DataFrame:
    """The sums computed row by row in Python (no pandas grouping)."""
    sums: dict = {}
    for row in frame.itertuples(index=False):
        key = tuple(getattr(row, c) for c in by)
        sums[key] = sums.get(key, 0) + int(row.count)
    keys = sorted(sums, key=lambda k: tuple((v is None, v if v is not None else "") for v in k))
    columns = list(zip(*[(*k, sums[k]) for k in keys]))
    return pd.DataFrame(
        {c: pd.Series(v, dtype=object if c == "geocode" else "int64") for c, v in zip([*by, "count"], columns)}
    )


def test_local_total_sums_per_key_sorted_missing_last():
    frame = shares()
    got = LocalEngine().total(frame, ["block", "geocode", "group"])
    pd.testing.assert_frame_equal(got, expected(frame, ["block", "geocode", "group"]))
    assert int(got["count"].sum()) == int(frame["count"].sum())
    kept = LocalEngine().total(frame, ["block", "geocode", "group"], collect=False)
    pd.testing.assert_frame_equal(LocalEngine().to_pandas(kept), got)


def test_local_total_merges_categories_equal_once_cast():
    frame = pd.DataFrame({"k": pd.Categorical([1, "1", 2], categories=[1, "1", 2]), "count": [2, 3, 4]})
    got = LocalEngine().total(frame, ["k"])
    assert got.to_dict("list") == {"k": ["1", "2"], "count": [5, 4]}


def test_total_without_keys_is_the_grand_total():
    frame = shares(50)
    assert LocalEngine().total(frame, [])["count"].tolist() == [int(frame["count"].sum())]


def test_map_groups_unordered_reads_only_the_named_columns_and_keeps_outputs():
    frame = shares().assign(extra="x")
    seen = []

    def unit(key, rows, rng):
        seen.append(list(rows.columns))
        return pd.DataFrame({"block": [key[0]], "count": [int(rows["count"].sum())]})

    run = EngineRun(LocalEngine(), 1)
    out = run.map_groups(
        frame,
        ["block"],
        unit,
        stage="s",
        schema={"block": "int64", "count": "int64"},
        collect=False,
        columns=["count"],
        ordered=False,
    )
    assert all(cols == ["block", "count"] for cols in seen)
    assert LocalEngine().to_pandas(out)["count"].tolist() == frame.groupby("block")["count"].sum().tolist()
    with pytest.raises(ValueError, match="collect=False"):
        run.map_groups(frame, ["block"], unit, stage="s", ordered=False)


def test_spark_total_and_unordered_units_equal_the_local_engine(spark_session):
    from dpspec.engine.spark import SparkEngine

    frame = shares()
    spark = SparkEngine(session=spark_session, partitions=4)
    by = ["block", "geocode", "group"]
    pd.testing.assert_frame_equal(spark.total(frame.sample(frac=1, random_state=2), by), LocalEngine().total(frame, by))

    def unit(key, rows, rng):  # a partial count per (geocode, group) of one block: a map-then-sum
        out = rows.groupby(["geocode", "group"], dropna=False)["count"].sum().reset_index()
        return out.assign(block=key[0])[["block", "geocode", "group", "count"]]

    schema = {"block": "int64", "geocode": "str", "group": "int64", "count": "int64"}
    results = []
    for engine in (LocalEngine(), spark):
        run = EngineRun(engine, 3)
        held = run.map_groups(
            frame,
            ["block"],
            unit,
            stage="s",
            schema=schema,
            collect=False,
            columns=["geocode", "group", "count"],
            ordered=False,
        )
        summed = run.total(held, by, collect=False)
        results.append(pd.concat(list(run.stream(summed, order_by=by)), ignore_index=True))
        run.drop(summed)
        run.drop(held)
    pd.testing.assert_frame_equal(results[1], results[0])
    pd.testing.assert_frame_equal(results[0], expected(frame, by))


def test_spark_counts_every_column_group_in_one_pass_as_count_gives_each(spark_session, tmp_path):
    """`count_groups` (a loader's counts of every column group, by grouping sets in one job)
    equals one `count` per group, types and all: missing integers, booleans and texts, an id
    above 2**53 (which a float would round), a group named twice, a nested chain of columns."""
    from dpspec.engine.spark import SparkEngine

    rng = np.random.default_rng(5)
    n = 400
    frame = pd.DataFrame(
        {
            "county": rng.choice(np.array(["001", "003", None], dtype=object), n),
            "tract": rng.choice(np.array(["a", "b", "c"], dtype=object), n),
            "age": pd.Series(rng.integers(0, 5, n), dtype="Int64").where(rng.random(n) > 0.1, pd.NA),
            "flag": pd.Series(rng.random(n) > 0.5, dtype="boolean").where(rng.random(n) > 0.1, pd.NA),
            "id": (2**53 + rng.integers(0, 7, n)).astype(np.int64),
        }
    )
    frame.to_parquet(tmp_path / "t.parquet", index=False)
    spark = SparkEngine(session=spark_session, partitions=3)
    table = spark.read_parquet(str(tmp_path / "t.parquet"))
    groups = [["county", "tract"], ["age"], ["flag"], ["id"], ["age"]]
    one_pass = spark.count_groups(table, groups)
    jobs = [spark.count(table, by) for by in groups]
    for by, got, want in zip(groups, one_pass, jobs):
        pd.testing.assert_frame_equal(got, want, obj=str(by))
    assert one_pass[3]["id"].max() == 2**53 + 6 and one_pass[3]["count"].sum() == n
    assert one_pass[1]["age"].isna().any() and one_pass[2]["flag"].isna().any()
