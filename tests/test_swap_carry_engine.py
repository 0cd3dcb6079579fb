"""Swaps carried along to a linked table as an engine join (issue 11): households swapped, persons
take their household's new county by `Engine.lookup`, from Parquet sources the engine holds.

A small synthetic population (400 households, about 1,000 persons) written as Parquet: the
release is the same bytes on the local engine and on Spark local[2], the same rows (as a
multiset) as the pandas `carry_along` path on the same data and seed, every data error says the
same thing on both engines, and on Spark only aggregates and the streamed release reach the driver.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from dpspec.errors import DataError
from tests.test_swap_engine_tables import release_bytes, spark, watched_spark
from tests.test_swap_plugin import INVARIANTS, PERSONS_INVARIANT, household_spec, make_households, make_persons

HOUSEHOLDS = 400
SEED = 7


def population(households: int = HOUSEHOLDS) -> tuple[pd.DataFrame, pd.DataFrame]:
    hh = make_households(households, 31)  # hhid 1..n in order: sorted by every column already
    return hh, make_persons(hh, 32).reset_index(drop=True)


def parquet_spec(folder: Path, hh: pd.DataFrame, persons: pd.DataFrame, releases: str = "") -> str:
    """The two-table spec with both sources as Parquet files in `folder`."""
    folder.mkdir(parents=True, exist_ok=True)
    household_spec(folder, hh, persons=persons, invariants=INVARIANTS + [PERSONS_INVARIANT])
    hh.to_parquet(folder / "households.parquet", index=False)
    persons.to_parquet(folder / "persons.parquet", index=False)
    path = folder / "households.dps"
    path.write_text(path.read_text().replace(".csv", ".parquet") + releases)
    return str(path)


def compile_on(spec, engine, seed: int = SEED, data=None):
    import dpspec

    return dpspec.compile(spec, seed=seed, engine=engine, data=data)


def as_text_rows(frame: pd.DataFrame) -> pd.DataFrame:
    """A frame's rows as text, sorted: equal exactly when the two multisets of rows are."""
    text = frame.astype(str)
    return text.sort_values(list(text.columns), kind="mergesort").reset_index(drop=True)


RELEASES = """
release {
  microdata households
  microdata persons
  count persons by county
}
"""


def test_local_and_spark_release_the_same_bytes_and_spark_sends_only_aggregates(tmp_path, spark_session, monkeypatch):
    """The same release bytes on both engines. On Spark every frame handed to the driver is a
    count (the checks' few values included), the engine is never asked for a whole table, and
    rows are streamed only while the release is written: the households' and the persons'."""
    from dpspec.api import StreamedTable

    hh, people = population()
    spec = parquet_spec(tmp_path / "in", hh, people, releases=RELEASES)
    local = compile_on(spec, "local")
    persons = local.release.outputs["persons"]
    assert isinstance(persons, StreamedTable) and persons.engine_bound  # the engine join, not pandas
    want = release_bytes(local, tmp_path / "local")
    assert set(want) == {"households.csv", "persons.csv", "count_persons_county.csv"}

    engine, collected, streamed = watched_spark(spark_session, monkeypatch, partitions=3)
    on_spark = compile_on(spec, engine)
    assert collected and all("count" in cols for cols, _ in collected), collected
    # the largest are a row per household (the loader's value set of hhid, the internal MAPE
    # table by county x hhid x tenure); the invariants by hhid (x age) are compared on the engine
    assert max(n for _, n in collected) <= len(hh), collected
    assert not streamed  # nothing streamed before the release is written
    assert release_bytes(on_spark, tmp_path / "spark") == want
    assert streamed
    assert on_spark.facts == local.facts and on_spark.release.internal == local.release.internal
    assert "count_persons_county" in local.release.internal["run"]["tables"]  # MAPE from engine counts
    micro = pd.read_csv(tmp_path / "local" / "persons.csv")
    assert len(micro) == len(people) and len(pd.read_csv(tmp_path / "local" / "households.csv")) == len(hh)
    assert micro.equals(micro.sort_values(list(micro.columns), kind="mergesort").reset_index(drop=True))


