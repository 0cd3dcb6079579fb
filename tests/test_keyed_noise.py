"""Discrete Gaussian noise keyed per cell (`dpspec.run.keyed_noise`): each cell's draws are the
project's one sampler run on that cell's own unit stream, including the rare exact paths; the
result does not depend on batching; the law is the exact discrete Gaussian; cells are independent."""

from __future__ import annotations

from fractions import Fraction as F

import attrs
import numpy as np
import pytest
from scipy import stats

from dpspec.api import KeyColumns, keyed_discrete_gaussian
from dpspec.engine.streams import unit_rng
from dpspec.run import keyed_noise, noise

RUN_KEY = 2**130 + 2026


def _cells(n: int) -> list:
    return [("cell", f"{i // 7:05d}", f"g{i % 7}", "stage 1") for i in range(n)]


def _by_definition(s2, keys, counts) -> np.ndarray:
    """Cell i's draws as the definition states them: discrete_gaussian on unit_rng(run key, key i)."""
    parts = [noise.discrete_gaussian(s2, int(c), unit_rng(RUN_KEY, k)) for k, c in zip(keys, counts)]
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)


@pytest.mark.parametrize(
    "s2,n", [(F(1, 2), 300), (F(9, 2) / F(1431, 10000), 300), (F(31), 300), (F(10**6), 40)], ids=str
)
def test_each_cell_draws_its_own_unit_stream(s2, n):
    """sigma² = 10^6 has no table: those cells take the per-cell generator path."""
    keys = _cells(n)
    counts = np.random.default_rng(3).integers(0, 30, len(keys))
    assert np.array_equal(keyed_discrete_gaussian(s2, RUN_KEY, keys, counts), _by_definition(s2, keys, counts))


def test_cells_with_more_draws_than_a_chunk_follow_the_definition(monkeypatch):
    monkeypatch.setattr(noise, "_CHUNK", 16)  # discrete_gaussian itself then draws in chunks of 16
    keys = _cells(40)
    counts = np.arange(40) % 25
    assert np.array_equal(keyed_discrete_gaussian(F(31), RUN_KEY, keys, counts), _by_definition(F(31), keys, counts))


@pytest.mark.parametrize("s2", [F(1, 2), F(31)], ids=str)
def test_rare_exact_paths_read_the_cells_own_stream(monkeypatch, s2):
    """A table whose bounds say nothing (every draw decided exactly from more bits of its
    stream), an eighth of whose buckets alias to the tail symbol, always accepted (exact tail
    draws), and an eighth to the reject symbol (new rounds): still the definition, cell by cell. The edits
    change the law, which this test does not look at; it checks whose stream each step reads."""
    table = noise._gaussian_table(s2.numerator, s2.denominator)
    alias, thresh = table.alias.copy(), table.thresh.copy()
    alias[::8], thresh[::8] = table.tail, 0
    alias[4::8], thresh[4::8] = table.tail + 1, 0  # the reject symbol: a new round for the draw
    k = 1 << table.acc_bits
    acc_lo, acc_hi = np.zeros_like(table.acc_lo), np.full_like(table.acc_hi, k)
    acc_lo[table.tail] = k
    acc_hi[table.tail + 1 :] = 0
    forced = attrs.evolve(table, acc_lo=acc_lo, acc_hi=acc_hi, alias=alias, thresh=thresh)
    monkeypatch.setitem(noise._TABLES, (s2.numerator, s2.denominator), forced)
    calls = {"exact": 0, "tail": 0, "redraw": 0}

    def counting(name, func):
        def wrapped(*args):
            calls[name] += 1
            return func(*args)

        return wrapped

    monkeypatch.setattr(noise, "_accept_exactly", counting("exact", noise._accept_exactly))
    monkeypatch.setattr(noise, "_tail_sample", counting("tail", noise._tail_sample))
    monkeypatch.setattr(keyed_noise._CellStreams, "words", counting("redraw", keyed_noise._CellStreams.words))
    keys = _cells(30)
    counts = np.random.default_rng(5).integers(0, 8, len(keys))
    keyed = keyed_discrete_gaussian(s2, RUN_KEY, keys, counts)
    assert calls["exact"] > counts.sum() / 2 and calls["tail"] > 0 and calls["redraw"] > 0  # every rare path ran
    assert np.array_equal(keyed, _by_definition(s2, keys, counts))


