"""Uniformly random derangements of many segments at once, exactly, at about the cost of one
shuffle.

Theorem II.1 needs each stratum's derangement to be uniform over all derangements. Rejection
(shuffle until there is no fixed point) is exact but costs about e shuffles. Instead each segment
is shuffled once, and its fixed points, about one per segment, are then *added back* one at a
time by an exact step that turns a uniform derangement of m elements into a uniform derangement of
m + 1 (`_add_back`). Given its set of fixed points, a uniform permutation is a uniform
derangement of the other elements, so the result is exactly uniform.

The step. Of the D(m+1) derangements of m + 1 elements, m·D(m) put the new element x in a cycle
of three or more (remove x from its cycle and a derangement of m remains, with m places x could
have sat) and m·D(m-1) put x in a 2-cycle with some j (the rest a derangement of m - 1). So:
with probability m·D(m-1)/D(m+1) make a 2-cycle (x j), j uniform, the rest a uniform derangement
of the others (cut j out of its cycle; if j was in a 2-cycle (j y), y is added back the same
way first); otherwise insert x after a uniform j. The branch probability is exact: it is
D(m-1)/((m+1)·D(m-1) + (-1)^m) (from D(m) = m·D(m-1) + (-1)^m), drawn with the project's exact
Bernoulli; for m > 20 it is 1/(m+1) corrected by an event of probability below 2^-64, decided
from the first 62 random bits unless they are all zero (only then is D(m-1) computed).

Small segments (below `REPAIR_FROM`) are cheaper by batch rejection, which is vectorized; large
ones (`LARGE_STRATUM`) are shuffled one by one, without the batch's sort. Only the 2-cycle
branch, taken with probability about 1/m per fixed point, runs as Python code per event.
"""

from __future__ import annotations

import numpy as np

from dpspec.api import bernoulli_ratios

LARGE_STRATUM = 2048  # segments at least this large are shuffled one by one, without the batch's sort
REPAIR_FROM = 16  # segments at least this large get their fixed points added back, not redrawn

_EXACT_UP_TO = 20  # for m up to this, (m+1)·D(m-1) + 1 fits in int64
_DIGIT = 1 << 62


def uniform_derangements(sizes, rng: np.random.Generator) -> np.ndarray:
    """One uniformly random derangement per contiguous segment, all segments at once.

    ``sizes[k]`` is the length of segment k; segments lie end to end in [0, sum(sizes)).
    Returns ``perm`` with ``perm[i]`` in the segment of i and ``perm[i] != i``.
    """
    sizes = np.asarray(sizes, dtype=np.int64)
    if sizes.ndim != 1:
        raise ValueError("sizes must be one-dimensional")
    if (sizes < 0).any():
        raise ValueError("segment sizes must be non-negative")
    if (sizes == 1).any():
        raise ValueError("a segment of one element has no derangement")
    n = int(sizes.sum())
    starts = np.cumsum(sizes) - sizes
    perm = np.empty(n, dtype=np.int64)
    large = np.flatnonzero(sizes >= LARGE_STRATUM)
    for lo, size in zip(starts[large].tolist(), sizes[large].tolist()):
        # In place: the same draws as `lo + rng.permutation(size)` (which shuffles an arange).
        segment = perm[lo : lo + size]
        segment[:] = np.arange(lo, lo + size, dtype=np.int64)
        rng.shuffle(segment)
    _shuffle_segments(perm, starts, sizes, np.flatnonzero((sizes > 0) & (sizes < LARGE_STRATUM)), rng)
    positions = np.arange(n, dtype=np.int64)
    while positions.size:
        fixed = np.flatnonzero(perm == positions) if positions.size == n else positions[perm[positions] == positions]
        seg = np.searchsorted(starts, fixed, side="right") - 1
        counts = np.bincount(seg, minlength=sizes.size)
        # Redrawn whole: small segments (batch rejection is cheaper) and the identity (nothing to add to).
        redraw = ((sizes < REPAIR_FROM) | (counts == sizes)) & (counts > 0)
        keep = ~redraw[seg]
        _add_back(perm, starts[seg[keep]], sizes[seg[keep]], fixed[keep], counts[seg[keep]], rng)
        positions = _shuffle_segments(perm, starts, sizes, np.flatnonzero(redraw), rng)
    return perm


