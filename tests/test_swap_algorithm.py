"""The PSA: uniform derangements, selection with the exactly-one redraw, swapping, invariants.

Randomized parts are tested statistically with fixed seeds. Chi-square tests use a 1e-3
significance level; each includes or is paired with a check that the same test rejects a
wrong sampler, so they cannot pass vacuously.
"""

from __future__ import annotations

import itertools
from fractions import Fraction
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from dpspec.errors import DataError, MechanismError
from dpspec_swap.algorithm import (
    SwapResult,
    carry_along,
    induced_invariants,
    select,
    stratum_codes,
    swap_records,
    uniform_derangements,
)
from dpspec_swap.utility import count_table, mape

ALPHA = 1e-3
MA1940 = Path(__file__).resolve().parents[1] / "specs" / "data" / "ma1940"


# --- helpers ---------------------------------------------------------------------------------


def derangements(k: int) -> list[tuple[int, ...]]:
    return [q for q in itertools.permutations(range(k)) if all(q[i] != i for i in range(k))]


def pattern_counts(perm: np.ndarray, sizes: np.ndarray, k: int) -> np.ndarray:
    """How often each derangement of k items occurs among the segments of size k."""
    starts = np.cumsum(sizes) - sizes
    segs = np.flatnonzero(sizes == k)
    local = perm[starts[segs, None] + np.arange(k)] - starts[segs, None]
    code = local @ (k ** np.arange(k))
    table = {sum(v * k**i for i, v in enumerate(q)): j for j, q in enumerate(derangements(k))}
    idx = np.array([table[c] for c in code])  # KeyError here would mean a non-derangement
    return np.bincount(idx, minlength=len(table))


def sattolo(k: int, rng) -> list[int]:
    """A uniformly random k-cycle: a derangement, but not a uniform one (the control)."""
    a = list(range(k))
    for i in range(k - 1, 0, -1):
        j = int(rng.integers(0, i))
        a[i], a[j] = a[j], a[i]
    return a


