"""Many keyed ChaCha20 streams at once: the first words of every unit stream, vectorized.

`streams.unit_rng(run_key, key)` gives each unit of work its own ChaCha20 generator. A mechanism
whose units are tiny (a SafeTab (geography, group) cell draws one to a few dozen noise values)
cannot afford one numpy Generator per unit: building hundreds of thousands of them costs more
than the whole tabulation. This module computes the same words without them: the ChaCha20
block function runs on numpy uint32 columns, one lane per (key, block counter), so N keys cost
a few hundred array operations instead of N generator constructions.

Layout (randomgen's `ChaCha(key=K, counter=0, rounds=20)`, which `unit_rng` builds): the input
block is the four "expand 32-byte k" constants, the key as eight little-endian 32-bit words
(word i = bits 32i..32i+31 of K), the block index as a 64-bit little-endian pair in words 12-13
(carrying from 12 into 13) and zeros in 14-15; the output is the 20-round permutation plus the
input. `random_raw` returns 64-bit words made of two consecutive 32-bit outputs, low half
first, so block b holds words 8b..8b+7 of the stream. `tests/test_keyed_words.py` checks every
word of this module against randomgen for many keys, past the first block and across the carry.
"""

from __future__ import annotations

import hashlib
import struct
from collections import deque

import attrs
import numpy as np
import pandas as pd

from dpspec.engine.streams import DOMAIN, KEY_BITS, encode_key

_CONSTANTS = (0x61707865, 0x3320646E, 0x79622D32, 0x6B206574)  # "expand 32-byte k"
_DOUBLE_ROUNDS = 10  # ChaCha20
_WORDS_PER_BLOCK = 8  # 64-bit words
_BATCH = 1 << 14  # blocks per pass: 16 columns of 16k uint32 stay in cache
_HASH_BATCH = 1 << 16  # keys hashed per pass
_QUARTER_ROUNDS = (
    (0, 4, 8, 12),
    (1, 5, 9, 13),
    (2, 6, 10, 14),
    (3, 7, 11, 15),
    (0, 5, 10, 15),
    (1, 6, 11, 12),
    (2, 7, 8, 13),
    (3, 4, 9, 14),
)


