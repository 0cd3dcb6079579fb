"""Sparse noise (node_noise.KeyedAnswers): a large query's answers drawn one keyed stream per
(child, group), only where the fit reads them, give the release that drawing every answer from
the same streams gives; the published measurements re-draw the very values the fits read.

The P.L. 94 schema (2,016 cells) stands in for the DHC's 1,227,744: KEYED_GROUPS is lowered so its
detailed query is keyed, as the DHC's three largest queries are in a real run."""

import numpy as np
import pytest

from dpspec.api import discrete_gaussian_variance
from dpspec.engine.base import EngineRun
from dpspec.engine.local import LocalEngine
from dpspec.engine.streams import new_run_key
from dpspec_topdown.measurement import node_noise
from dpspec_topdown.measurement.allocation import query_name
from dpspec_topdown.run.topdown import run_topdown
from dpspec_topdown.design import Design
from dpspec_topdown.run.context import RunContext
from dpspec_topdown.synthetic import (
    LEVELS,
    PL94_VARIABLES,
    PRODUCTION_LEVEL_SHARES,
    PRODUCTION_RHO,
    generate_population,
    pl94_strategy,
)

ALL_LEVELS = ["nation"] + LEVELS
STRATEGY = pl94_strategy(tuple(PRODUCTION_LEVEL_SHARES))
DETAILED = ("hhgq", "votingage", "hispanic", "cenrace")


@pytest.fixture(scope="module")
def persons():
    return generate_population(3000, 120, seed=5)  # 4 block groups of 30 blocks


def _run(persons, seed=3):
    run = EngineRun(LocalEngine(), new_run_key(seed))
    return run_topdown(
        persons,
        Design(
            ALL_LEVELS, PL94_VARIABLES, STRATEGY, PRODUCTION_RHO, PRODUCTION_LEVEL_SHARES, "hamming", [("state", ())]
        ),
        RunContext(np.random.default_rng(seed), engine=run, workers=1),
    )


@pytest.fixture(scope="module")
def sparse(persons):
    """(result, draws, its detailed query's published measurements): a run in which only the
    detailed query (2,016 groups) is keyed, every keyed draw recorded as (node key, query,
    n_groups, entries, values)."""
    with pytest.MonkeyPatch.context() as mp:
        drawn = _watch(mp)
        result = _run(persons)
        fit_draws = list(drawn)
        nmf = result.measurements  # re-drawn as the run drew them (the keyed query too)
    return result, fit_draws, nmf[nmf["query"].astype(str) == query_name(DETAILED)]


def _watch(mp) -> list:
    mp.setattr(node_noise, "KEYED_GROUPS", 1000)
    drawn = []
    real = node_noise.keyed_answers

    def watched(run_key, node_key, query, n_groups, flat, *rest):
        y = real(run_key, node_key, query, n_groups, flat, *rest)
        drawn.append((node_key, query, n_groups, np.asarray(flat).copy(), y.copy()))
        return y

    mp.setattr(node_noise, "keyed_answers", watched)
    return drawn


def test_drawing_only_what_the_fit_reads_gives_the_release_drawing_everything_gives(persons, sparse, monkeypatch):
    sparse, fit_draws, _ = sparse
    n_sparse = sum(d[3].size for d in fit_draws)
    assert fit_draws and {q for _, q, _, _, _ in fit_draws} == {query_name(DETAILED)}
    # dense: every node draws every (child, group) of the keyed query first, from the same streams
    real_at = node_noise.KeyedAnswers.at

    def draw_all(self, flat):
        real_at(self, np.arange(self.n_children * self.n_groups, dtype=np.int64))
        return real_at(self, flat)

    monkeypatch.setattr(node_noise.KeyedAnswers, "at", draw_all)
    drawn = _watch(monkeypatch)
    dense = _run(persons)
    n_dense = sum(d[3].size for d in drawn)
    units = sum(dense.hierarchy.level(lv).n_units for lv in PRODUCTION_LEVEL_SHARES)
    assert n_dense == units * 2016  # every answer of every measured unit
    assert n_sparse < n_dense / 5  # the fits read a small part of them
    for level, h in sparse.histograms.items():
        assert (h != dense.histograms[level]).nnz == 0, level


def test_published_measurements_are_the_values_the_fits_read_and_list_every_cell(sparse):
    result, draws, rows = sparse
    units = sum(result.hierarchy.level(lv).n_units for lv in PRODUCTION_LEVEL_SHARES)
    assert len(rows) == units * 2016  # every cell of every measured unit, as production's NMF
    # the entries the fits read, re-drawn for the table, hold the same values
    published = {}
    for level, plan in result.noise_plans.items():
        codes = [str(c) for c in result.hierarchy.level(level).codes]
        part = rows[rows["level"].astype(str) == level]
        value = dict(zip(zip(part["geocode"].astype(str), part["cell"].astype(int)), part["value"].astype(int)))
        for i, key in enumerate(plan.keys):
            published[key] = (int(plan.starts[i]), codes, value)
    checked = 0
    for node_key, _, n_groups, flat, y in draws:
        start, codes, value = published[node_key]
        child, cell = np.divmod(flat, n_groups)
        got = [value[(codes[start + c], g)] for c, g in zip(child.tolist(), cell.tolist())]
        np.testing.assert_array_equal(got, y)
        checked += y.size
    assert checked > 0


def test_keyed_answers_have_the_discrete_gaussian_noise_of_their_query(sparse):
    """Value minus confidential answer over every published cell of the detailed query at the
    blocks: mean 0 and the sampler's variance (about 120 x 2,016 draws; 5 standard errors)."""
    result, _, rows = sparse
    rows = rows[rows["level"].astype(str) == "block"]
    level = result.hierarchy.level("block")
    truth = np.asarray(result.confidential["block"].toarray(), dtype=np.int64)  # 120 x 2,016: small here
    index = {str(c): i for i, c in enumerate(level.codes)}
    unit = rows["geocode"].astype(str).map(index).to_numpy()
    noise = rows["value"].to_numpy() - truth[unit, rows["cell"].to_numpy()]
    variance = float(rows["variance"].iloc[0])
    assert variance == pytest.approx(
        discrete_gaussian_variance(
            next(qb.sigma2 for qb in result.allocation.for_level("block") if qb.query == DETAILED)
        )
    )
    n = noise.size
    assert abs(noise.mean()) < 5 * np.sqrt(variance / n)
    # the variance of a sample variance is about 2 sigma^4 / n for a near-Gaussian
    assert abs(noise.var() - variance) < 5 * variance * np.sqrt(2 / n)
