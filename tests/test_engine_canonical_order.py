"""`frames.canonical_order` puts rows exactly where sorting the decoded frame would.

The local engine orders a table on its stored codes (`LocalEngine.stream`, `map_groups`,
`count_frame`) instead of decoding every row and sorting text; that is only sound if the order is
the one `frames.sort_rows(frames.canonical(frame), columns)` gives, row for row, ties included
(a unit's input and a streamed release are pinned by their bytes). Random frames mix every
column kind the engine meets: categoricals (text, numbers, bools, unused categories, missing,
and categories equal only once cast, 1 and "1"), plain and mixed text, floats with NaN and
signed zeros, integers, bools and nullable booleans, with many duplicate rows.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from dpspec.engine import LocalEngine, frames


def column(kind: str, n: int, rng) -> pd.Series:
    def pick(values, missing=0.0):
        out = np.empty(n, dtype=object)
        out[:] = [values[i] for i in rng.integers(0, len(values), n)]
        out[rng.random(n) < missing] = None
        return out

    if kind == "cat_text":
        cats = ["b", "a", "10", "9", "é", "Z", "", "a b", "\uffff", "\U0001d11e", "unused"]  # code point order
        return pd.Series(pd.Categorical(pick(cats[:-1], 0.2), categories=list(rng.permutation(cats))))
    if kind == "cat_mixed":  # 1 and "1", 2 and "2" are one value each once cast to text
        cats = [1, "1", 2, "2", "02", 10, "x"]
        return pd.Series(pd.Categorical(pick(cats, 0.15), categories=[cats[i] for i in rng.permutation(len(cats))]))
    if kind == "cat_int":  # missing codes: canonical float64
        cats = [10, 2, -1, 7, 300]
        return pd.Series(pd.Categorical(pick(cats[:-1], 0.2), categories=list(rng.permutation(cats))))
    if kind == "cat_int_full":
        return pd.Series(pd.Categorical(rng.choice([5, -3, 40], n), categories=[40, 5, -3, 0]))
    if kind == "cat_bool":
        return pd.Series(pd.Categorical(rng.random(n) < 0.5, categories=[True, False]))
    if kind == "cat_bool_missing":  # canonical nullable boolean
        return pd.Series(pd.Categorical(pick([True, False], 0.3), categories=[True, False]))
    if kind == "text":  # missing as None or NaN
        values = pick(["b", "a", "B", "ab", "", "z9", "ä"], 0.2)
        values[rng.random(n) < 0.1] = np.nan
        return pd.Series(values, dtype=object)
    if kind == "string_dtype":  # pandas' own text types: "string" (missing as NA), "str" (as NaN)
        return pd.Series(
            pick(["b", "a", "Ab", "", "a ", "\uffff", "\U0001d11e"], 0.2),
            dtype=["string", "str"][int(rng.integers(0, 2))],
        )
    if kind == "mixed_text":  # plain object column of numbers and text: cast with str()
        return pd.Series(pick([1, "1", 2.5, "2.5", "a", 10], 0.1), dtype=object)
    if kind == "float":
        values = np.array([0.5, -0.0, 0.0, np.inf, -2.0, np.nan, 3.0])
        return pd.Series(values[rng.integers(0, len(values), n)])
    if kind == "int":
        return pd.Series(rng.integers(-3, 4, n))
    if kind == "bool":
        return pd.Series(rng.random(n) < 0.4)
    if kind == "maybe":
        return pd.Series(pd.array(pick([True, False], 0.25), dtype="boolean"))
    raise ValueError(kind)


KINDS = [
    "cat_text",
    "cat_mixed",
    "cat_int",
    "cat_int_full",
    "cat_bool",
    "cat_bool_missing",
    "text",
    "string_dtype",
    "mixed_text",
    "float",
    "int",
    "bool",
    "maybe",
]


def random_frame(seed: int):
    """A frame of 0 to 80 rows over 1 to 6 random columns (kinds may repeat), and an order_by:
    None (every column) or a random selection of the columns in a random order."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(0, 81))
    kinds = [KINDS[i] for i in rng.integers(0, len(KINDS), int(rng.integers(1, 7)))]
    frame = pd.DataFrame({f"{k}_{i}": column(k, n, rng) for i, k in enumerate(kinds)})
    frame.index = rng.permutation(n) + 100  # an index that is neither positions nor sorted
    if rng.random() < 0.3:
        return frame, None
    cols = list(frame.columns)
    return frame, [cols[i] for i in rng.permutation(len(cols))[: int(rng.integers(1, len(cols) + 1))]]


