"""TopDown end to end on small synthetic data: every guarantee, checked from the output itself."""

from fractions import Fraction

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp

from dpspec.errors import MechanismError, SpecError
from dpspec_topdown.run import topdown as engine
from dpspec_topdown.run.topdown import run_topdown
from dpspec_topdown.design import Design
from dpspec_topdown.run.context import RunContext
from dpspec_topdown.geography.hierarchy import build_hierarchy
from dpspec_topdown.measurement.histogram import Schema, marginal, unit_histograms
from dpspec_topdown.synthetic import (
    LEVELS,
    PL94_VARIABLES,
    PRODUCTION_LEVEL_SHARES,
    PRODUCTION_RHO,
    generate_population,
    pl94_strategy,
)

ALL_LEVELS = ["nation"] + LEVELS
DETAILED = ("hhgq", "votingage", "hispanic", "cenrace")


@pytest.fixture(scope="module")
def persons():
    return generate_population(4000, 160, seed=11)


def _run(
    persons,
    seed=0,
    rho=PRODUCTION_RHO,
    shares=PRODUCTION_LEVEL_SHARES,
    invariants=(("state", ()),),
    workers=1,
    relation="hamming",
):
    strategy = pl94_strategy(tuple(shares))
    return run_topdown(
        persons,
        Design(ALL_LEVELS, PL94_VARIABLES, strategy, rho, shares, relation, list(invariants)),
        RunContext(np.random.default_rng(seed), workers=workers),
    )


def _tabulate(frame, level, schema, codes):
    """Histogram per unit of ``level`` from records, one row per code in ``codes`` (sorted)."""
    unit = np.searchsorted(codes, frame[level].astype(str).to_numpy())
    return codes, unit_histograms(unit, schema.cell_index(frame), codes.size, schema.n_cells)


def _codes(persons, level):
    return np.unique(persons[level].astype(str).to_numpy())


def _check_release(res, persons, invariants):
    """Independent re-check of consistency, nonnegativity, integrality and invariants."""
    micro = res.microdata
    schema = Schema.from_variables(PL94_VARIABLES)
    assert list(micro.columns) == LEVELS + list(PL94_VARIABLES)
    assert len(micro) == len(persons)  # the state total is invariant and there is one state
    for name in PL94_VARIABLES:
        assert micro[name].isin(PL94_VARIABLES[name]).all()
    previous = None
    for level in LEVELS:
        codes, hist = _tabulate(micro, level, schema, _codes(persons, level))
        assert hist.dtype.kind == "i" and (hist.data >= 0).all()
        got = res.histograms[level]
        order = np.argsort(np.asarray(res.hierarchy.level(level).codes, dtype=str))
        assert (got[order] != hist).nnz == 0  # microdata and level histogram agree exactly
        if previous is not None:
            pcodes, phist = previous
            parent_of = {c: p for c, p in zip(persons[level].astype(str), persons[_above(level)].astype(str))}
            up = sp.csr_matrix(
                (np.ones(len(codes)), (np.searchsorted(pcodes, [parent_of[c] for c in codes]), np.arange(len(codes)))),
                shape=(len(pcodes), len(codes)),
            )
            assert ((up @ hist).astype(np.int64) != phist).nnz == 0  # children add up to parent
        previous = (codes, hist)
    for level, query in invariants:
        _, conf = _tabulate(persons, level, schema, _codes(persons, level))
        _, prot = _tabulate(micro, level, schema, _codes(persons, level))
        assert np.array_equal(marginal(conf, schema, query), marginal(prot, schema, query))


def _above(level):
    return LEVELS[LEVELS.index(level) - 1]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_guarantees_hold_for_several_seeds(persons, seed):
    res = _run(persons, seed=seed)
    _check_release(res, persons, [("state", ())])
    assert res.total_rho == PRODUCTION_RHO


def test_block_level_invariants_are_exact(persons):
    inv = [
        ("state", ()),
        ("block", ("hhgq",)),
        ("tract", ("hhgq", "votingage")),
        ("county", ("hhgq", "votingage", "hispanic")),
    ]
    res = _run(persons, seed=5, invariants=inv)
    _check_release(res, persons, inv)


def test_deterministic_for_a_fixed_seed(persons):
    a, b, c = _run(persons, seed=3), _run(persons, seed=3), _run(persons, seed=4)
    pd.testing.assert_frame_equal(a.microdata, b.microdata)
    ma, mb = a.measurements, b.measurements
    for col in ma.columns:
        assert np.array_equal(np.asarray(ma[col]), np.asarray(mb[col])), col
    assert not np.array_equal(ma["value"].to_numpy(), c.measurements["value"].to_numpy())


def _block_error(res, persons):
    schema = Schema.from_variables(PL94_VARIABLES)
    _, conf = _tabulate(persons, "block", schema, _codes(persons, "block"))
    _, prot = _tabulate(res.microdata, "block", schema, _codes(persons, "block"))
    return float(abs(conf - prot).sum()) / len(persons)


