"""Equality to a product already released (equality.py): a marginal of the release reproduces it
at every block, as the DHC persons file reproduces the P.L. 94 block histogram."""

import os
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest

from dpspec.check.checker import check
from dpspec.errors import DataError, SpecError
from tests.topdown_geography import parse, write_declared
from dpspec_topdown.run.topdown import run_topdown
from dpspec_topdown.design import Design
from dpspec_topdown.run.context import Records, RunContext
from dpspec_topdown.synthetic import LEVELS, PL94_VARIABLES, PRODUCTION_LEVEL_SHARES, generate_population, pl94_strategy

ALL_LEVELS = ["nation"] + LEVELS
SHARES = dict(PRODUCTION_LEVEL_SHARES)
BY = ["block", "hhgq", "votingage"]


@pytest.fixture(scope="module")
def released():
    """A first release (the 'P.L. 94' product) and its block x hhgq x votingage counts."""
    persons = generate_population(2000, 80, seed=46)
    first = run_topdown(
        persons,
        Design(ALL_LEVELS, PL94_VARIABLES, pl94_strategy(tuple(SHARES)), 1, SHARES, "hamming", [("state", ())]),
        RunContext(np.random.default_rng(0), workers=1),
    )
    counts = first.microdata.groupby(BY, observed=True).size().rename("count").reset_index()
    return persons, counts


def _second(persons, counts, seed=1, rho=Fraction(1, 20)):
    return run_topdown(
        Records(persons, equalities=[("pl94", ("hhgq", "votingage"), counts)]),
        Design(ALL_LEVELS, PL94_VARIABLES, pl94_strategy(tuple(SHARES)), rho, SHARES, "hamming", [("state", ())]),
        RunContext(np.random.default_rng(seed), workers=1),
    )


def _by_block(frame, counts):
    got = frame.groupby(BY, observed=True).size()
    want = counts.set_index(BY)["count"]
    got.index = got.index.set_levels([lv.astype(str) for lv in got.index.levels])
    want.index = want.index.set_levels([lv.astype(str) for lv in want.index.levels])
    return got.reindex(want.index.union(got.index), fill_value=0), want.reindex(
        want.index.union(got.index), fill_value=0
    )


def test_the_release_reproduces_the_released_product(released):
    persons, counts = released
    for seed in (1, 2):
        got, want = _by_block(_second(persons, counts, seed).microdata, counts)
        assert (got == want).all()
    # and the product is not the confidential data: holding to it moved the release off the truth
    truth, _ = _by_block(persons, counts)
    assert (truth.reindex(want.index, fill_value=0) != want).any()


def test_a_product_that_contradicts_an_invariant_is_a_data_error(released):
    persons, counts = released
    short = counts.copy()
    short.loc[short.index[0], "count"] += 1  # one person too many in the state
    with pytest.raises(
        DataError,
        match=r"equal_to 'pl94'.*disagrees with the invariant 'total' at state '01'.*"
        r"released 2001, invariant 2000",
    ):
        _second(persons, short)


def test_a_product_with_an_unknown_block_or_value_is_a_data_error(released):
    persons, counts = released
    extra = pd.concat([counts, pd.DataFrame({"block": ["nowhere"], "hhgq": [0], "votingage": [1], "count": [1]})])
    with pytest.raises(DataError, match="persons in block 'nowhere', which holds no one"):
        _second(persons, extra)
    bad = counts.assign(votingage=counts["votingage"].astype(int).replace({1: 7}))
    with pytest.raises(DataError, match="votingage = 7 in the released table is not one of"):
        _second(persons, bad)


SPEC = """spec "equality"
domain d "d" {
  stage edited
  geography g { state > county > block }
  table persons unit person {
    state : category
    county : category in state
    block : category in county
    hhgq : {0, 1}
    sex : {0, 1}
  }
  table pl94 unit person {
    state : category
    county : category in state
    block : category in county
    hhgq : {0, 1}
  }
}
PUBLIC
unit persons : hamming
premetric zcdp
mechanism topdown {
  table: persons
  variables: hhgq, sex
  rho: 1
  equal_to: {
    pl94_block: {
      table: TABLE
      query: "hhgq"
    }
  }
  levels: { nation: 1/4  state: 1/4  county: 1/4  block: 1/4 }
  queries: { total: 1/2  detailed: 1/2 }
}
"""
DECLARED = 'public {\n  count pl94 by block, hhgq released "the 2020 P.L. 94-171 file"\n}'