def key_words(keys) -> np.ndarray:
    """256-bit integer keys as an (N, 8) uint32 array in ChaCha's key layout."""
    raw = b"".join(int(k).to_bytes(KEY_BITS // 8, "little") for k in keys)
    return np.frombuffer(raw, dtype="<u4").reshape(-1, 8).astype(np.uint32)


def _column(values):
    """A key column: a pandas Categorical as is (its codes are the factorization), else an array."""
    return values if isinstance(values, pd.Categorical) else np.asarray(values)


@attrs.frozen
class KeyColumns:
    """Unit keys given column-wise: key i is ``(*prefix, columns[0][i], columns[1][i], ..., *suffix)``.

    The cheap way to name many cells of one block (a SafeTab (table, geography, level) block's
    (geocode, group) cells): each distinct column value is encoded once, not once per key. A
    column may be a pandas Categorical (``Categorical.from_codes(region, geocodes)``), whose
    codes then serve as the factorization.
    """

    prefix: tuple = attrs.field(converter=tuple)
    columns: tuple = attrs.field(converter=lambda cols: tuple(_column(c) for c in cols))
    suffix: tuple = attrs.field(converter=tuple, default=())

    def __attrs_post_init__(self):
        if not self.columns or len({len(c) for c in self.columns}) > 1:
            raise ValueError("KeyColumns needs at least one column, all of the same length")

    def __len__(self) -> int:
        return len(self.columns[0])

    def __getitem__(self, rows: slice) -> "KeyColumns":
        return attrs.evolve(self, columns=tuple(c[rows] for c in self.columns))

    def key(self, i: int) -> tuple:
        """Key i as the plain tuple `streams.stream_key` would be given."""
        return (*self.prefix, *(_plain(c[i]) for c in self.columns), *self.suffix)

    def encoded(self) -> "EncodedKeys":
        """The keys with every distinct value of each column encoded once."""
        n_parts = len(self.prefix) + len(self.columns) + len(self.suffix)
        head = b"T" + struct.pack(">Q", n_parts) + b"".join(encode_key(p) for p in self.prefix)
        tail = b"".join(encode_key(p) for p in self.suffix)
        last = len(self.columns) - 1
        parts = [_encoded_codes(col, tail if i == last else b"") for i, col in enumerate(self.columns)]
        return EncodedKeys(head, tuple(c for c, _ in parts), tuple(e for _, e in parts))


@attrs.frozen
class EncodedKeys:
    """`KeyColumns` after encoding: key i is ``head + encodings[0][codes[0][i]] + ...`` (the
    suffix folded into the last column's encodings). Slicing keeps the encodings."""

    head: bytes
    codes: tuple
    encodings: tuple

    def __len__(self) -> int:
        return len(self.codes[0])

    def __getitem__(self, rows: slice) -> "EncodedKeys":
        return attrs.evolve(self, codes=tuple(c[rows] for c in self.codes))


def _plain(value):
    return value.item() if isinstance(value, np.generic) else value


def stream_keys(run_key: int, keys) -> np.ndarray:
    """`streams.stream_key(run_key, key)` for every key, as an (N, 8) uint32 array.

    keys: a sequence of unit keys, a `KeyColumns` or its `EncodedKeys`. One SHA-256 per key (a
    loop over units, not records, run by C-level maps): the hash state after the domain and run
    key (and a `KeyColumns`' prefix, and a run of keys' shared first column) is computed once
    and copied, and the encodings of key parts are memoized.
    """
    base = hashlib.sha256(DOMAIN + int(run_key).to_bytes(KEY_BITS // 8, "big"))
    if isinstance(keys, KeyColumns):
        keys = keys.encoded()
    if isinstance(keys, EncodedKeys):
        raw = _column_digests(keys, base)
    else:
        memo: dict = {}
        raw = _digests(base, [_encode_memo(key, memo) for key in keys])
    if not raw:
        return np.zeros((0, 8), dtype=np.uint32)
    # stream_key reads the digest as a big-endian integer; ChaCha takes it as little-endian words
    flipped = np.frombuffer(raw, dtype=np.uint8).reshape(-1, 32)[:, ::-1]
    return np.ascontiguousarray(flipped).view("<u4").astype(np.uint32)


def _digests(head, messages: list) -> bytes:
    """SHA-256 of what ``head`` was fed followed by each message: 32 bytes per message.

    C-level maps over copies of ``head`` (no Python frame per key), in bounded batches."""
    digest_type = type(head)
    out = []
    for start in range(0, len(messages), _HASH_BATCH):
        hashes = [head.copy() for _ in range(min(_HASH_BATCH, len(messages) - start))]
        deque(map(digest_type.update, hashes, messages[start : start + _HASH_BATCH]), maxlen=0)
        out.append(b"".join(map(digest_type.digest, hashes)))
    return b"".join(out)


def _column_digests(keys: EncodedKeys, base) -> bytes:
    """The digests of encoded column-wise keys; ``base`` is fed their common head (in place).

    Consecutive keys sharing their first column's value (a SafeTab block's cells come
    geocode by geocode) hash that value once per run, from a copy of the head."""
    base.update(keys.head)
    if not len(keys):
        return b""
    first_codes, first_encoded = keys.codes[0], keys.encodings[0]
    if len(keys.codes) == 1:
        return _digests(base, first_encoded[first_codes].tolist())
    rest = None
    for codes, encoded in zip(keys.codes[1:], keys.encodings[1:]):
        part = encoded[codes].tolist()
        rest = part if rest is None else list(map(bytes.__add__, rest, part))
    starts = np.flatnonzero(np.diff(first_codes)) + 1
    if 4 * (starts.size + 1) > len(keys):  # short runs: whole messages cost less
        return _digests(base, list(map(bytes.__add__, first_encoded[first_codes].tolist(), rest)))
    out = []
    for lo, hi in zip(np.r_[0, starts], np.r_[starts, len(keys)]):
        head = base.copy()
        head.update(first_encoded[first_codes[lo]])
        out.append(_digests(head, rest[lo:hi]))
    return b"".join(out)


def _encoded_codes(col, tail: bytes = b"") -> tuple[np.ndarray, np.ndarray]:
    """(codes, encodings): value i of the column encodes as ``encodings[codes[i]]`` (+ ``tail``),
    each distinct value encoded once.

    Hashing merges values that compare equal (1, 1.0 and True), which encode differently
    only across types: a Categorical brings its own codes; a column of one kind (all text, or
    a numeric or boolean array) is factorized; a mixed object column is told apart by (type,
    value).
    """
    if isinstance(col, pd.Categorical):
        if (col.codes < 0).any():
            raise ValueError("a key column holds a missing value")
        codes, uniques = col.codes, list(col.categories)
    elif col.dtype == object and pd.api.types.infer_dtype(col, skipna=False) != "string":
        memo: dict = {}
        codes = np.array([memo.setdefault((type(v), v), len(memo)) for v in col], dtype=np.int64)
        uniques = [v for _, v in memo]
    else:
        codes, uniques = pd.factorize(col, use_na_sentinel=False)
    encoded = _encoded_integers(uniques, tail)
    if encoded is None:
        encoded = np.empty(len(uniques), dtype=object)
        encoded[:] = [encode_key(_plain(u)) + tail for u in uniques]
    return codes, encoded


def _encoded_integers(uniques, tail: bytes):
    """`encode_key(int(u)) + tail` for every value of a signed or unsigned integer array, built with
    array operations (the groups of a detailed query are a million distinct integers), or None
    for any other array. encode_key writes an integer v as b"I", its byte count L as 8 big-endian
    bytes, then v in L big-endian two's-complement bytes, L = (bit_length(|v|) + 8) // 8: L passes
    k, for k = 1..7, exactly when |v| >= 2**(8k - 1), and the L bytes are the last L of v's 8."""
    if not isinstance(uniques, np.ndarray) or uniques.dtype.kind not in "iu" or not len(uniques):
        return None
    if uniques.dtype.kind == "u" and int(uniques.max()) >= 1 << 63:
        return None
    values = uniques.astype(np.int64)
    if (values == np.iinfo(np.int64).min).any():  # |v| overflows; nine bytes
        return None
    size = 1 + sum((np.abs(values) >= 1 << (8 * k - 1)).astype(np.int64) for k in range(1, 8))
    raw = values.astype(">i8").view(np.uint8).reshape(-1, 8)
    out = np.empty(len(values), dtype=object)
    tag, extra = np.frombuffer(b"I", dtype=np.uint8), np.frombuffer(tail, dtype=np.uint8)
    for n in np.unique(size):
        rows = np.flatnonzero(size == n)
        head = np.broadcast_to(
            np.concatenate([tag, np.frombuffer(struct.pack(">Q", n), dtype=np.uint8)]), (rows.size, 9)
        )
        body = np.hstack([head, raw[rows, 8 - n :], np.broadcast_to(extra, (rows.size, extra.size))])
        out[rows] = np.ascontiguousarray(body).view(f"V{body.shape[1]}").ravel().tolist()
    return out


def _encode_memo(key, memo: dict) -> bytes:
    """`encode_key(key)`, with the encodings of a tuple's parts cached by (type, value)."""
    if isinstance(key, (tuple, list)):
        parts = []
        for part in key:
            tag = (type(part), part) if not isinstance(part, (tuple, list)) else None
            enc = memo.get(tag) if tag is not None else None
            if enc is None:
                enc = _encode_memo(part, memo)
                if tag is not None:
                    memo[tag] = enc
            parts.append(enc)
        return b"T" + struct.pack(">Q", len(parts)) + b"".join(parts)
    return encode_key(key)


def chacha_blocks(keys: np.ndarray, counters: np.ndarray) -> np.ndarray:
    """ChaCha20 output blocks: row i is block ``counters[i]`` of the stream keyed by ``keys[i]``.

    keys: (M, 8) uint32; counters: (M,) unsigned 64-bit block indices. Returns (M, 16) uint32.
    """
    keys = np.asarray(keys, dtype=np.uint32)
    counters = np.asarray(counters, dtype=np.uint64)
    m = len(counters)
    out = np.empty((m, 16), dtype=np.uint32)
    for start in range(0, m, _BATCH):
        stop = min(m, start + _BATCH)
        out[start:stop] = _block_rows(keys[start:stop], counters[start:stop]).T
    return out


def _block_rows(keys: np.ndarray, counters: np.ndarray) -> np.ndarray:
    """The blocks as 16 rows of n uint32 (word w of every block in row w): one array per state
    word keeps every operation a contiguous in-place numpy pass."""
    n = len(counters)
    state = np.empty((16, n), dtype=np.uint32)
    state[:4] = np.asarray(_CONSTANTS, dtype=np.uint32)[:, None]
    state[4:12] = keys.T
    state[12] = (counters & np.uint64(0xFFFFFFFF)).astype(np.uint32)
    state[13] = (counters >> np.uint64(32)).astype(np.uint32)
    state[14:] = 0
    out = state.copy()
    x = list(out)  # views: the rounds update ``out`` in place
    tmp = np.empty(n, dtype=np.uint32)
    for _ in range(_DOUBLE_ROUNDS):
        for a, b, c, d in _QUARTER_ROUNDS:
            # a += b; d ^= a; d <<<= 16;  c += d; b ^= c; b <<<= 12;  then again with 8 and 7
            for add_to, add, mix, bits in ((a, b, d, 16), (c, d, b, 12), (a, b, d, 8), (c, d, b, 7)):
                np.add(x[add_to], x[add], out=x[add_to])
                np.bitwise_xor(x[mix], x[add_to], out=x[mix])
                _rotl(x[mix], bits, tmp)
    out += state
    return out


def _rotl(v: np.ndarray, bits: int, tmp: np.ndarray) -> None:
    """v <- v rotated left by ``bits`` (uint32, in place)."""
    np.right_shift(v, np.uint32(32 - bits), out=tmp)
    np.left_shift(v, np.uint32(bits), out=v)
    np.bitwise_or(v, tmp, out=v)


def lane_words(keys: np.ndarray, counts) -> np.ndarray:
    """The first ``counts[i]`` 64-bit words of stream i, concatenated lane after lane.

    Equal, word for word, to ``ChaCha(key=K_i, counter=0, rounds=20).random_raw(counts[i])``.
    """
    keys = np.asarray(keys, dtype=np.uint32).reshape(-1, 8)
    counts = np.asarray(counts, dtype=np.int64)
    if counts.shape != (len(keys),):
        raise ValueError("one count per key")
    if (counts < 0).any():
        raise ValueError("counts must be nonnegative")
    n_blocks = -(-counts // _WORDS_PER_BLOCK)
    first = np.cumsum(n_blocks) - n_blocks  # each lane's first block, in the batch's numbering
    lane = np.repeat(np.arange(len(keys)), n_blocks)
    block = np.arange(len(lane), dtype=np.int64) - np.repeat(first, n_blocks)
    # draw j of lane i: word j % 8 of the lane's block j // 8
    j = np.arange(int(counts.sum()), dtype=np.int64) - np.repeat(np.cumsum(counts) - counts, counts)
    draw_block = np.repeat(first, counts) + j // _WORDS_PER_BLOCK
    low_row = 2 * (j % _WORDS_PER_BLOCK)
    out = np.empty(j.size, dtype=np.uint64)
    for start in range(0, len(lane), _BATCH):
        stop = min(len(lane), start + _BATCH)
        rows = _block_rows(keys[lane[start:stop]], block[start:stop].astype(np.uint64))
        lo, hi = np.searchsorted(draw_block, [start, stop])  # draws are in block order
        b = draw_block[lo:hi] - start
        r = low_row[lo:hi]
        out[lo:hi] = rows[r, b].astype(np.uint64) | (rows[r + 1, b].astype(np.uint64) << np.uint64(32))
    return out