def _shuffle_segments(
    perm: np.ndarray, starts: np.ndarray, sizes: np.ndarray, which: np.ndarray, rng: np.random.Generator
) -> np.ndarray:
    """Put a uniform permutation in each segment of ``which`` (one batch shuffle for all); returns
    the positions it drew."""
    todo_sizes = sizes[which]
    seg_dtype = np.uint16 if which.size <= 1 << 16 else np.int64  # the sort's own key width
    local_seg = np.repeat(np.arange(which.size, dtype=seg_dtype), todo_sizes)
    pos = _segment_positions(starts[which], todo_sizes)
    if pos.size:
        perm[pos] = pos[_shuffle_within(local_seg, rng)]
    return pos


def _add_back(
    perm: np.ndarray, lo: np.ndarray, size: np.ndarray, fixed: np.ndarray, count: np.ndarray, rng: np.random.Generator
) -> None:
    """Add every fixed point back into its segment's derangement, exactly (see module doc).

    ``fixed`` is sorted, so each segment's fixed points are contiguous; round r adds the r-th
    fixed point of every segment that has one, all segments at once.
    """
    if fixed.size == 0:
        return
    first = np.r_[True, lo[1:] != lo[:-1]]
    rank = np.arange(fixed.size) - np.maximum.accumulate(np.where(first, np.arange(fixed.size), 0))
    for r in range(int(rank.max()) + 1):
        now = rank == r
        x, lo_r, size_r = fixed[now], lo[now], size[now]
        m = size_r - (count[now] - r)  # elements already deranged in the segment
        pair = _pair_draws(m, rng)
        ins = ~pair
        j = _unfixed(perm, lo_r[ins], size_r[ins], rng)
        perm[x[ins]] = perm[j]
        perm[j] = x[ins]
        for i in np.flatnonzero(pair):
            _pair_with(perm, int(lo_r[i]), int(size_r[i]), int(x[i]), int(m[i]), rng)