def test_equal_to_misuse_is_a_located_spec_error():
    good = SPEC.replace("PUBLIC", DECLARED).replace("TABLE", "pl94")
    check(parse(good, "s.dps"))
    # each at the setting it is about: the table's name, or the factor of the query the table lacks
    line = SPEC.splitlines().index("      table: TABLE") + 1
    with pytest.raises(SpecError, match=f"s.dps:{line}:14:.*no public statistic of 'pl94' is declared: declare it"):
        check(parse(SPEC.replace("PUBLIC", "").replace("TABLE", "pl94"), "s.dps"))
    line = good.splitlines().index("      table: pl94") + 1
    with pytest.raises(SpecError, match=f"s.dps:{line}:14:.*'persons', which must be a second table"):
        check(parse(SPEC.replace("PUBLIC", DECLARED).replace("TABLE", "persons"), "s.dps"))
    with pytest.raises(
        SpecError,
        match=f"s.dps:{line + 1}:22:.*'pl94', which must be a second table of the domain "
        r"with columns block, hhgq, sex .*\('pl94' has no column sex\)",
    ):
        check(parse(good.replace('query: "hhgq"', 'query: "hhgq * sex"'), "s.dps"))


def _equality_spec(tmp_path):
    """A spec whose persons and released product are Parquet files beside it: (its text, its
    path, the product)."""
    rng = np.random.default_rng(5)
    n = 600
    block = rng.integers(0, 12, n)
    persons = pd.DataFrame(
        {
            "state": "01",
            "county": np.where(block < 6, "01001", "01003"),
            "block": [f"b{b:02d}" for b in block],
            "hhgq": (rng.random(n) < 0.1).astype(int),
            "sex": rng.integers(0, 2, n),
        }
    )
    # a 'released' product: the same block totals, hhgq moved within blocks
    pl94 = persons[["state", "county", "block", "hhgq"]].copy()
    pl94["hhgq"] = np.where(rng.random(n) < 0.2, 1 - pl94["hhgq"], pl94["hhgq"])
    (tmp_path / "in").mkdir()
    persons.to_parquet(tmp_path / "in" / "persons.parquet")
    pl94.to_parquet(tmp_path / "in" / "pl94.parquet")
    text = (
        SPEC.replace("PUBLIC", DECLARED)
        .replace("TABLE", "pl94")
        .replace(
            "unit persons : hamming",
            'data persons from "persons.parquet"\ndata pl94 from "pl94.parquet"\n'
            "invariants {\n  count persons by state\n}\nunit persons : hamming",
        )
    )
    text += "release {\n  microdata persons\n}\n"
    path = tmp_path / "in" / "s.dps"
    text = write_declared(path, text)  # the geography declared from the data beside it
    return text, path, pl94


def test_the_spec_path_reproduces_the_product(tmp_path):
    """End to end through a spec: the released table is read as data, declared public, and the
    release's block x hhgq counts are its."""
    from dpspec.run.compiler import compile_spec

    text, path, pl94 = _equality_spec(tmp_path)
    result = compile_spec(parse(text, str(path)), seed=2, audit=False)
    micro = result.published["persons"].to_pandas()
    got = micro.groupby([micro["block"].astype(str), micro["hhgq"].astype(int)]).size()
    want = pl94.groupby([pl94["block"].astype(str), pl94["hhgq"].astype(int)]).size()
    assert got.reindex(want.index.union(got.index), fill_value=0).equals(
        want.reindex(want.index.union(got.index), fill_value=0)
    )


