"""Histogram cells and marginals, and the geography tree check."""

import numpy as np
import pandas as pd
import pytest

from dpspec.errors import DataError, SpecError
from dpspec_topdown.geography.hierarchy import build_hierarchy
from dpspec_topdown.measurement.histogram import Schema, aggregate, marginal, unit_histograms
from dpspec_topdown.synthetic import PL94_VARIABLES, generate_population

VARS = {"hhgq": [0, 1, 2], "votingage": [0, 1], "race": ["a", "b", "c", "d"]}


def _records(n=500, seed=0):
    rng = np.random.default_rng(seed)
    county = rng.integers(0, 3, n)
    tract = county * 10 + rng.integers(0, 4, n)
    return pd.DataFrame(
        {
            "county": [f"c{c}" for c in county],
            "tract": [f"t{t:02d}" for t in tract],
            "hhgq": rng.integers(0, 3, n),
            "votingage": rng.integers(0, 2, n),
            "race": rng.choice(["a", "b", "c", "d"], n),
        }
    )


def test_pl94_histogram_has_2016_cells():
    assert Schema.from_variables(PL94_VARIABLES).n_cells == 8 * 2 * 2 * 63 == 2016


def test_marginals_match_pandas_groupby():
    df = _records()
    schema = Schema.from_variables(VARS)
    hier = build_hierarchy(df, ["county", "tract"])
    k = hier.index("tract")
    hist = unit_histograms(hier.record_unit[k], schema.cell_index(df), hier.levels[k].n_units, schema.n_cells)
    # query order does not matter: groups follow declaration order
    m = marginal(hist, schema, ("race", "hhgq"))
    assert m.shape == (hier.levels[k].n_units, 12)
    codes = list(hier.levels[k].codes)
    want = df.groupby(["tract", "hhgq", "race"]).size()
    for (tract, hhgq, race), count in want.items():
        assert m[codes.index(tract), hhgq * 4 + "abcd".index(race)] == count
    assert marginal(hist, schema, ()).ravel().tolist() == df.groupby("tract").size().loc[codes].tolist()
    assert int(hist.sum()) == len(df)


def test_aggregate_children_into_parents():
    df = _records()
    schema = Schema.from_variables(VARS)
    hier = build_hierarchy(df, ["county", "tract"])
    cells = schema.cell_index(df)
    hs = [unit_histograms(hier.record_unit[k], cells, lv.n_units, schema.n_cells) for k, lv in enumerate(hier.levels)]
    for k in range(1, len(hs)):
        up = aggregate(hs[k], hier.levels[k].parent, hier.levels[k - 1].n_units)
        assert (up != hs[k - 1]).nnz == 0


def test_implicit_root_and_contiguous_children():
    df = _records()
    hier = build_hierarchy(df, ["county", "tract"])
    assert hier.names == ["nation", "county", "tract"]
    assert hier.levels[0].implicit and hier.levels[0].n_units == 1
    parent = hier.levels[2].parent
    assert np.all(np.diff(parent) >= 0)  # children of a parent are one run
    # every record's tract lies in that record's county
    t_unit, c_unit = hier.record_unit[2], hier.record_unit[1]
    assert np.array_equal(parent[t_unit], c_unit)
    assert np.array_equal(hier.ancestor(2, 1)[t_unit], c_unit)
    assert np.all(hier.ancestor(2, 0) == 0)


def test_named_implicit_root_and_explicit_single_unit_root():
    df = _records()
    assert build_hierarchy(df, ["us", "county", "tract"]).names == ["us", "county", "tract"]
    df2 = df.assign(country="X")
    hier = build_hierarchy(df2, ["country", "county", "tract"])
    assert hier.names == ["country", "county", "tract"] and not hier.levels[0].implicit


def test_block_in_two_tracts_is_a_data_error():
    df = pd.DataFrame({"tract": ["t1", "t1", "t2", "t2"], "block": ["b1", "b2", "b3", "b2"], "x": [0, 0, 0, 0]})
    with pytest.raises(DataError) as err:
        build_hierarchy(df, ["tract", "block"])
    msg = str(err.value)
    assert "'b2'" in msg and "'t1'" in msg and "'t2'" in msg and "block" in msg and "tract" in msg


def test_synthetic_geography_is_a_tree():
    df = generate_population(5000, 300, seed=3)
    hier = build_hierarchy(df, ["nation", "state", "county", "tract", "blockgroup", "block"])
    assert hier.names[0] == "nation" and hier.levels[0].implicit
    # without a root name, the single state is the root
    assert build_hierarchy(df, ["state", "county"]).names == ["state", "county"]
    assert hier.level("block").n_units == df["block"].nunique()


def test_bad_values_and_names():
    schema = Schema.from_variables(VARS)
    df = _records().astype({"race": object})
    df.loc[7, "race"] = "z"
    with pytest.raises(DataError, match=r"column 'race', row 7: value 'z'"):
        schema.cell_index(df)
    with pytest.raises(DataError, match="missing"):
        schema.cell_index(df.drop(columns="hhgq"))
    with pytest.raises(SpecError, match="not histogram variables"):
        schema.canonical(("age",))
    with pytest.raises(DataError, match="missing"):
        build_hierarchy(df, ["county", "block"])
    df.loc[3, "tract"] = None
    with pytest.raises(DataError, match="row 3"):
        build_hierarchy(df, ["county", "tract"])


def test_decode_round_trips():
    schema = Schema.from_variables(VARS)
    df = _records(50)
    decoded = schema.decode(schema.cell_index(df))
    for name in VARS:
        assert list(decoded[name]) == list(df[name])
