"""The local engine's counts come out in the canonical order however they are sorted.

`count_frame` orders the counts on the stored codes of categorical columns (fast:
`frames.order_key`) and merges combinations equal only once cast; it must give exactly the frame
that casting every row and sorting it (`frames.sort_rows`) gives, missing values last, so that
every engine hands a mechanism the same counts in the same order.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from dpspec.engine import frames
from dpspec.engine.local import count_frame


def reference(table: pd.DataFrame, by: list[str]) -> pd.DataFrame:
    """Counts the slow, obvious way: cast every row, group on the canonical values, sort."""
    schema = frames.schema_of(table[by])
    rows = frames.cast(table[by], schema)
    counts = rows.groupby(by, sort=False, dropna=False).size().rename("count").reset_index()
    return frames.sort_rows(frames.cast(counts, {**schema, "count": "int64"}), by)


def table(n: int = 3000, seed: int = 5) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    geo = rng.choice(["25017", "25025", "9", "10", "x"], n).astype(object)
    geo[rng.random(n) < 0.1] = None
    race = pd.Categorical(
        rng.choice(["1002", "0042", "2010", "777"], n), categories=["777", "2010", "1002", "0042", "unused"]
    )
    race[rng.random(n) < 0.2] = np.nan
    age = rng.integers(0, 23, n)
    weight = np.where(rng.random(n) < 0.1, np.nan, rng.integers(0, 3, n).astype(float))
    return pd.DataFrame(
        {
            "geo": pd.Categorical(geo),
            "race": race,
            "none": pd.Categorical([None] * n, categories=[]),
            "age": age,
            "flag": rng.random(n) < 0.5,
            "size": weight,
            "label": pd.Categorical(rng.choice([3, 12, 100], n)),
            "text": rng.choice(["b", "a", "c"], n).astype(object),
            "maybe": pd.array(np.where(rng.random(n) < 0.2, None, rng.random(n) < 0.5), dtype="boolean"),
        }
    )


@pytest.mark.parametrize(
    "by",
    [
        ["geo"],
        ["geo", "race", "age"],
        ["race", "flag", "size"],
        ["label", "geo"],
        ["geo", "race", "age", "flag", "size", "label"],
        ["text", "geo"],
        ["none", "race"],
        ["maybe", "geo"],
    ],
)
def test_counts_match_casting_every_row_then_sorting(by):
    frame = table()
    got = count_frame(frame, by)
    pd.testing.assert_frame_equal(got, reference(frame, by))
    assert got["count"].sum() == len(frame)


@pytest.mark.parametrize("by", [["geo", "race", "age"], ["text", "geo"], ["maybe", "label"], ["none", "size", "flag"]])
def test_totals_match_casting_every_row_then_summing_and_sorting(by):
    """`LocalEngine.total` orders and merges its sums as `count_frame` does its counts."""
    from dpspec.engine import LocalEngine

    frame = table().assign(count=np.random.default_rng(2).integers(0, 50, 3000))
    schema = frames.schema_of(frame[by])
    rows = frames.cast(frame[by], schema).assign(count=frame["count"].to_numpy())
    want = rows.groupby(by, sort=False, dropna=False)["count"].sum().reset_index()
    want = frames.sort_rows(frames.cast(want, {**schema, "count": "int64"}), by)
    pd.testing.assert_frame_equal(LocalEngine().total(frame, by), want)
    merged = pd.DataFrame({"c": pd.Categorical([1, "1", 2], categories=[1, "1", 2]), "count": [4, 5, 6]})
    assert LocalEngine().total(merged, ["c"]).to_dict("list") == {"c": ["1", "2"], "count": [9, 6]}


def test_plain_text_and_labels_equal_once_cast_are_ranked_and_merged():
    """1 and "1" are one value once cast: one rank, so their counts are merged into one row."""
    frame = pd.DataFrame({"c": pd.Categorical([1, "1", 2, 1], categories=[1, "1", 2]), "t": ["b", "a", "b", "a"]})
    counts = frame.groupby(["c"], sort=False, observed=True).size().rename("count").reset_index()
    assert len(counts) == 3 and len(set(frames.order_key(counts, ["c"]))) == 2
    assert count_frame(frame, ["c"]).to_dict("list") == {"c": ["1", "2"], "count": [3, 1]}
    assert count_frame(frame, ["t"]).to_dict("list") == {"t": ["a", "b"], "count": [2, 2]}
    assert count_frame(frame, ["t", "c"]).to_dict("list") == {
        "t": ["a", "b", "b"],
        "c": ["1", "1", "2"],
        "count": [2, 1, 1],
    }


def test_one_radix_key_orders_rows_as_a_lexsort_even_past_int64():
    """Eight columns of 200,000 values need 2**140 keys: the key is re-ranked on the way."""
    from dpspec.engine.frames import mixed_radix

    rng = np.random.default_rng(9)
    ranks = [rng.integers(0, 200_000, 5000) for _ in range(8)] + [rng.integers(0, 3, 5000)]
    order = np.argsort(mixed_radix(ranks), kind="stable")
    assert (order == np.lexsort(ranks[::-1])).all()
