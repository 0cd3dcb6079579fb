"""The vectorized multi-key ChaCha20 (`dpspec.engine.keyed_words`) against randomgen's ChaCha,
word for word: lane i of `lane_words` is the unit stream `streams.unit_rng` would give, past the
first block and across the block counter's carry; stream keys equal `streams.stream_key`."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from randomgen import ChaCha

from dpspec.engine.keyed_words import KeyColumns, chacha_blocks, key_words, lane_words, stream_keys
from dpspec.engine.streams import stream_key, unit_rng


def _randomgen_words(key: int, n: int, block: int = 0) -> np.ndarray:
    """n 64-bit words of randomgen's ChaCha20 stream from the start of block ``block``."""
    return ChaCha(key=key, counter=16 * block, rounds=20).random_raw(n)


def _as_words(blocks: np.ndarray) -> np.ndarray:
    return (blocks[:, 0::2].astype(np.uint64) | (blocks[:, 1::2].astype(np.uint64) << np.uint64(32))).reshape(-1)


def test_lanes_equal_randomgen_for_many_keys_and_positions():
    rng = np.random.default_rng(2026)
    keys = [0, 1, (1 << 256) - 1, 1 << 255, (1 << 32) - 1]
    keys += [int.from_bytes(rng.bytes(32), "little") for _ in range(195)]
    counts = rng.integers(0, 40, len(keys))  # up to five blocks: past the first
    counts[:5] = [17, 8, 9, 0, 1]
    words = lane_words(key_words(keys), counts)
    assert words.dtype == np.uint64 and words.size == counts.sum()
    pos = 0
    for key, n in zip(keys, counts):
        assert np.array_equal(words[pos : pos + n], _randomgen_words(key, int(n))), key
        pos += n


def test_block_counter_carries_into_the_next_word():
    """randomgen keeps the block index in words 12-13 of the input: 2**32 - 1 then 2**32 carries."""
    key = 0x0123456789ABCDEF_FEDCBA9876543210_0F1E2D3C4B5A6978_8796A5B4C3D2E1F0
    counters = np.array([2**32 - 1, 2**32, 2**32 + 1, 2**40 + 5, 2**59 + 3], dtype=np.uint64)
    blocks = chacha_blocks(key_words([key] * len(counters)), counters)
    for row, c in zip(blocks, counters):
        assert np.array_equal(_as_words(row[None]), _randomgen_words(key, 8, int(c)))
    assert not np.array_equal(blocks[0], blocks[1])


def test_a_lane_is_the_unit_stream():
    keys = [("cell", g, "stage 1") for g in range(50)]
    words = lane_words(stream_keys(99, keys), np.full(len(keys), 3))
    for i, key in enumerate(keys):
        assert np.array_equal(words[3 * i : 3 * i + 3], unit_rng(99, key).bit_generator.random_raw(3))


def test_large_batches_cross_the_internal_pass_size():
    import dpspec.engine.keyed_words as kw

    rng = np.random.default_rng(1)
    keys = rng.integers(0, 2**32, (kw._BATCH + 77, 8), dtype=np.uint32)
    blocks = chacha_blocks(keys, np.zeros(len(keys), dtype=np.uint64))
    for i in (0, kw._BATCH - 1, kw._BATCH, len(keys) - 1):
        key = int.from_bytes(keys[i].astype("<u4").tobytes(), "little")
        assert np.array_equal(_as_words(blocks[i : i + 1]), _randomgen_words(key, 8))


def test_stream_keys_equal_stream_key():
    run_key = 2**200 + 17
    keys = [
        ("safetab", "t1", "county", 1, "25017", "1010", "stage 1"),
        (),
        5,
        "5",
        (5,),
        ("a", ("b", 2.5)),
        (True, 1, 1.0, None, b"x", np.int32(7)),
    ]
    assert np.array_equal(stream_keys(run_key, keys), key_words([stream_key(run_key, k) for k in keys]))
    assert stream_keys(run_key, []).shape == (0, 8)