def test_the_same_rows_as_the_pandas_carry_along(tmp_path):
    """The pandas path (`carry_along`, frames given to compile) on the same rows and seed
    releases the same multiset of households and of persons: units see their stratum in the
    same order (row number = sorted by every column here) and draw from the same keyed streams."""
    from dpspec.check.data import load_data

    import dpspec

    hh, persons = population()
    spec = parquet_spec(tmp_path / "in", hh, persons)
    on_engine = compile_on(spec, "local")
    frames, _ = load_data(dpspec.load(spec))
    from_pandas = compile_on(spec, "local", data=frames)
    assert isinstance(from_pandas.release.outputs["persons"], pd.DataFrame)  # really the old path
    for name in ("households", "persons"):
        assert as_text_rows(on_engine.published[name]).equals(as_text_rows(from_pandas.published[name])), name
    assert on_engine.release.internal["run"] == from_pandas.release.internal["run"]
    out_hh, out_p = on_engine.published["households"], on_engine.published["persons"]
    joined = out_p.merge(out_hh[["hhid", "county"]], on="hhid", suffixes=("", "_household"))
    assert len(joined) == len(persons)
    assert (joined["county"].astype(str) == joined["county_household"].astype(str)).all()
    moved = out_hh.sort_values("hhid")["county"].astype(str).to_numpy() != hh["county"].to_numpy()
    assert moved.sum() > 100  # rate 1/2: the swap moved many households, and their persons with them


def test_persons_from_csv_join_the_households_the_engine_holds(tmp_path):
    """Households from Parquet (held by the engine), persons from CSV (read in this process):
    the persons still take their household's county by the engine's lookup, same rows."""
    hh, persons = population()
    spec = parquet_spec(tmp_path / "in", hh, persons)
    mixed = Path(spec).with_name("mixed.dps")
    mixed.write_text(Path(spec).read_text().replace("persons.parquet", "persons.csv"))
    both_parquet, one_csv = compile_on(spec, "local"), compile_on(str(mixed), "local")
    assert type(one_csv.release.outputs["persons"]).__name__ == "StreamedTable"  # joined by the engine
    for name in ("households", "persons"):
        assert as_text_rows(one_csv.published[name]).equals(as_text_rows(both_parquet.published[name])), name


def orphan(hh, persons):
    """Three persons of a household that does not exist (hhid 999999), one of 888888."""
    extra = pd.DataFrame({"hhid": [999999, 999999, 999999, 888888], "county": ["a1"] * 4, "age": [30, 31, 32, 33]})
    return hh, pd.concat([persons, extra], ignore_index=True)


def disagreeing(hh, persons):
    """Two persons whose county is not their household's ('c1', a declared county no household is in)."""
    persons = persons.copy()
    persons.loc[persons.index[:2], "county"] = "c1"
    return hh, persons


def duplicated(hh, persons):
    """Two household rows with hhid 5 (and two with hhid 9)."""
    hh = hh.copy()
    hh.loc[hh["hhid"] == 6, "hhid"] = 5
    hh.loc[hh["hhid"] == 10, "hhid"] = 9
    return hh.sort_values(list(hh.columns), kind="mergesort").reset_index(drop=True), persons


def expected(case, hh, persons) -> str:
    """The message, written out from the data (the first value and the counts)."""
    if case is orphan:
        return (
            "column 'hhid': value 888888 (1 row) matches no parent record; 4 rows in all match none: "
            "888888 (1 row), 999999 (3 rows)"
        )
    if case is disagreeing:
        rows = persons.iloc[:2].merge(hh[["hhid", "county"]], on="hhid", suffixes=("", "_hh"))
        pairs = sorted(zip(rows["county"], rows["county_hh"]))
        first = [p for p in pairs if p == pairs[0]]
        text = f"column 'county': value 'c1' ({len(first)} row{'s' if len(first) > 1 else ''}) differs from its parent's {pairs[0][1]!r} before the swap"
        if len(first) < 2:
            text += f"; 2 rows in all differ: 'c1' vs {pairs[0][1]!r} (1 row), 'c1' vs {pairs[1][1]!r} (1 row)"
        return text
    return "column 'hhid': key 5 names more than one parent record (2 records); 2 keys do: 5 (2 records), 9 (2 records)"


@pytest.mark.parametrize("case", [orphan, disagreeing, duplicated], ids=["no parent", "disagrees", "two parents"])
def test_each_data_error_says_the_same_on_both_engines(tmp_path, spark_session, case):
    hh, persons = case(*population(120))
    spec = parquet_spec(tmp_path / "in", hh, persons)
    want = expected(case, hh, persons)
    for engine in ("local", spark(spark_session, partitions=2)):
        with pytest.raises(DataError) as err:
            compile_on(spec, engine)
        assert str(err.value) == want, engine
    # the pandas path (CSV sources) refuses the same data, with a row number instead of counts
    csv_spec = Path(spec).with_name("csv.dps")
    csv_spec.write_text(Path(spec).read_text().replace(".parquet", ".csv"))
    hh.to_csv(csv_spec.parent / "households.csv", index=False)
    persons.to_csv(csv_spec.parent / "persons.csv", index=False)
    with pytest.raises(
        DataError,
        match=want.split(":")[0]
        + ".*"
        + (
            "matches no parent"
            if case is orphan
            else "differs from its parent"
            if case is disagreeing
            else "names more than one parent"
        ),
    ):
        compile_on(str(csv_spec), "local")