@pytest.mark.slow  # TopDown at several budgets
def test_error_shrinks_as_rho_grows(persons):
    errors = [
        np.mean([_block_error(_run(persons, seed=s, rho=Fraction(r)), persons) for s in (0, 1)])
        for r in (Fraction(1, 10), Fraction(10), Fraction(10_000))
    ]
    assert errors[0] > 1.5 * errors[1] > 0
    assert errors[1] > 3 * errors[2]
    assert errors[2] < 0.02  # almost no noise: almost the confidential data


def test_measurements_table(persons):
    res = _run(persons, seed=0)
    m = res.measurements
    assert list(m.columns) == ["level", "geocode", "query", "cell", "value", "variance"]
    hier = res.hierarchy
    expected_rows = sum(
        hier.level(q.level).n_units * Schema.from_variables(PL94_VARIABLES).marginal_size(q.query)
        for q in res.allocation.queries
    )
    assert len(m) == expected_rows
    detailed = m[(m["level"] == "block") & (m["query"] == " * ".join(DETAILED))]
    assert len(detailed) == hier.level("block").n_units * 2016
    qb = next(q for q in res.allocation.queries if q.level == "block" and q.query == DETAILED)
    assert detailed["variance"].iloc[0] == pytest.approx(float(qb.sigma2))
    # noisy answers scatter around the truth with the declared variance
    schema = Schema.from_variables(PL94_VARIABLES)
    records = build_hierarchy(persons, ALL_LEVELS)  # per record, independently of the run's counts
    assert records.levels[-1].codes.tolist() == hier.levels[-1].codes.tolist()
    conf = marginal(
        unit_histograms(records.record_unit[-1], schema.cell_index(persons), hier.levels[-1].n_units, 2016),
        schema,
        DETAILED,
    )
    noisy = np.zeros_like(conf)  # the published values, drawn from the nodes' streams
    codes = {str(c): i for i, c in enumerate(hier.levels[-1].codes)}
    noisy[detailed["geocode"].astype(str).map(codes).to_numpy(), detailed["cell"].to_numpy()] = detailed["value"]
    resid = noisy - conf
    assert abs(resid.var() / float(qb.sigma2) - 1) < 5 * (2 / resid.size) ** 0.5
    assert "block" in res.timings["levels"] and 0 < res.timings["solver_share"] <= 1


def test_unmeasured_root_and_intermediate_level(persons):
    shares = {"state": Fraction(1, 4), "county": Fraction(1, 4), "blockgroup": Fraction(1, 4), "block": Fraction(1, 4)}
    res = _run(persons, seed=2, shares=shares, invariants=[("state", ()), ("tract", ())])
    _check_release(res, persons, [("state", ()), ("tract", ())])
    assert "tract" not in res.timings["levels"]


def test_finest_level_must_be_measured(persons):
    shares = {"nation": Fraction(1, 2), "state": Fraction(1, 2)}
    with pytest.raises(SpecError, match="finest level 'block'"):
        _run(persons, shares=shares)


def test_unknown_level_or_query_is_a_spec_error(persons):
    with pytest.raises(SpecError, match="unknown geographic level"):
        _run(persons, invariants=[("planet", ())])
    with pytest.raises(SpecError, match="not histogram variables"):
        _run(persons, invariants=[("state", ("age",))])


def test_non_nested_invariants_are_a_spec_error(persons):
    with pytest.raises(SpecError, match="not nested"):
        _run(persons, invariants=[("state", ()), ("block", ("hhgq",)), ("block", ("votingage",))])


def test_verify_catches_a_broken_release(persons):
    res = _run(persons, seed=0)
    hier, schema = res.hierarchy, res.schema
    records = build_hierarchy(persons, ALL_LEVELS)
    conf = [
        unit_histograms(records.record_unit[k], schema.cell_index(persons), lv.n_units, 2016)
        for k, lv in enumerate(hier.levels)
    ]
    protected = {k: res.histograms[name].copy() for k, name in enumerate(hier.names)}
    engine._verify(hier, schema, protected, conf, [(1, ())])  # the real release passes
    last = len(hier.names) - 1
    bad = protected[last].tolil()
    i, j = protected[last].nonzero()
    bad[i[0], j[0]] += 1
    protected[last] = bad.tocsr()
    with pytest.raises(MechanismError, match="does not add up"):
        engine._verify(hier, schema, protected, conf, [])


@pytest.mark.slow  # starts a process pool
def test_parallel_workers_give_the_serial_answer(persons, monkeypatch):
    monkeypatch.setattr(engine, "_PARALLEL_MIN_SIZE", 0)
    serial = _run(persons, seed=9, workers=1)
    parallel = _run(persons, seed=9, workers=2)
    assert any(t.get("parallel") for t in parallel.timings["levels"].values())
    pd.testing.assert_frame_equal(serial.microdata, parallel.microdata)