@pytest.mark.parametrize(
    "columns",
    [
        (
            np.array(["25001", "25003", "25001", "x"], dtype=object),
            np.array(["1010", "1010", "2000", "é"], dtype=object),
        ),
        (np.array([3, 1, 3, -5]), np.array([True, False, True, True])),
        (np.array([1, 1.0, True, "1", None, 2.5, np.int64(1)], dtype=object),),  # mixed: equal values, different keys
        (np.array([1.0, 2.5, 1.0]),),
        (np.repeat(np.array(["25001", "25003", "x"], dtype=object), 12), np.arange(36) % 5),  # runs of a first value
        (
            pd.Categorical.from_codes(np.repeat([2, 0, 1], 12), ["a", "b", "c"]),
            pd.Categorical.from_codes(np.arange(36) % 4, ["1010", "2000", "3000", "é"]),
        ),
    ],
)
def test_key_columns_equal_their_tuples(columns):
    keys = KeyColumns(("safetab cell noise", "t1", "county", 2), columns, ("stage 2",))
    expected = key_words([stream_key(7, keys.key(i)) for i in range(len(keys))])
    assert np.array_equal(stream_keys(7, keys), expected)
    assert np.array_equal(stream_keys(7, keys[1:3]), expected[1:3])
    assert np.array_equal(stream_keys(7, keys.encoded()[2:]), expected[2:])


def test_mixed_values_that_compare_equal_get_different_streams():
    keys = KeyColumns(("x",), (np.array([1, True, "1"], dtype=object),))
    words = stream_keys(3, keys)
    assert len({row.tobytes() for row in words}) == 3


def test_key_columns_must_be_aligned():
    with pytest.raises(ValueError):
        KeyColumns(("a",), (np.arange(3), np.arange(4)))
    with pytest.raises(ValueError):
        KeyColumns(("a",), ())


def test_distinct_keys_give_distinct_words():
    """No two of 20,000 cells share a key or a first word (a collision would be a 2**-64 event)."""
    keys = KeyColumns(
        ("t", "tract", 1),
        (np.repeat(np.arange(200), 100).astype(str).astype(object), np.tile(np.arange(100), 200)),
        ("stage 1",),
    )
    words = stream_keys(11, keys)
    assert len({row.tobytes() for row in words}) == len(keys)
    first = lane_words(words, np.ones(len(keys), dtype=np.int64))
    assert np.unique(first).size == len(keys)


def test_integer_key_parts_are_encoded_with_array_operations_exactly_as_encode_key():
    """`_encoded_integers` (a million distinct groups of a detailed query at a time) writes every
    integer as `encode_key` does: at each byte-count boundary, for negative values, with the
    suffix folded in, for unsigned arrays; a value it cannot write (beyond int64) falls back."""
    from dpspec.engine.keyed_words import _encoded_codes, _encoded_integers
    from dpspec.engine.streams import encode_key

    edges = [s * ((1 << (8 * k - 1)) + d) for k in range(1, 8) for d in (-1, 0, 1) for s in (1, -1)]
    values = np.unique(
        np.r_[
            np.arange(-300, 300),
            edges,
            (1 << 63) - 1,
            -(1 << 63) + 1,
            np.random.default_rng(3).integers(-(1 << 62), 1 << 62, 5000),
        ]
    )
    for tail in (b"", encode_key("x") + encode_key(7)):
        got = _encoded_integers(values, tail)
        assert [type(g) for g in got[:3]] == [bytes] * 3
        assert list(got) == [encode_key(int(v)) + tail for v in values]
    small = np.array([0, 200, 70000], dtype=np.uint32)
    assert list(_encoded_integers(small, b"")) == [encode_key(int(v)) for v in small]
    assert _encoded_integers(np.array([0, 1 << 63], dtype=np.uint64), b"") is None
    assert _encoded_integers(np.array([-(1 << 63)]), b"") is None
    assert _encoded_integers(np.array([True, False]), b"") is None
    codes, encoded = _encoded_codes(np.array([5, -(1 << 63), 5]))  # the fallback gives the same words
    assert list(codes) == [0, 1, 0] and list(encoded) == [encode_key(5), encode_key(-(1 << 63))]