def _unfixed(perm: np.ndarray, lo: np.ndarray, size: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """For each segment, a uniform position among those not (yet) fixed points, by rejection."""
    j = lo + rng.integers(0, size, dtype=np.int64) if lo.size else lo.copy()
    bad = np.flatnonzero(perm[j] == j)
    while bad.size:
        j[bad] = lo[bad] + rng.integers(0, size[bad], dtype=np.int64)
        bad = bad[perm[j[bad]] == j[bad]]
    return j


def _pair_with(perm: np.ndarray, lo: int, size: int, x: int, m: int, rng: np.random.Generator) -> None:
    """The 2-cycle branch for fixed point x: (x j) with j uniform among the m deranged elements,
    the others left a uniform derangement without j."""
    whole = np.array([lo]), np.array([size])
    j = int(_unfixed(perm, *whole, rng)[0])
    y = int(perm[j])
    if perm[y] != j:  # cut j out of its cycle: i -> j -> y becomes i -> y
        i = lo + int(np.flatnonzero(perm[lo : lo + size] == j)[0])
        perm[i] = y
    else:  # j and y were a 2-cycle: the others are a derangement of m - 2; add y back to it
        perm[j] = j
        perm[y] = y
        _add_one(perm, lo, size, y, m - 2, rng)
    perm[x] = j
    perm[j] = x


def _add_one(perm: np.ndarray, lo: int, size: int, x: int, m: int, rng: np.random.Generator) -> None:
    """Add the fixed point x to a uniform derangement of the segment's m deranged elements."""
    if _pair_draws(np.array([m]), rng)[0]:
        _pair_with(perm, lo, size, x, m, rng)
        return
    j = int(_unfixed(perm, np.array([lo]), np.array([size]), rng)[0])
    perm[x] = perm[j]
    perm[j] = x


# --- the branch probability ---------------------------------------------------------------------

_D = [1, 0]  # derangement numbers D(0), D(1), ..., extended on demand


def derangement_count(m: int) -> int:
    """D(m), the number of derangements of m elements (exact)."""
    while len(_D) <= m:
        k = len(_D)
        _D.append(k * _D[-1] + (-1) ** k)
    return _D[m]


def pair_probability(m: int):
    """P(the added element lands in a 2-cycle) = D(m-1) / ((m+1)·D(m-1) + (-1)^m), as (num, den)."""
    d = derangement_count(m - 1)
    return d, (m + 1) * d + (-1) ** m


def _pair_draws(m: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Exact Bernoulli(pair_probability(m)) for each m >= 2."""
    out = np.zeros(m.size, dtype=bool)
    small = np.flatnonzero(m <= _EXACT_UP_TO)
    if small.size:
        out[small] = bernoulli_ratios(_SMALL_PAIR[m[small], 0], _SMALL_PAIR[m[small], 1], rng)
    big = np.flatnonzero(m > _EXACT_UP_TO)
    if big.size:
        out[big] = _pair_draws_large(m[big], rng)
    return out


_SMALL_PAIR = np.array([pair_probability(k) if k >= 2 else (0, 1) for k in range(_EXACT_UP_TO + 1)], dtype=np.int64)


def _pair_draws_large(m: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Exact draws for m > 20, where the probability is 1/(m+1) up to a correction below 2^-64.

    Even m: p = 1/(m+1) · (1 - 1/N) with N = (m+1)·D(m-1) + 1, so pair = A and not C.
    Odd m:  p = 1/(m+1) + m/(m+1) · 1/N with N = m·((m+1)·D(m-1) - 1), so pair = A or C.
    A ~ Bernoulli(1/(m+1)); C ~ Bernoulli(1/N), N > 2^64: the first base-2^62 digit of its
    uniform decides C = false unless it is zero, and only then is N computed.
    """
    a = bernoulli_ratios(np.ones(m.size, dtype=np.int64), m + 1, rng)
    digit = rng.integers(0, _DIGIT, size=m.size, dtype=np.int64)
    c = np.zeros(m.size, dtype=bool)
    for i in np.flatnonzero(digit == 0):
        c[i] = _rest_of_one_in(_correction_denominator(int(m[i])), rng)
    even = m % 2 == 0
    return np.where(even, a & ~c, a | c)


def _correction_denominator(m: int) -> int:
    d = derangement_count(m - 1)
    return (m + 1) * d + 1 if m % 2 == 0 else m * ((m + 1) * d - 1)


def _rest_of_one_in(n: int, rng: np.random.Generator) -> bool:
    """Bernoulli(1/n) given that the first base-2^62 digit of its uniform was zero (n > 2^62):
    the rest of the uniform must fall below 2^62/n."""
    return bool(bernoulli_ratios(np.array([_DIGIT], dtype=object), np.array([n], dtype=object), rng)[0])


# --- batch shuffling ----------------------------------------------------------------------------


def _segment_positions(starts: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """Concatenated ranges [start, start + size) for each segment, without a Python loop."""
    offsets = np.cumsum(sizes) - sizes
    pos = np.repeat(starts - offsets, sizes)
    pos += np.arange(pos.size, dtype=np.int64)
    return pos


def _shuffle_within(local_seg: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """A uniformly random permutation of the positions of each run of equal ``local_seg``.

    Take a uniformly random permutation of all positions and sort it stably by segment: the
    positions of one segment keep the relative order the permutation gave them, which is
    uniformly random. (Stable sorting of small keys is a linear-time radix sort in numpy.)
    """
    m = local_seg.size
    perm = rng.permutation(m)
    n_seg = int(local_seg[-1]) + 1 if m else 0
    return perm[stable_order(local_seg[perm], n_seg)]


def stable_order(keys: np.ndarray, n_keys: int) -> np.ndarray:
    """Indices that sort ``keys`` (integers in [0, n_keys)) stably.

    numpy's stable sort is a linear radix sort for 16-bit keys; wider keys up to 32 bits are
    sorted as two 16-bit digits, least significant first, which beats a comparison sort.
    """
    if n_keys <= 1 << 16:
        return np.argsort(keys.astype(np.uint16, copy=False), kind="stable")
    if n_keys <= 1 << 32:
        low = np.argsort((keys & 0xFFFF).astype(np.uint16), kind="stable")
        high = np.argsort((keys[low] >> 16).astype(np.uint16), kind="stable")
        return low[high]
    return np.argsort(keys, kind="stable")