@pytest.mark.slow  # a Spark compile: a few seconds on an idle machine (CI runs every test)
def test_the_spec_path_releases_the_same_bytes_on_spark(tmp_path, spark_session, monkeypatch):
    """The product a release is held to, read from Parquet: on Spark the engine holds it and counts
    it by block, and the release is the local engine's, byte for byte."""
    from dpspec.engine.spark import SparkEngine
    from tests.test_engine_mechanisms import compile_on, release_bytes, spark_parquet_reads

    _, path, _ = _equality_spec(tmp_path)
    local = release_bytes(compile_on(str(path), "local"), tmp_path / "local")
    read = spark_parquet_reads(monkeypatch)
    assert release_bytes(compile_on(str(path), SparkEngine(session=spark_session)), tmp_path / "spark") == local
    assert sorted(os.path.basename(p) for p in read) == ["persons.parquet", "pl94.parquet"]


def test_a_product_breaking_a_facility_bound_is_a_data_error():
    from dpspec_topdown.params.constraints import facility_bounds
    from dpspec_topdown.synthetic import generate_facilities

    persons = generate_population(1500, 60, seed=46)  # its blocks hold group quarters
    # a product within the bounds (the data's own counts), then one block's GQ residents moved
    counts = persons.groupby(BY, observed=True).size().rename("count").reset_index()
    facilities = generate_facilities(persons, 1, gq_rate=0.3)
    con = {
        "name": "hhgq_total_lb_ub",
        "of": "hhgq",
        "table": "facilities",
        "type": "gqtype",
        "occupied": [1, 2, 3, 4, 5, 6, 7],
        "finest": "block",
    }
    lower, upper = facility_bounds(con, facilities, PL94_VARIABLES["hhgq"])
    bounds = [(con["name"], ("hhgq",), lower, upper)]
    gq = counts[(counts["hhgq"].astype(int) > 0)]
    block = str(gq["block"].iloc[0])
    moved = counts.copy()
    rows = (moved["block"].astype(str) == block) & (moved["hhgq"].astype(int) > 0)
    moved.loc[rows, "hhgq"] = 0  # the block's group-quarters residents become household persons
    moved = moved.groupby(BY, observed=True)["count"].sum().reset_index()
    with pytest.raises(
        DataError,
        match=f"breaks the constraint 'hhgq_total_lb_ub' at block '{block}' "
        r"\(cell hhgq=\d+ of 'hhgq'\)",
    ):  # the cell by its label, not its index
        run_topdown(
            Records(persons, bounds=bounds, equalities=[("pl94", ("hhgq", "votingage"), moved)]),
            Design(ALL_LEVELS, PL94_VARIABLES, pl94_strategy(tuple(SHARES)), 1, SHARES, "hamming", [("state", ())]),
            RunContext(np.random.default_rng(1), workers=1),
        )


def test_a_group_is_named_by_its_factors_labels():
    """Equality errors name a marginal's cell as 'hhgq=3, votingage=1', not by its flat index."""
    from dpspec_topdown.estimation.equality import group_text
    from dpspec_topdown.measurement.histogram import Recode, Schema

    schema = Schema.from_variables({"sex": [0, 1], "age": [0, 1, 2, 3]}).with_recodes(
        [Recode.build("adult", "age", [0, 1, 2, 3], {"child": [0, 1], "adult": [2, 3]})]
    )
    assert group_text(schema, ("sex", "adult"), 3) == "sex=1, adult='adult'"
    assert group_text(schema, ("age",), 2) == "age=2"
    assert group_text(schema, (), 0) == ""


def test_an_equality_query_that_misses_the_declared_product_names_what_is_declared():
    """The query of equal_to differing from the declared public product (one factor short) once
    read 'holds the release to pl94; declare that product public', as if none were declared."""
    declared = 'public {\n  count pl94 by block, hhgq, sex released "the 2020 P.L. 94-171 file"\n}'
    text = SPEC.replace("PUBLIC", declared).replace("TABLE", "pl94")
    with pytest.raises(SpecError) as info:
        check(parse(text, "s.dps"))
    message = str(info.value)
    assert "the public statistics of 'pl94' are count pl94 by block, hhgq, sex, none by exactly block, hhgq" in message