def households(n: int, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame(
        {
            "state": pd.Categorical(rng.choice(["MA", "RI", "CT"], n, p=[0.6, 0.3, 0.1])),
            "county": pd.Categorical(rng.choice([f"c{i}" for i in range(8)], n)),
            "size": rng.choice([1, 2, 3, 4, 9], n, p=[0.2, 0.35, 0.2, 0.2, 0.05]),
            "tenure": rng.choice(["owned", "rented"], n),
            "hhid": rng.permutation(n) + 1000,
        }
    )


# --- uniform derangements -----------------------------------------------------------------------


def test_derangements_of_four_and_five_are_uniform_in_one_call():
    rng = np.random.default_rng(20240401)
    sizes = rng.permutation(np.repeat([4, 5, 2, 3], [18_000, 22_000, 500, 500]))
    perm = uniform_derangements(sizes, rng)
    for k, expected_each in ((4, 2000), (5, 500)):
        counts = pattern_counts(perm, sizes, k)
        assert len(counts) == {4: 9, 5: 44}[k]
        assert counts.sum() == expected_each * len(counts)
        assert stats.chisquare(counts).pvalue > ALPHA, counts


def test_the_uniformity_test_rejects_sattolo():
    rng = np.random.default_rng(5)
    sizes = np.full(9_000, 4)
    perm = np.concatenate([np.array(sattolo(4, rng)) + 4 * i for i in range(sizes.size)])
    counts = pattern_counts(perm, sizes, 4)
    assert counts.sum() == 9_000
    assert stats.chisquare(counts).pvalue < 1e-10  # only the 6 four-cycles ever occur


def test_small_segments():
    rng = np.random.default_rng(3)
    assert list(uniform_derangements([2], rng)) == [1, 0]
    sizes = np.full(6_000, 3)
    counts = pattern_counts(uniform_derangements(sizes, rng), sizes, 3)
    assert stats.binomtest(int(counts[0]), 6_000, 0.5).pvalue > ALPHA
    assert uniform_derangements([], rng).size == 0
    assert list(uniform_derangements([0, 2, 0], rng)) == [1, 0]


def test_no_fixed_points_and_segments_respected():
    rng = np.random.default_rng(11)
    for _ in range(5):
        sizes = rng.integers(2, 60, size=3_000)
        sizes[rng.integers(0, sizes.size, 50)] = 0
        perm = uniform_derangements(sizes, rng)
        n = int(sizes.sum())
        seg = np.repeat(np.arange(sizes.size), sizes)
        assert (perm != np.arange(n)).all()
        assert (seg[perm] == seg).all()
        assert np.array_equal(np.sort(perm), np.arange(n))  # a permutation


def test_one_big_segment_is_uniform_at_each_position():
    # Each element of a large segment goes to each other position with probability 1/(k-1).
    rng = np.random.default_rng(17)
    k, reps = 6, 6_000
    targets = np.stack([uniform_derangements([k], rng) for _ in range(reps)])
    counts = np.stack([np.bincount(targets[:, i], minlength=k) for i in range(k)])
    assert (np.diag(counts) == 0).all()
    off = counts[~np.eye(k, dtype=bool)].reshape(k, k - 1)
    assert stats.chisquare(off.ravel()).pvalue > ALPHA


def test_size_one_segments_are_refused():
    with pytest.raises(ValueError):
        uniform_derangements([3, 1], np.random.default_rng(0))


# --- selection ----------------------------------------------------------------------------------


def test_selection_frequency_is_p():
    rng = np.random.default_rng(101)
    codes = np.repeat(np.arange(200), 500)
    for p in (Fraction(1, 10), Fraction(1, 3), "0.05"):
        q = Fraction(p)
        sel = select(codes, p, rng)
        se = np.sqrt(float(q * (1 - q)) / codes.size)
        assert abs(sel.mean() - float(q)) < 4 * se


def test_exactly_one_is_redrawn_and_the_conditional_law_is_binomial():
    rng = np.random.default_rng(202)
    n_strata, k, p = 30_000, 3, Fraction(3, 10)
    codes = np.concatenate([np.repeat(np.arange(n_strata), k), n_strata + np.arange(1_000)])
    codes = codes[rng.permutation(codes.size)]  # strata need not be contiguous
    sel = select(codes, p, rng)
    per = np.bincount(codes[sel], minlength=n_strata + 1_000)
    assert not (per == 1).any()
    assert not per[n_strata:].any()  # singleton strata are never selected
    observed = np.bincount(per[:n_strata], minlength=k + 1)
    pmf = stats.binom.pmf(np.arange(k + 1), k, float(p))
    allowed = [0, 2, 3]
    expected = pmf[allowed] / pmf[allowed].sum() * n_strata
    assert stats.chisquare(observed[allowed], expected).pvalue > ALPHA
    # Control: without the redraw, dropping lone selections would give a different law.
    naive = pmf.copy()
    naive[0] += naive[1]
    naive[1] = 0
    assert stats.chisquare(observed[allowed], naive[allowed] * n_strata).pvalue < 1e-10


def test_selection_within_a_stratum_is_exchangeable():
    rng = np.random.default_rng(303)
    codes = np.repeat(np.arange(20_000), 2)
    sel = select(codes, Fraction(1, 4), rng).reshape(-1, 2)
    assert (sel[:, 0] == sel[:, 1]).all()  # pairs: both or neither
    both = sel[:, 0].mean()
    want = (1 / 16) / (1 / 16 + 9 / 16)
    assert abs(both - want) < 4 * np.sqrt(want * (1 - want) / 20_000)


def test_rate_extremes():
    rng = np.random.default_rng(0)
    codes = np.array([0, 0, 1, 2, 2, 2])
    assert not select(codes, 0, rng).any()
    assert list(select(codes, 1, rng)) == [True, True, False, True, True, True]
    assert select(np.array([], dtype=np.int64), 0.5, rng).size == 0


def test_large_denominators_use_exact_comparison():
    rng = np.random.default_rng(9)
    codes = np.repeat(np.arange(1_000), 100)
    q = Fraction(1, 2**40)  # as good as never
    assert not select(codes, q, rng).any()
    q = Fraction(2**63 - 1, 2**63)  # as good as always
    assert select(codes, q, rng).all()
    # beyond 2**64 the shared sampler compares base-2**62 digits, still exactly
    assert not select(codes, Fraction(1, 2**70), rng).any()


# --- stratum codes --------------------------------------------------------------------------------


def test_stratum_codes_partition_rows_like_groupby():
    rng = np.random.default_rng(4)
    n = 5_000
    df = pd.DataFrame(
        {
            "cat": pd.Categorical(rng.choice(["a", "b", None], n)),
            "int": rng.integers(-5, 5, n),
            "big": rng.choice([0, 10**12], n),
            "str": rng.choice(["x", "y"], n),
            "flt": rng.choice([0.5, np.nan], n),
            "flag": rng.random(n) < 0.5,
            "i8": rng.integers(-120, 120, n).astype(np.int8),  # range wider than int8 can hold
            "u64": rng.choice(np.array([2**64 - 1, 2**64 - 3, 7], dtype=np.uint64), n),
        }
    )
    for cols in (["cat"], ["int", "str"], list(df.columns), ["big", "flt", "cat"], ["i8"], ["u64"]):
        codes, n_codes = stratum_codes(df, cols)
        assert codes.min() >= 0 and codes.max() < n_codes
        groups = df.groupby(cols, dropna=False, observed=True).ngroup().to_numpy()
        pairs = len(set(zip(codes.tolist(), groups.tolist())))
        assert pairs == len(np.unique(codes)) == len(np.unique(groups))


def test_stratum_codes_wide_keys_stay_dense():
    rng = np.random.default_rng(8)
    n = 2_000
    df = pd.DataFrame({f"k{i}": rng.integers(0, 10**6, n) * 7919 for i in range(5)})
    codes, n_codes = stratum_codes(df, list(df.columns))
    assert n_codes <= 4 * n
    assert len(np.unique(codes)) == len(df.drop_duplicates())


# --- swapping -------------------------------------------------------------------------------------


MATCH, SWAP, HOLD = ["state", "size"], ["county"], ["tenure"]


def test_invariants_preserved_exactly_on_many_runs():
    df = households(3_000, seed=1)
    queries = induced_invariants(MATCH, SWAP, HOLD)
    before = [count_table(df, q) for q in queries]
    joint = count_table(df, MATCH + SWAP + HOLD)
    changed = 0
    for seed in range(40):
        res = swap_records(df, MATCH, SWAP, Fraction(1, 2), np.random.default_rng(seed))
        for q, b in zip(queries, before):
            pd.testing.assert_series_equal(count_table(res.data, q), b)
        after = count_table(res.data, MATCH + SWAP + HOLD)
        changed += not after.equals(joint)
        assert res.n_selected > 0 and res.n_strata_touched > 0
    assert changed == 40  # and the unprotected cross-tabulation does move


def test_source_describes_the_swap():
    df = households(4_000, seed=2)
    res = swap_records(df, MATCH, ["county", "tenure"], 0.2, 12)
    src = res.source
    n = len(df)
    assert isinstance(res, SwapResult)
    assert np.array_equal(np.sort(src), np.arange(n))  # a permutation of the rows
    moved = src != np.arange(n)
    assert moved.sum() == res.n_selected
    codes, _ = stratum_codes(df, MATCH)
    assert (codes[src] == codes).all()  # only within strata
    assert len(np.unique(codes[moved])) == res.n_strata_touched
    for col in ("county", "tenure"):  # several swap columns move together
        assert np.array_equal(res.data[col].to_numpy(), df[col].to_numpy()[src])
    for col in ("state", "size", "hhid"):
        assert np.array_equal(res.data[col].to_numpy(), df[col].to_numpy())
    assert abs(res.n_selected / n - 0.2) < 0.03


def test_schema_index_and_input_are_preserved():
    df = households(500, seed=3)
    df.index = pd.Index([f"h{i}" for i in np.random.default_rng(0).permutation(len(df))])
    df["income"] = pd.array(np.where(np.arange(len(df)) % 7 == 0, None, np.arange(len(df))), dtype="Int64")
    df["county2"] = df["county"].astype(str)
    pristine = df.copy(deep=True)
    res = swap_records(df, MATCH, ["county", "county2", "income"], 0.3, 5)
    pd.testing.assert_frame_equal(df, pristine)  # input untouched
    assert list(res.data.columns) == list(df.columns)
    assert (res.data.dtypes == df.dtypes).all()
    assert res.data.index.equals(df.index)
    assert (res.data["county"].astype(str) == res.data["county2"]).all()
    res.data.loc[res.data.index[0], "tenure"] = "changed"  # writing to the output ...
    pd.testing.assert_frame_equal(df, pristine)  # ... does not reach the input


def test_duplicate_index_labels():
    df = households(300, seed=4)
    df.index = [0] * len(df)
    res = swap_records(df, MATCH, SWAP, 0.5, 1)
    assert np.array_equal(res.data["county"].to_numpy(), df["county"].to_numpy()[res.source])


def test_reproducible_with_a_seed_and_different_without():
    df = households(2_000, seed=5)
    a = swap_records(df, MATCH, SWAP, 0.1, 42)
    b = swap_records(df, MATCH, SWAP, 0.1, 42)
    c = swap_records(df, MATCH, SWAP, 0.1, 43)
    assert np.array_equal(a.source, b.source)
    assert not np.array_equal(a.source, c.source)


def test_missing_match_values_form_their_own_stratum():
    df = pd.DataFrame(
        {
            "state": pd.Categorical(["A", None, None, None, "A", "A"]),
            "county": ["a1", "n1", "n2", "n3", "a2", "a3"],
        }
    )
    for seed in range(20):
        res = swap_records(df, ["state"], ["county"], 1, seed)
        assert set(res.data["county"][1:4]) == {"n1", "n2", "n3"}
        assert (res.data["county"].to_numpy() != df["county"].to_numpy()).all()


def test_nothing_to_swap():
    df = pd.DataFrame({"state": ["A", "B"], "county": ["x", "y"]})
    res = swap_records(df, ["state"], ["county"], 1, 0)
    assert res.n_selected == 0 and res.n_strata_touched == 0
    pd.testing.assert_frame_equal(res.data, df)
    empty = swap_records(df.iloc[:0], ["state"], ["county"], 0.5, 0)
    assert len(empty.data) == 0 and empty.source.size == 0


def test_user_errors():
    df = households(50, seed=6)
    with pytest.raises(DataError, match="countyy"):
        swap_records(df, MATCH, ["countyy"], 0.1, 0)
    with pytest.raises(MechanismError, match="state"):
        swap_records(df, MATCH, ["state"], 0.1, 0)
    with pytest.raises(MechanismError):
        swap_records(df, MATCH, [], 0.1, 0)
    with pytest.raises(MechanismError):
        swap_records(df, MATCH, SWAP, 1.2, 0)


def test_ma1940_swap_keeps_the_paper_invariants():
    df = pd.read_parquet(MA1940 / "ma1940_households.parquet")
    res = swap_records(df, MATCH, SWAP, Fraction(1, 20), 1940)
    for q in induced_invariants(MATCH, SWAP, HOLD):
        pd.testing.assert_series_equal(count_table(res.data, q), count_table(df, q))
    assert abs(res.n_selected / len(df) - 0.05) < 0.002
    assert res.n_strata_touched == 20  # every household size 1..20 has many records
    table = count_table(df, ["county", "tenure"])
    assert mape(table, count_table(res.data, ["county", "tenure"])) > 0


def test_induced_invariants():
    assert induced_invariants(["state", "size"], ["county"], ["tenure"]) == [
        ("state", "size", "tenure"),
        ("state", "size", "county"),
    ]
    assert induced_invariants(["state"], ["county"], []) == [("state",), ("state", "county")]
    assert induced_invariants([], ["county"], ["tenure", "size"]) == [("tenure", "size"), ("county",)]


# --- carry-along ----------------------------------------------------------------------------------


def persons_of(hh: pd.DataFrame, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    idx = np.repeat(np.arange(len(hh)), hh["size"].to_numpy())
    idx = idx[rng.permutation(idx.size)]
    return pd.DataFrame(
        {
            "pid": np.arange(idx.size),
            "hhid": hh["hhid"].to_numpy()[idx],
            "county": hh["county"].to_numpy()[idx],
            "age": rng.integers(0, 90, idx.size),
        }
    )


def test_carry_along_moves_persons_with_their_household():
    hh = households(1_000, seed=7)
    persons = persons_of(hh, 1)
    pristine = persons.copy(deep=True)
    res = swap_records(hh, MATCH, SWAP, 0.3, 8)
    moved = carry_along(persons, "hhid", hh, res, SWAP)
    pd.testing.assert_frame_equal(persons, pristine)
    joined = moved.merge(res.data[["hhid", "county"]], on="hhid", suffixes=("", "_hh"))
    assert (joined["county"].astype(str) == joined["county_hh"].astype(str)).all()
    assert (moved["county"] != persons["county"]).any()
    assert moved["county"].dtype == persons["county"].dtype
    assert moved[["pid", "hhid", "age"]].equals(persons[["pid", "hhid", "age"]])
    # Person counts by county move exactly as household sizes do.
    by_hh = res.data.groupby("county", observed=True)["size"].sum()
    by_p = moved.groupby("county", observed=True).size()
    assert (by_hh.reindex(by_p.index) == by_p).all()


def test_carry_along_adds_missing_columns_and_checks_keys():
    hh = households(200, seed=9)
    persons = persons_of(hh, 2).drop(columns="county")
    res = swap_records(hh, MATCH, SWAP, 0.5, 3)
    moved = carry_along(persons, "hhid", hh, res, SWAP)
    assert moved["county"].dtype == hh["county"].dtype
    bad = persons.copy()
    bad.loc[0, "hhid"] = -1
    with pytest.raises(DataError, match="matches no parent"):
        carry_along(bad, "hhid", hh, res, SWAP)
    dup = hh.copy()
    dup.loc[1, "hhid"] = dup.loc[0, "hhid"]
    with pytest.raises(DataError, match="more than one"):
        carry_along(persons, "hhid", dup, res, SWAP)


def test_carry_along_refuses_inconsistent_children():
    hh = households(200, seed=10)
    persons = persons_of(hh, 3)
    persons.loc[5, "county"] = "c0" if persons.loc[5, "county"] != "c0" else "c1"
    res = swap_records(hh, MATCH, SWAP, 0.5, 3)
    with pytest.raises(DataError, match="differs from its parent"):
        carry_along(persons, "hhid", hh, res, SWAP)


# --- utility ------------------------------------------------------------------------------------


def test_count_table_and_mape():
    df = pd.DataFrame({"a": ["x", "x", "y", None], "b": [1, 2, 1, 1]})
    t = count_table(df, ["a"])
    assert t.tolist() == [2, 1, 1] and t.index[:2].tolist() == ["x", "y"] and pd.isna(t.index[2])
    assert count_table(df, ["a", "b"]).tolist() == [1, 1, 1, 1]
    assert count_table(df, []).tolist() == [4]
    truth = pd.Series({"a": 10, "b": 20, "c": 0})
    released = pd.Series({"a": 12, "b": 15, "d": 5})
    # |12-10|/10 = 20 %, |15-20|/20 = 25 %; c and d have a true count of 0 and are left out.
    assert mape(truth, released) == pytest.approx(22.5)
    assert mape(truth, truth) == 0
    assert np.isnan(mape(pd.Series({"a": 0}), pd.Series({"a": 3})))


def test_stable_order_all_key_widths():
    from dpspec_swap.algorithm import stable_order

    rng = np.random.default_rng(12)
    for n_keys in (3, 1 << 16, 1 << 20, 1 << 32, 1 << 40):
        keys = rng.integers(0, n_keys, 20_000)
        keys[::7] = keys[0]  # plenty of ties, so stability matters
        assert np.array_equal(stable_order(keys, n_keys), np.argsort(keys, kind="stable"))