# ---- the engine op itself ------------------------------------------------------------------


def lookup_case():
    """Children with text keys (one missing, matching the parent with a missing key), a child
    without a parent, and a child disagreeing with its parent."""
    parent = pd.DataFrame({"k": ["a", "b", "c", None], "v": [1, 2, 3, 4], "was": ["x", "y", "z", "w"]})
    child = pd.DataFrame(
        {"k": ["b", "a", "a", None, "c"], "v": [0, 0, 0, 0, 0], "was": ["y", "x", "x", "w", "z"], "n": [1, 2, 3, 4, 5]}
    )
    return child, parent


def test_lookup_joins_and_checks_alike_on_both_engines(spark_session):
    from dpspec.engine import EngineRun, LocalEngine

    child, parent = lookup_case()
    inputs = (child.copy(), parent.copy())
    local, on_spark = EngineRun(LocalEngine(), 1), EngineRun(spark(spark_session, partitions=2), 1)
    results = {}
    for run in (local, on_spark):
        table, checks = run.lookup(child, "k", parent, {"v": "v"}, {"was": "was"})
        assert checks.ok and checks.mismatched_rows == {"was": 0}
        results[run.name] = pd.concat(run.stream(table), ignore_index=True)
        run.drop(table)
    assert child.equals(inputs[0]) and parent.equals(inputs[1])  # inputs never modified
    assert results["local"].equals(results["spark"])
    assert results["local"].to_dict("list") == {
        "k": ["a", "a", "b", "c", None],
        "v": [1, 1, 2, 3, 4],
        "was": ["x", "x", "y", "z", "w"],
        "n": [2, 3, 1, 5, 4],
    }

    bad_child = pd.concat(
        [child, pd.DataFrame({"k": ["q", "q", "p"], "v": [0] * 3, "was": ["x", "y", "y"], "n": [6, 7, 8]})],
        ignore_index=True,
    )
    bad_child.loc[0, "was"] = "nope"
    twice = pd.concat([parent, parent.iloc[[1, 2, 2]]], ignore_index=True)
    for table_child, table_parent in ((bad_child, parent), (child, twice)):
        found = []
        for run in (local, on_spark):
            table, checks = run.lookup(table_child, "k", table_parent, {"v": "v"}, {"was": "was"})
            assert table is None and not checks.ok
            found.append(checks)
        a, b = found
        assert (a.duplicate_keys, a.unmatched_rows, a.mismatched_rows) == (
            b.duplicate_keys,
            b.unmatched_rows,
            b.mismatched_rows,
        )
        for x, y in ((a.duplicates, b.duplicates), (a.unmatched, b.unmatched)):
            assert (x is None and y is None) or x.equals(y)
        assert a.mismatched.keys() == b.mismatched.keys() and all(
            a.mismatched[c].equals(b.mismatched[c]) for c in a.mismatched
        )
    assert found[0].duplicates.to_dict("list") == {"k": ["b", "c"], "count": [2, 3]} and found[0].duplicate_keys == 2


def test_counts_differ_where_the_tables_live(spark_session):
    """`counts_differ`: the cells of a count in which two tables differ, compared as text with
    missing values equal, the same number on both engines (what compile's invariant checks use)."""
    from dpspec.engine import LocalEngine

    a = pd.DataFrame({"k": ["x", "y", None, "x"], "n": [1, 2, 3, 1], "f": [True, False, True, True]})
    b = pd.DataFrame({"k": ["x", "y", None, "z"], "n": [1, 2, 3, 1], "f": [True, False, True, True]})
    for engine in (LocalEngine(), spark(spark_session, partitions=2)):
        assert engine.counts_differ(a, a, ["k", "n"]) == 0
        assert engine.counts_differ(a, b, ["k", "n"]) == 2  # ("x", 1): 2 vs 1 rows; ("z", 1): 0 vs 1
        assert engine.counts_differ(a, b, ["n", "f"]) == 0 and engine.counts_differ(a, b, []) == 0
        assert engine.counts_differ(a, b.iloc[:3], []) == 1