def expected_positions(frame: pd.DataFrame, order_by) -> np.ndarray:
    """Where each row of `sort_rows(canonical(frame), order_by)` came from (the slow, obvious way)."""
    cols = list(frame.columns) if order_by is None else list(order_by)
    decoded = frames.canonical(frame).assign(__position=np.arange(len(frame)))
    return frames.sort_rows(decoded, cols)["__position"].to_numpy()


SEEDS = range(300)


@pytest.mark.parametrize("chunk", [SEEDS[i : i + 100] for i in range(0, len(SEEDS), 100)])
def test_order_is_sort_rows_of_the_canonical_frame(chunk):
    reordered = 0
    for seed in chunk:
        frame, order_by = random_frame(seed)
        got = frames.canonical_order(frame, order_by)
        want = expected_positions(frame, order_by)
        assert got.tolist() == want.tolist(), f"seed {seed}, order_by {order_by}\n{frame}"
        reordered += not np.array_equal(want, np.arange(len(frame)))
    assert reordered > len(chunk) // 2  # the frames are not sorted already: the check has teeth


def test_equal_once_cast_categories_share_a_rank_and_later_columns_decide():
    """1 and "1" are both "1": their rows interleave by the next column, as after decoding."""
    frame = pd.DataFrame(
        {"c": pd.Categorical([1, "1", 1, "1", 2], categories=["1", 2, 1]), "t": ["d", "c", "b", "a", "a"]}
    )
    assert frames.canonical_order(frame).tolist() == [3, 2, 1, 0, 4]
    key = frames.order_key(frame, ["c"])
    assert key[0] == key[1] == key[2] == key[3] < key[4]


def test_a_misordered_rank_is_caught():
    """The comparison above fails when one column's ranks are off (e.g. text by category order)."""
    frame = pd.DataFrame({"c": pd.Categorical(["b", "a", "c", None], categories=["c", "b", "a"])})
    wrong = np.argsort(np.where(frame["c"].cat.codes < 0, 3, frame["c"].cat.codes), kind="stable")
    assert wrong.tolist() != expected_positions(frame, None).tolist()
    assert frames.canonical_order(frame).tolist() == expected_positions(frame, None).tolist() == [1, 0, 2, 3]


@pytest.mark.parametrize("seed", range(0, 60, 3))
def test_local_engine_streams_and_maps_in_that_order(seed):
    """`stream` (order_by, missing last) and `map_groups` (keys, then every column) hand out
    exactly the rows of `sort_rows(canonical(frame))`, whatever kinds the columns are."""
    frame, order_by = random_frame(seed)
    if len(frame) == 0:
        return
    engine = LocalEngine()
    want = frames.sort_rows(frames.canonical(frame), order_by)
    chunks = list(engine.stream(frame, order_by, chunk_rows=7))
    assert all(c.dtypes.equals(want.dtypes) for c in chunks)  # the table's kinds, even in a chunk with no missing value
    pd.testing.assert_frame_equal(pd.concat(chunks, ignore_index=True), want, check_exact=True)

    by = [frame.columns[0]]
    seen = []
    engine.map_groups(frame, by, lambda key, rows, rng: seen.append(rows) or rows.iloc[:0], run_key=1, stage="t")
    rest = [c for c in frame.columns if c not in by]
    pd.testing.assert_frame_equal(
        pd.concat(seen, ignore_index=True), frames.sort_rows(frames.canonical(frame), by + rest), check_exact=True
    )