def test_the_same_draws_whatever_the_batching(monkeypatch):
    keys = _cells(400)
    counts = np.random.default_rng(8).integers(0, 9, len(keys))
    whole = keyed_discrete_gaussian(F(31), RUN_KEY, keys, counts)
    cuts = np.sort(np.random.default_rng(9).choice(np.arange(1, len(keys)), 12, replace=False))
    parts = [
        keyed_discrete_gaussian(F(31), RUN_KEY, keys[lo:hi], counts[lo:hi])
        for lo, hi in zip(np.r_[0, cuts], np.r_[cuts, len(keys)])
    ]
    assert np.array_equal(np.concatenate(parts), whole)
    monkeypatch.setattr(keyed_noise, "_BATCH_DRAWS", 61)  # internal batches of a few cells
    assert np.array_equal(keyed_discrete_gaussian(F(31), RUN_KEY, keys, counts), whole)
    shuffled = np.random.default_rng(10).permutation(len(keys))
    again = keyed_discrete_gaussian(F(31), RUN_KEY, [keys[i] for i in shuffled], counts[shuffled])
    starts = np.cumsum(counts) - counts
    assert np.array_equal(again, np.concatenate([whole[starts[i] : starts[i] + counts[i]] for i in shuffled]))


def test_key_columns_and_tuples_give_the_same_draws():
    geocodes = np.array(["25001", "25003", "25005"], dtype=object)[np.arange(60) % 3]
    groups = np.array([f"{g:04d}" for g in range(20)], dtype=object)[np.arange(60) // 3]
    columns = KeyColumns(("safetab cell noise", "t1", "county", 1), (geocodes, groups), ("stage 2",))
    tuples = [columns.key(i) for i in range(60)]
    assert np.array_equal(
        keyed_discrete_gaussian(F(7, 3), RUN_KEY, columns, 4), keyed_discrete_gaussian(F(7, 3), RUN_KEY, tuples, 4)
    )


def test_counts_are_checked_and_may_be_empty():
    assert keyed_discrete_gaussian(F(2), RUN_KEY, [], 3).size == 0
    assert keyed_discrete_gaussian(F(2), RUN_KEY, _cells(5), 0).size == 0
    with pytest.raises(ValueError):
        keyed_discrete_gaussian(F(2), RUN_KEY, _cells(2), [1, -1])
    with pytest.raises(ValueError):
        keyed_discrete_gaussian(F(2), RUN_KEY, _cells(2), [1, 2, 3])


def _chi_square_p(draws: np.ndarray, s2) -> float:
    """p-value of draws against the exact pmf at sigma² s2 (outer bins pooled to >= 20 expected)."""
    lim = int(4.5 * float(s2) ** 0.5)
    support = np.arange(-lim, lim + 1)
    pmf = noise.discrete_gaussian_pmf(s2, np.arange(-20 * lim, 20 * lim + 1))
    pmf /= pmf.sum()
    inner = pmf[19 * lim : 21 * lim + 1]
    expected = np.r_[pmf[: 19 * lim].sum(), inner, pmf[21 * lim + 1 :].sum()] * draws.size
    observed = np.r_[
        (draws < -lim).sum(), np.bincount(np.clip(draws, -lim, lim) + lim, minlength=support.size), (draws > lim).sum()
    ].astype(float)
    observed[1] -= observed[0]  # the clipped values below -lim were counted in the first inner bin
    observed[-2] -= observed[-1]
    return float(stats.chisquare(observed, expected).pvalue)


def test_keyed_draws_follow_the_exact_law():
    """200,000 cells, one draw each (SafeTab's stage-1 shape): chi-square against the exact pmf
    passes (fixed run key: the p-value is a fixed number, above 1e-3), and against sigma² 10%
    too large it fails by far: the test can tell."""
    s2 = F(31, 3)
    keys = KeyColumns(("law",), (np.arange(200_000),))
    draws = keyed_discrete_gaussian(s2, RUN_KEY, keys, 1)
    assert _chi_square_p(draws, s2) > 1e-3
    assert _chi_square_p(draws, s2 * F(11, 10)) < 1e-9
    assert abs(draws.var() - float(noise.discrete_gaussian_variance(s2))) < 0.1


def test_cells_are_independent():
    """Draws of neighbouring cells, of one cell's consecutive draws and of the same cell at two
    stages are uncorrelated (|r| below 4 standard errors over 128,000 pairs)."""
    n_cells, per = 4000, 32
    geocodes = np.arange(n_cells)
    stage1 = keyed_discrete_gaussian(F(31), RUN_KEY, KeyColumns(("ind",), (geocodes,), ("stage 1",)), per).reshape(
        n_cells, per
    )
    stage2 = keyed_discrete_gaussian(F(31), RUN_KEY, KeyColumns(("ind",), (geocodes,), ("stage 2",)), per).reshape(
        n_cells, per
    )
    bound = 4 / np.sqrt(n_cells * per / 2)
    pairs = [(stage1[0::2], stage1[1::2]), (stage1[:, :-1], stage1[:, 1:]), (stage1, stage2)]
    for a, b in pairs:
        assert abs(np.corrcoef(a.ravel(), b.ravel())[0, 1]) < bound
    assert not np.array_equal(stage1, stage2)
