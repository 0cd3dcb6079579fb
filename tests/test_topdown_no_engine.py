"""TopDown without an engine (run_topdown with RunContext(rng), as scripts and benchmarks call it) draws
its noise as an engine run does: in the nodes, from streams keyed by a run key drawn from `rng`,
and a query of more than 65,536 groups only where a fit reads it. On a DHC-shaped histogram
(relgq x sex x age x hispanic x cenrace: 1,227,744 cells per block) the release is the one an
engine run with that key publishes, and no (blocks x cells) array of the detailed query is made.
"""

import tracemalloc
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest

from dpspec.engine import local_engine_run
from dpspec_topdown.measurement import node_noise
from dpspec_topdown.run.topdown import run_topdown
from dpspec_topdown.design import Design
from dpspec_topdown.run.context import Records, RunContext
from dpspec_topdown.measurement.node_noise import run_key_from

pytestmark = (
    pytest.mark.slow
)  # both tests read one TopDown run of a bundled spec without an engine (the module's without_engine)

VARIABLES = {
    "relgq": list(range(42)),
    "sex": [0, 1],
    "age": list(range(116)),
    "hispanic": [0, 1],
    "cenrace": list(range(63)),
}
DETAILED = ("relgq", "sex", "age", "hispanic", "cenrace")
N_CELLS = 42 * 2 * 116 * 2 * 63
SHARES = {"state": Fraction(1, 4), "county": Fraction(1, 4), "block": Fraction(1, 2)}
QUERIES = [
    ((), Fraction(1, 5)),
    (("relgq",), Fraction(1, 5)),
    (("sex", "age"), Fraction(1, 5)),
    (("relgq", "age", "cenrace"), Fraction(1, 5)),
    (DETAILED, Fraction(1, 5)),
]  # the last two keyed
N_BLOCKS = 60


def _persons(n=300, seed=1) -> pd.DataFrame:
    """`n` persons on N_BLOCKS blocks of 4 counties, the last county a single block (bypassed)."""
    rng = np.random.default_rng(seed)
    block = rng.integers(0, N_BLOCKS, n)
    county = np.where(block == N_BLOCKS - 1, 3, block % 3)
    return pd.DataFrame(
        {
            "state": "01",
            "county": [f"01{c:03d}" for c in county],
            "block": [f"01{c:03d}{b:04d}" for c, b in zip(county, block)],
            "relgq": rng.integers(0, 20, n),
            "sex": rng.integers(0, 2, n),
            "age": rng.integers(0, 90, n),
            "hispanic": rng.integers(0, 2, n),
            "cenrace": rng.integers(0, 8, n),
        }
    )


PERSONS = _persons()
# held to an earlier product at every block, as the DHC to P.L. 94: the root's fit stays sparse
PL94 = PERSONS.groupby(["block", "relgq", "hispanic", "cenrace"]).size().rename("count").reset_index()


def _run(engine, seed=3):
    return run_topdown(
        Records(PERSONS, equalities=[("pl94", ("relgq", "hispanic", "cenrace"), PL94)]),
        Design(
            ["nation", "state", "county", "block"],
            VARIABLES,
            {lv: QUERIES for lv in SHARES},
            1,
            SHARES,
            "hamming",
            [("state", ())],
            bypass=["county"],
        ),
        RunContext(np.random.default_rng(seed), engine=engine, workers=1),
    )


@pytest.fixture(scope="module")
def without_engine():
    """The run without an engine, its traced peak memory, and every noise draw's size."""
    sizes, keyed = [], []
    with pytest.MonkeyPatch.context() as mp:
        real_gaussian, real_keyed = node_noise.discrete_gaussian, node_noise.keyed_answers

        def gaussian(sigma2, shape, rng):
            sizes.append(int(np.prod(shape)))
            return real_gaussian(sigma2, shape, rng)

        def keyed_answers(run_key, node_key, query, n_groups, flat, *rest):
            keyed.append((query, np.asarray(flat).size))
            return real_keyed(run_key, node_key, query, n_groups, flat, *rest)

        mp.setattr(node_noise, "discrete_gaussian", gaussian)
        mp.setattr(node_noise, "keyed_answers", keyed_answers)
        tracemalloc.start()
        try:
            result = _run(None)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    return result, peak, sizes, keyed


def test_the_release_is_the_one_an_engine_run_with_the_key_from_rng_publishes(without_engine):
    result = without_engine[0]
    assert result.noisy == {} and set(result.noise_plans) == set(SHARES)  # every level drawn in its nodes
    assert result.histograms["block"].shape == (N_BLOCKS, N_CELLS)
    assert result.budget_classes["county"][0].tolist().count(1) == 1  # the single-block county: bypassed
    engine = _run(local_engine_run(run_key_from(np.random.default_rng(3))))
    for level, h in result.histograms.items():
        assert (h != engine.histograms[level]).nnz == 0, level
    assert result.run_key == engine.run_key
    pd.testing.assert_frame_equal(result.microdata, engine.microdata)
    other = _run(None, seed=4)  # another rng, another key: another release
    assert other.run_key != result.run_key
    assert any((h != other.histograms[lv]).nnz for lv, h in result.histograms.items())


def test_no_dense_per_block_array_of_the_detailed_query(without_engine):
    result, peak, sizes, keyed = without_engine
    dense_blocks = N_BLOCKS * N_CELLS * 8  # what drawing the blocks' detailed answers whole would hold
    assert peak < dense_blocks / 4, (peak, dense_blocks)
    # the node streams drew the small queries whole, never a row of the keyed ones
    assert sizes and max(sizes) < 42 * 116 * 63
    drawn = {q: sum(n for name, n in keyed if name == q) for q, _ in keyed}
    assert set(drawn) == {" * ".join(DETAILED), "relgq * age * cenrace"}
    measured_units = sum(result.hierarchy.level(lv).n_units for lv in SHARES)
    assert drawn[" * ".join(DETAILED)] < measured_units * N_CELLS / 1000  # only what the fits read
