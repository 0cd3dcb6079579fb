"""The PSA's stratum keys computed only where asked: the same codes, rows and swap as coding every record."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from dpspec_swap import algorithm
from dpspec_swap.algorithm import (
    frame_keys,
    selected_rows,
    stable_order,
    stratum_codes,
    swap_records,
)
from dpspec_swap.derangements import uniform_derangements
from dpspec_swap.theorem import as_rate

from dpspec.api import bernoulli


def full_code_swap(df, match, p, seed):
    """The PSA as it ran before keys were computed on demand: every record coded first."""
    rng = np.random.default_rng(seed)
    codes, n_codes = stratum_codes(df, match)
    chosen = selected_rows(codes, n_codes, as_rate(p), rng)
    chosen_codes = codes[chosen]
    grouped = chosen[stable_order(chosen_codes, n_codes)]
    sizes = np.bincount(chosen_codes)
    return grouped, grouped[uniform_derangements(sizes[sizes > 0], rng)]


def reference_selection(codes, n_codes, p, rng):
    """The selection with the exactly-one redraw as first written: a pass over every record's
    code to find the redrawn strata's records, and one over the whole mask at the end."""
    q = as_rate(p)
    sel = bernoulli(q, codes.size, rng)
    counts = np.bincount(codes[np.flatnonzero(sel)], minlength=n_codes)
    bad = np.flatnonzero(counts == 1)
    if bad.size:
        rows = np.flatnonzero(np.isin(codes, bad))
        local = np.searchsorted(bad, codes[rows])
        alone = np.bincount(local, minlength=bad.size) == 1
        sel[rows[alone[local]]] = False
        rows, local = rows[~alone[local]], local[~alone[local]]
        while rows.size:
            draw = bernoulli(q, rows.size, rng)
            sel[rows] = draw
            again = np.bincount(local[draw], minlength=bad.size) == 1
            if not again.any():
                break
            rows, local = rows[again[local]], local[again[local]]
    return np.flatnonzero(sel)


def test_the_selection_is_the_one_first_written():
    df = frame(20_000, seed=4)
    codes, n_codes = stratum_codes(df, ["region", "kind"])
    for seed in range(20):
        for p in ("0.3", "0.05"):
            want = reference_selection(codes, n_codes, p, np.random.default_rng(seed))
            assert np.array_equal(selected_rows(codes, n_codes, p, np.random.default_rng(seed)), want)
            assert np.array_equal(np.sort(swap_records(df, ["region", "kind"], ["county"], p, seed).rows), want)


def frame(n: int, seed: int) -> pd.DataFrame:
    """Big strata and, in three values of the most selective column, tiny ones (a few records)
    whose draws often select exactly one record, so that most seeds redraw some stratum."""
    rng = np.random.default_rng(seed)
    region = rng.integers(0, 40, n)
    tiny = rng.random(n) < 0.002
    region[tiny] = 40 + rng.integers(0, 3, tiny.sum())
    region[rng.random(n) < 0.01] = -1  # missing: a value of its own
    return pd.DataFrame(
        {
            "region": pd.Categorical.from_codes(region, categories=[f"r{i}" for i in range(43)]),
            "kind": pd.Categorical.from_codes(rng.integers(0, 4, n), categories=list("abcd"), ordered=True),
            "flag": rng.random(n) < 0.5,
            "small": rng.integers(0, 3, n),
            "county": pd.Categorical.from_codes(rng.integers(0, 300, n), categories=[f"c{i}" for i in range(300)]),
        }
    )


def counting(monkeypatch, cls, name: str) -> list:
    calls, real = [], getattr(cls, name)

    def spy(self, *args):
        calls.append(args)
        return real(self, *args)

    monkeypatch.setattr(cls, name, spy)
    return calls


CASES = [
    (["region", "kind"], "0.3"),
    (["kind", "region"], "1/2"),
    (["region", "flag"], "0.2"),
    (["flag"], "0.5"),
    (["region", "small"], "0.3"),
    ([], "0.01"),
]


@pytest.mark.parametrize("match,rate", CASES, ids=["-".join(m) or "none" for m, _ in CASES])
def test_swap_records_is_the_full_coding_swap_for_every_seed(monkeypatch, match, rate):
    df = frame(20_000, seed=1)
    redraws = counting(monkeypatch, algorithm._FrameKeys, "rows_in")
    for seed in range(12):
        res = swap_records(df, match, ["county"], rate, seed)
        rows, targets = full_code_swap(df, match, rate, seed)
        assert np.array_equal(res.rows, rows) and np.array_equal(res.targets, targets)
        assert np.array_equal(res.data["county"].array.codes, df["county"].array.codes[res.source])
    if len(match) == 2 and "small" not in match:  # the redraw path was exercised, on demand
        assert len(redraws) >= 6


def test_keys_on_demand_are_stratum_codes():
    df = frame(30_000, seed=2)
    rows = np.sort(np.random.default_rng(0).choice(len(df), 3_000, replace=False))
    for match in (["region", "kind"], ["kind", "flag", "region"], ["flag"]):
        keys = frame_keys(df, match)
        codes, n_codes = stratum_codes(df, match)
        assert isinstance(keys, algorithm._FrameKeys) and keys.n_codes == n_codes
        assert np.array_equal(keys.at(rows), codes[rows]) and keys.at(rows).dtype == codes.dtype
        missing = codes[df["region"].isna().to_numpy()][:2]
        for strata in (
            np.unique(codes[rows[:3]]),
            np.unique(codes[rows[:40]]),
            np.unique(missing),
            np.array([n_codes - 1]),
        ):
            assert np.array_equal(keys.rows_in(strata), np.flatnonzero(np.isin(codes, strata)))
    # Columns whose codes depend on the whole column are coded in full, as before.
    assert not isinstance(frame_keys(df, ["region", "small"]), algorithm._FrameKeys)


@pytest.mark.parametrize("scan", [8, 0], ids=["scan", "code-all"])
def test_a_redraw_codes_every_record_only_when_it_touches_many_values(monkeypatch, scan):
    """The tiny strata lie in three values of the lead column: scanned one value at a time, no
    record is coded outside them; with no scans allowed every record is coded. Same swap both ways."""
    df = frame(20_000, seed=3)
    monkeypatch.setattr(algorithm, "_SCAN_VALUES", scan)
    redraws = counting(monkeypatch, algorithm._FrameKeys, "rows_in")
    coded_all = counting(monkeypatch, algorithm._CodeArray, "rows_in")
    for seed in range(6):
        res = swap_records(df, ["region", "kind"], ["county"], "0.3", seed)
        rows, targets = full_code_swap(df, ["region", "kind"], "0.3", seed)
        assert np.array_equal(res.rows, rows) and np.array_equal(res.targets, targets)
    assert len(redraws) >= 3
    # full_code_swap's own selections go through _CodeArray too: one call per seed that redraws.
    assert len(coded_all) == (2 if scan == 0 else 1) * len(redraws)
