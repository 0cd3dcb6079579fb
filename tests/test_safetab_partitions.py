"""SafeTab tabulates where the records live (issue 11: "SafeTab per (geography, group) cell"):
partitions of the records count their share of every block, the engine sums the shares, and
batches of geography units measure the sums. The release must not depend on how the records are
partitioned nor on how geography units are batched; bad records are still stopped on the driver
before any unit runs; and on Spark the driver receives counts bounded by the codes and the
design, never one row per person or per combination of a person's columns."""

from __future__ import annotations

import attrs
import numpy as np
import pandas as pd
import pytest

import dpspec
from dpspec.check.checker import check
from dpspec.engine import LocalEngine
from dpspec.errors import DataError
from dpspec.run.compiler import compile_spec
from dpspec_safetab import geography
from dpspec_safetab import plan as plan_mod
from dpspec_safetab import records, tabulate
from dpspec_safetab.design import variable_values
from dpspec_safetab.truths import TRUTH_SCHEMA, partition_truths
from tests.safetab_helpers import P_SPEC
from tests.test_safetab_cells import SEED, counts_of, persons  # noqa: F401 (persons: a fixture)
from tests.test_safetab_engine_input import DATA, release, spec_reading, write_sources

KEYS = ["block", "bucket", "geocode", "group", "cell"]


def run_plan(persons, buckets: int = 3):
    """The plan of a run of the bundled SafeTab-P on `persons`, as `tabulate.run` makes it."""
    spec = dpspec.load(str(P_SPEC))
    checked = check(spec)
    mech, params = checked.mechanism, checked.params
    design = mech.design(spec, params)
    table = mech._iteration_table(spec, params)
    inputs = records.Inputs(
        persons, tuple(params["race_codes"]), params["ethnicity_code"], variable_values(spec, params, design)
    )
    blocks = plan_mod.measured_blocks(design)
    fanouts = {
        (lv, design.granularity(g)): tabulate.fanout_of(design, table, lv, design.granularity(g))[0] for g, lv in blocks
    }
    units = geography.declared_units(spec, params["table"], [g for g, _ in blocks])
    return plan_mod.Plan(
        design,
        table,
        inputs.race_columns,
        inputs.eth_column,
        inputs.variables,
        "persons",
        tuple(tabulate.read_columns(design, inputs)),
        blocks,
        fanouts,
        buckets,
        1,
        plan_mod.declared_units(units, buckets),
    )


def summed(parts: list[pd.DataFrame]) -> pd.DataFrame:
    return LocalEngine().total(pd.concat(parts, ignore_index=True), KEYS)


@pytest.mark.slow  # SafeTab over many partitions of the records
def test_any_partition_of_the_records_sums_to_the_same_counts(persons):
    """By county (what a run on Spark does), by tract, and at random: the summed shares equal
    one pass over all records, row for row, and the one partition that owns the markers emits
    one per (block, bucket) holding declared units, whichever records it holds."""
    plan = run_plan(persons)
    one_pass = partition_truths((), persons, None, plan)
    assert not one_pass.duplicated(KEYS).any()  # one pass's counts are the sums: a run skips `total`
    whole = summed([one_pass])
    rng = np.random.default_rng(0)
    owned = attrs.evolve(plan, marker_owner=(0,))
    for labels in (persons["county"], persons["tract"], pd.Series(rng.integers(0, 7, len(persons)))):
        parts = [
            partition_truths((i,), rows.reset_index(drop=True), None, owned)
            for i, (_, rows) in enumerate(persons.groupby(labels.to_numpy(), sort=False))
        ]
        pd.testing.assert_frame_equal(summed(parts), whole)
    assert len(whole) > 5000 and list(whole.columns) == [*KEYS, "count"]
    tract_block = next(b for b, (g, _) in enumerate(plan.blocks) if g == "tract")
    markers = whole[(whole["block"] == tract_block) & (whole["group"] == -1)]
    codes, buckets = plan.units["tract"]
    assert sorted(markers["bucket"]) == sorted(set(buckets.tolist())) and (markers["count"] == 0).all()


def test_partition_truths_has_the_declared_columns_even_when_empty(persons):
    plan = run_plan(persons)
    out = partition_truths((), persons.iloc[:0], None, plan)
    assert list(out.columns) == list(TRUTH_SCHEMA)


