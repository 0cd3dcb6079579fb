"""Discrete Gaussian noise keyed per unit: every cell draws from its own ChaCha20 stream.

    noise = keyed_discrete_gaussian(sigma2, run_key, keys, counts)

gives ``counts[i]`` draws for ``keys[i]``, cells in order, and by definition cell i's draws are

    discrete_gaussian(sigma2, counts[i], unit_rng(run_key, keys[i]))

the project's one sampler on the cell's own unit stream. So a release does not depend on how
cells are batched, on which engine or worker draws them, or on which other cells exist, and no
two cells share a stream (distinct keys, distinct SHA-256 stream keys).

How it stays cheap with hundreds of thousands of cells: the sampler's first round needs one
64-bit word per draw, which is the first ``counts[i]`` words of cell i's stream; those come from
`dpspec.engine.keyed_words` for all cells at once (ChaCha20 on numpy columns), not from one
numpy Generator per cell. The same table sampler (`noise._table_draws`) then runs on them. Its
rare steps (a rejected round, an exact acceptance decision, a tail draw: together well under
one draw in a million) get a generator for that cell only, positioned right after the words the
first round used, which is exactly where the cell's own generator would be. Cells with more
draws than the sampler's chunk, or a sigma² too large for the table, are drawn with the cell's
generator directly (the definition itself).
"""

from __future__ import annotations

import numpy as np
from randomgen import ChaCha

from dpspec.engine.keyed_words import EncodedKeys, KeyColumns, lane_words, stream_keys
from dpspec.run import noise

_BATCH_DRAWS = 1 << 17  # first-round words per batch of cells: bounds the ChaCha temporaries

__all__ = ["KeyColumns", "keyed_discrete_gaussian"]


def keyed_discrete_gaussian(sigma2, run_key: int, keys, counts) -> np.ndarray:
    """``counts[i]`` exact discrete Gaussian draws from the stream of unit key ``keys[i]``, concatenated.

    keys: a sequence of unit keys (tuples of ints, strings, ...) or a `KeyColumns`; counts: one
    nonnegative integer per key, or one integer for every key. int64 array of ``sum(counts)``.
    """
    n_keys = len(keys)
    counts = np.broadcast_to(np.asarray(counts, dtype=np.int64), (n_keys,))
    if (counts < 0).any():
        raise ValueError("draw counts must be nonnegative")
    if isinstance(keys, KeyColumns):
        keys = keys.encoded()  # each distinct value once, not once per batch
    s2 = noise.effective_sigma2(sigma2)
    table = noise._gaussian_table(s2.numerator, s2.denominator)
    out = np.empty(int(counts.sum()), dtype=np.int64)
    ends = np.cumsum(counts)
    lo = 0
    while lo < n_keys:
        # cells [lo, hi): at most _BATCH_DRAWS words, at least one cell
        hi = max(lo + 1, int(np.searchsorted(ends, ends[lo] - counts[lo] + _BATCH_DRAWS, side="right")))
        start = int(ends[lo] - counts[lo])
        out[start : int(ends[hi - 1])] = _batch(s2, table, stream_keys(run_key, _rows(keys, lo, hi)), counts[lo:hi])
        lo = hi
    return out


def _rows(keys, lo: int, hi: int):
    return keys[lo:hi] if isinstance(keys, EncodedKeys) else [keys[i] for i in range(lo, hi)]


def _batch(s2, table, key_words: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """The draws of a batch of cells, from their stream keys (N, 8)."""
    out = np.empty(int(counts.sum()), dtype=np.int64)
    start = np.cumsum(counts) - counts
    fast = (counts <= noise._CHUNK) if table is not None else np.zeros(len(counts), dtype=bool)
    lanes = np.flatnonzero(fast & (counts > 0))
    if lanes.size:
        n = counts[lanes]
        where = np.repeat(start[lanes], n) + np.arange(int(n.sum())) - np.repeat(np.cumsum(n) - n, n)
        source = _CellStreams(key_words[lanes], n)
        out[where] = noise._table_draws(table, lane_words(key_words[lanes], n), source)
    for i in np.flatnonzero(~fast & (counts > 0)):
        out[start[i] : start[i] + counts[i]] = noise.discrete_gaussian(s2, int(counts[i]), _cell_rng(key_words[i], 0))
    return out


def _cell_rng(key_row: np.ndarray, words_used: int) -> np.random.Generator:
    """Cell stream's generator after its first ``words_used`` 64-bit words (ChaCha counts 32-bit words)."""
    key = int.from_bytes(np.asarray(key_row, dtype="<u4").tobytes(), "little")
    return np.random.Generator(ChaCha(key=key, counter=2 * words_used, rounds=20))


class _CellStreams:
    """The table sampler's rare steps, each read from its own cell's stream (`noise._table_draws`).

    Draws are laid out cell after cell; a cell's generator is made on first need, positioned
    after the cell's first-round words, and then consumed in the order the sampler asks, which
    for one cell is the order `discrete_gaussian` on that cell's generator would use.
    """

    def __init__(self, key_words: np.ndarray, counts: np.ndarray):
        self._keys = key_words
        self._counts = counts
        self._cell = np.repeat(np.arange(len(counts)), counts)
        self._rngs: dict = {}

    def rng(self, draw: int) -> np.random.Generator:
        cell = int(self._cell[draw])
        if cell not in self._rngs:
            self._rngs[cell] = _cell_rng(self._keys[cell], int(self._counts[cell]))
        return self._rngs[cell]

    def words(self, pending: np.ndarray) -> np.ndarray:
        """One new word per pending draw, each from its cell's stream, in draw order."""
        out = np.empty(pending.size, dtype=np.uint64)
        cells = self._cell[pending]
        bounds = np.flatnonzero(np.diff(cells)) + 1
        for lo, hi in zip(np.r_[0, bounds], np.r_[bounds, pending.size]):
            out[lo:hi] = noise._raw64(int(hi - lo), self.rng(int(pending[lo])))
        return out
