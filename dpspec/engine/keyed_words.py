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
from itertools import repeat

import attrs
import numpy as np
import pandas as pd

from dpspec.engine.streams import DOMAIN, KEY_BITS, encode_key

_CONSTANTS = (0x61707865, 0x3320646E, 0x79622D32, 0x6B206574)  # "expand 32-byte k"
_DOUBLE_ROUNDS = 10  # ChaCha20
_WORDS_PER_BLOCK = 8  # 64-bit words
_BATCH = 1 << 14  # blocks per pass: 16 columns of 16k uint32 stay in cache
_QUARTER_ROUNDS = ((0, 4, 8, 12), (1, 5, 9, 13), (2, 6, 10, 14), (3, 7, 11, 15),
                   (0, 5, 10, 15), (1, 6, 11, 12), (2, 7, 8, 13), (3, 4, 9, 14))


def key_words(keys) -> np.ndarray:
    """256-bit integer keys as an (N, 8) uint32 array in ChaCha's key layout."""
    raw = b"".join(int(k).to_bytes(KEY_BITS // 8, "little") for k in keys)
    return np.frombuffer(raw, dtype="<u4").reshape(-1, 8).astype(np.uint32)


@attrs.frozen
class KeyColumns:
    """Unit keys given column-wise: key i is ``(*prefix, columns[0][i], columns[1][i], ..., *suffix)``.

    The cheap way to name many cells of one block (a SafeTab (table, geography, level) block's
    (geocode, group) cells): each distinct column value is encoded once, not once per key.
    """

    prefix: tuple = attrs.field(converter=tuple)
    columns: tuple = attrs.field(converter=lambda cols: tuple(np.asarray(c) for c in cols))
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


def _plain(value):
    return value.item() if isinstance(value, np.generic) else value


def stream_keys(run_key: int, keys) -> np.ndarray:
    """`streams.stream_key(run_key, key)` for every key, as an (N, 8) uint32 array.

    keys: a sequence of unit keys, or a `KeyColumns`. One SHA-256 per key (a Python loop over
    units, not records): the hash state after the domain and run key (and a `KeyColumns`'
    prefix) is computed once and copied, and the encodings of key parts are memoized.
    """
    base = hashlib.sha256(DOMAIN + int(run_key).to_bytes(KEY_BITS // 8, "big"))
    if isinstance(keys, KeyColumns):
        messages = _column_messages(keys, base)
    else:
        memo: dict = {}
        messages = [_encode_memo(key, memo) for key in keys]
    copy = base.copy

    def digest(message: bytes) -> bytes:
        h = copy()
        h.update(message)
        return h.digest()

    raw = b"".join(map(digest, messages))
    if not raw:
        return np.zeros((0, 8), dtype=np.uint32)
    # stream_key reads the digest as a big-endian integer; ChaCha takes it as little-endian words
    flipped = np.frombuffer(raw, dtype=np.uint8).reshape(-1, 32)[:, ::-1]
    return np.ascontiguousarray(flipped).view("<u4").astype(np.uint32)


def _column_messages(keys: KeyColumns, base) -> list:
    """Each key's encoding after its common head, which is fed into ``base`` (in place)."""
    n_parts = len(keys.prefix) + len(keys.columns) + len(keys.suffix)
    base.update(b"T" + struct.pack(">Q", n_parts) + b"".join(encode_key(p) for p in keys.prefix))
    tail = b"".join(encode_key(p) for p in keys.suffix)
    messages = None
    for col in keys.columns:
        part = _encoded_column(col)
        messages = part if messages is None else list(map(bytes.__add__, messages, part))
    return list(map(bytes.__add__, messages, repeat(tail, len(messages)))) if tail else messages


def _encoded_column(col: np.ndarray) -> list:
    """encode_key of every value of a column, each distinct value encoded once.

    Hashing merges values that compare equal (1, 1.0 and True), which encode differently
    only across types: a column of one kind (all text, or a numeric or boolean array) is
    factorized; a mixed object column is encoded value by value.
    """
    if col.dtype == object and pd.api.types.infer_dtype(col, skipna=False) != "string":
        memo: dict = {}
        return [memo[k] if (k := (type(v), v)) in memo else memo.setdefault(k, encode_key(v)) for v in col]
    codes, uniques = pd.factorize(col, use_na_sentinel=False)
    encoded = np.array([encode_key(_plain(u)) for u in uniques] + [b""], dtype=object)
    return encoded[codes].tolist()


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
        out[start:stop] = _blocks(keys[start:stop], counters[start:stop])
    return out


def _blocks(keys: np.ndarray, counters: np.ndarray) -> np.ndarray:
    n = len(counters)
    state = np.empty((16, n), dtype=np.uint32)
    state[:4] = np.asarray(_CONSTANTS, dtype=np.uint32)[:, None]
    state[4:12] = keys.T
    state[12] = (counters & np.uint64(0xFFFFFFFF)).astype(np.uint32)
    state[13] = (counters >> np.uint64(32)).astype(np.uint32)
    state[14:] = 0
    x = [row.copy() for row in state]
    tmp = np.empty(n, dtype=np.uint32)
    for _ in range(_DOUBLE_ROUNDS):
        for a, b, c, d in _QUARTER_ROUNDS:
            # a += b; d ^= a; d <<<= 16;  c += d; b ^= c; b <<<= 12;  then again with 8 and 7
            for add_to, add, mix, bits in ((a, b, d, 16), (c, d, b, 12), (a, b, d, 8), (c, d, b, 7)):
                np.add(x[add_to], x[add], out=x[add_to])
                np.bitwise_xor(x[mix], x[add_to], out=x[mix])
                _rotl(x[mix], bits, tmp)
    for i in range(16):
        np.add(x[i], state[i], out=x[i])
    return np.stack(x, axis=1)


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
    lane = np.repeat(np.arange(len(keys)), n_blocks)
    first = np.cumsum(n_blocks) - n_blocks
    block = np.arange(len(lane), dtype=np.int64) - np.repeat(first, n_blocks)
    out = chacha_blocks(keys[lane], block.astype(np.uint64))
    words = (out[:, 0::2].astype(np.uint64) | (out[:, 1::2].astype(np.uint64) << np.uint64(32))).reshape(-1)
    # keep each lane's first counts[i] words out of its n_blocks * 8
    start = np.repeat(first * _WORDS_PER_BLOCK, counts)
    offset = np.arange(int(counts.sum()), dtype=np.int64) - np.repeat(np.cumsum(counts) - counts, counts)
    return words[start + offset]