@pytest.mark.slow  # SafeTab in several bucketings
@pytest.mark.parametrize("buckets", [1, 7])
def test_batching_geography_units_into_buckets_changes_nothing(persons, buckets, monkeypatch):
    release_default = counts_of(persons)
    monkeypatch.setattr(plan_mod, "bucket_count", lambda rows: buckets)
    pd.testing.assert_frame_equal(counts_of(persons), release_default)


def test_buckets_are_a_function_of_the_geocode_only():
    codes = np.array(["25001", "25003", "25005", "US"], dtype=object)
    a = plan_mod.buckets_of(codes, 5)
    assert a.tolist() == plan_mod.buckets_of(codes[::-1], 5)[::-1].tolist()
    assert ((a >= 0) & (a < 5)).all() and plan_mod.buckets_of(codes, 1).tolist() == [0, 0, 0, 0]


def test_the_partition_column_is_the_finest_level_with_enough_records_per_unit():
    spec = dpspec.load(str(P_SPEC))
    checked = check(spec)
    design = checked.mechanism.design(spec, checked.params)
    distinct = {"state": 1, "county": 14, "tract": 405, "place": 79}
    assert plan_mod.partition_column(design, distinct, 1_000_000) == ["county"]
    assert plan_mod.partition_column(design, distinct, 10_000_000) == ["tract"]
    assert plan_mod.partition_column(design, distinct, 30_000) == ["state"]
    assert plan_mod.partition_column(design, {"state": 3}, 30_000) == []  # never a crosscut such as places


@pytest.mark.slow  # SafeTab in several bucketings
def test_the_figures_and_facts_add_up_over_buckets(persons, monkeypatch):
    """Units measured and details chosen, summed over buckets, equal one bucket's."""
    spec = dpspec.load(str(P_SPEC))

    def internals(buckets):
        monkeypatch.setattr(plan_mod, "bucket_count", lambda rows: buckets)
        res = compile_spec(spec, data={"persons": persons}, seed=SEED, audit=False)
        return res.release.facts["design"], res.release.internal

    one, seven = internals(1), internals(7)
    assert one == seven
    facts = one[0]
    tract = next(f for f in facts if f["geography"] == "tract" and f["level"] == 1)
    assert tract["units"] == persons["tract"].nunique()
    # at a coarse geography every group is adaptive: each (unit, group) chose exactly one rung
    assert sum(tract["chosen"].values()) == tract["units"] * tract["groups"]
    errors = one[1]["errors"]
    assert {e["role"] for e in errors} >= {"total", "detailed-only total", "sum of cells", "cell"}


def test_a_bad_record_stops_the_run_before_any_unit_runs(persons, monkeypatch):
    bad = persons.copy()
    bad["QRACE1"] = bad["QRACE1"].astype(object)
    bad.loc[123, "QRACE1"] = "0042"
    ran = []
    monkeypatch.setattr(LocalEngine, "map_groups", lambda self, *a, **k: ran.append(1))
    with pytest.raises(DataError, match="row 124: column 'QRACE1' holds the code '0042'"):
        counts_of(bad)
    assert not ran


def test_on_spark_the_driver_gets_no_row_per_person_nor_per_combination(tmp_path, counts_only_spark):
    """Every person distinct: compiled on Spark from a partitioned directory, the largest frame
    the driver collects is far below the number of distinct combinations of the columns SafeTab
    reads (what it collected before the tabulation ran on the executors), and the release is the
    local one from CSV, byte for byte."""
    people = pd.read_parquet(DATA / "persons.parquet").iloc[:3000]
    columns = tabulate.read_columns(
        run_plan(people).design,
        records.Inputs(people, ("QRACE1",), "QSPAN", {v: [] for v in ("QSEX", "AGE4", "AGE9", "AGE23")}),
    )
    combos = people.groupby([*columns, *(f"QRACE{i}" for i in range(2, 9))], dropna=False, observed=True).ngroups
    inputs = tmp_path / "in"
    sources = write_sources(people, inputs)
    local = dpspec.compile(spec_reading(inputs, sources["csv"], name="csv"), seed=SEED)
    engine, collected = counts_only_spark
    on_spark = dpspec.compile(spec_reading(inputs, sources["dir"], name="dir"), seed=SEED, engine=engine)
    assert combos > 2000 and collected and max(collected) < combos / 2, (combos, collected)
    assert release(on_spark, tmp_path / "spark") == release(local, tmp_path / "local")
    assert on_spark.release.internal == local.release.internal
