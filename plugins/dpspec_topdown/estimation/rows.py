"""The rows of a node's problems as sparse matrices: sums of variables keyed by group, and a bound
constraint's rows (as rows of a fit, or as a margin the rounding keeps)."""

from __future__ import annotations

import highspy
import numpy as np
import scipy.sparse as sp

_INF = highspy.kHighsInf


_SPARSE_KEYS = 8  # key spaces this many times the variables are numbered by sorting (`_sum_rows`)


def _f64(values) -> np.ndarray:
    return np.ascontiguousarray(values, dtype=np.float64)


def _i32(values) -> np.ndarray:
    return np.ascontiguousarray(values, dtype=np.int32)


class _Rows:
    """Accumulates sparse constraint rows (row, col, value) with bounds."""

    def __init__(self):
        self.r, self.c, self.v, self.lo, self.hi = [], [], [], [], []
        self.sides = []
        self.n = 0

    def add(self, rows, cols, vals, lo, hi, cell_side=False):
        """``rows`` are local row ids 0..len(lo)-1 of this block; ``cell_side``: its rows are
        unions of parent cells (the rounding's network form, network.py)."""
        self.r.append(np.asarray(rows, dtype=np.int64) + self.n)
        self.c.append(np.asarray(cols, dtype=np.int64))
        self.v.append(np.broadcast_to(np.asarray(vals, dtype=np.float64), np.shape(rows)))
        self.lo.append(np.asarray(lo, dtype=np.float64))
        self.hi.append(np.asarray(hi, dtype=np.float64))
        self.sides.append(np.full(len(lo), bool(cell_side)))
        self.n += len(lo)

    def cell_side(self) -> np.ndarray:
        """Per row, whether its block was added as cell side."""
        return np.concatenate(self.sides) if self.sides else np.zeros(0, dtype=bool)

    def matrix(self, n_cols):
        if not self.r:
            return sp.csc_matrix((0, n_cols)), np.zeros(0), np.zeros(0)
        a = sp.csc_matrix(
            (np.concatenate(self.v), (np.concatenate(self.r), np.concatenate(self.c))), shape=(self.n, n_cols)
        )
        return a, np.concatenate(self.lo), np.concatenate(self.hi)


def _sum_rows(keys, n_keys):
    """Rows summing the variables that share a key: (local row of each var, keys with a row).

    Keys over a space much larger than the variables (children x the DHC's 1.2M detailed
    groups) are numbered by sorting, never with an array over the whole space; same result."""
    if n_keys > _SPARSE_KEYS * max(len(keys), 1):
        present, local = np.unique(keys, return_inverse=True)
        return local.astype(np.int64), present
    present = np.flatnonzero(np.bincount(keys, minlength=n_keys))
    local = np.full(n_keys, -1, dtype=np.int64)
    local[present] = np.arange(present.size)
    return local[keys], present


def _bound_rows(b, vc, vcell):
    """(use, local, present, lower, upper): which variables sit in a binding group (a lower bound
    above 0 or a finite upper bound), their local row, and the rows' groups and bounds."""
    key = vc * b.n_groups + b.groups[vcell]
    lo, hi = b.lower.ravel().astype(np.float64), b.upper.ravel().astype(np.float64)
    binding = (lo > 0) | np.isfinite(hi)
    use = binding[key]
    local, present = _sum_rows(key[use], b.lower.size)
    return use, local, present, lo[present], np.where(np.isfinite(hi[present]), hi[present], _INF)


def bound_margin(b, vc, vcell) -> tuple:
    """A bound constraint as a rounding margin (key, n_keys, lo, hi) over the variables: each
    bounded (child, group) its key, the unbounded variables on a spare key without limits."""
    use = _bound_rows(b, vc, vcell)[0]
    key = np.where(use, vc * b.n_groups + b.groups[vcell], b.lower.size).astype(np.int64)
    return (
        key,
        b.lower.size + 1,
        np.append(b.lower.ravel().astype(np.float64), -_INF),
        np.append(np.where(np.isfinite(b.upper.ravel()), b.upper.ravel(), _INF), _INF),
    )
