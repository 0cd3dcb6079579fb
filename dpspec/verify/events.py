"""Choose the event that best separates two output samples, then test it on fresh runs.

Each run is summarized by a vector of numbers (its statistic). The event family has two parts:
thresholds on one coordinate ({s_j >= t} and complements) and, treating whole outputs as
labels, the sets of outputs whose estimated likelihood ratio is largest (the Neyman–Pearson
shape of the best test). Selection uses the first half of the runs only; the bound comes from
the second half, so the choice cannot inflate it (Ding et al. 2018).
"""

from __future__ import annotations

import attrs
import numpy as np

from dpspec.verify.bounds import event_bound

MAX_COORDINATES = 32  # coordinates whose thresholds are tried (the most separated ones)
MAX_THRESHOLDS = 256  # thresholds per coordinate (quantiles when there are more values)
MAX_KEY_SETS = 512  # prefixes of the likelihood-ratio ordering of whole outputs


@attrs.frozen
class EventTest:
    """The chosen event and what the held-out runs say about it."""

    description: str
    n: int  # held-out runs per side
    k_left: int  # held-out runs on the first dataset that fell in the event
    k_right: int
    lower_bound: float
    swapped: bool  # True: the event is likelier on the second dataset

    def to_json(self) -> dict:
        return {
            "event": self.description,
            "test_runs_per_side": self.n,
            "hits_first": self.k_left,
            "hits_second": self.k_right,
            "lower_bound": self.lower_bound,
            "likelier_on": "second" if self.swapped else "first",
        }


def _keys(left: np.ndarray, right: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
    """Integer labels of whole outputs, shared by both samples."""
    both = np.concatenate([left, right])
    _, inverse = np.unique(both, axis=0, return_inverse=True)
    inverse = inverse.reshape(-1)
    return inverse[: len(left)], inverse[len(left) :], int(inverse.max()) + 1 if inverse.size else 0


def _threshold_candidates(sl: np.ndarray, sr: np.ndarray):
    """(coordinate, threshold) pairs and their selection counts of {s_j >= t} on each side."""
    diff = np.abs(sl.mean(axis=0) - sr.mean(axis=0)) / (np.sqrt((sl.var(axis=0) + sr.var(axis=0)) / 2) + 1e-12)
    varying = np.flatnonzero((sl.max(axis=0) != sl.min(axis=0)) | (sr.max(axis=0) != sr.min(axis=0)) | (sl[0] != sr[0]))
    order = varying[np.argsort(-diff[varying], kind="stable")][:MAX_COORDINATES]
    coords, thresholds, counts_l, counts_r = [], [], [], []
    for j in order:
        a, b = np.sort(sl[:, j]), np.sort(sr[:, j])
        values = np.unique(np.concatenate([a, b]))
        if values.size > MAX_THRESHOLDS:
            values = np.unique(np.quantile(values, np.linspace(0, 1, MAX_THRESHOLDS)))
        coords.append(np.full(values.size, j))
        thresholds.append(values)
        counts_l.append(a.size - np.searchsorted(a, values, side="left"))
        counts_r.append(b.size - np.searchsorted(b, values, side="left"))
    if not coords:
        return np.zeros(0, int), np.zeros(0), np.zeros(0), np.zeros(0)
    return np.concatenate(coords), np.concatenate(thresholds), np.concatenate(counts_l), np.concatenate(counts_r)


def _key_candidates(kl: np.ndarray, kr: np.ndarray, n_keys: int):
    """Prefixes of outputs ordered by estimated ratio P_first/P_second, and each prefix's counts.

    The order is estimated on the first half of the selection runs and the prefixes are counted
    on the second: ordering and scoring on the same runs would favour sets of outputs seen once
    (every output of a continuous mechanism), which never recur in the held-out runs."""
    half = len(kl) // 2

    def counts(keys):
        return np.bincount(keys, minlength=n_keys).astype(float)

    order = np.argsort(-(counts(kl[:half]) + 0.5) / (counts(kr[:half]) + 0.5), kind="stable")
    sizes = np.unique(np.minimum(np.unique(np.geomspace(1, max(n_keys, 1), MAX_KEY_SETS).astype(int)), n_keys))
    sizes = sizes[sizes < n_keys] if n_keys > 1 else sizes[:0]
    cl, cr = counts(kl[half:]), counts(kr[half:])
    return order, sizes, np.cumsum(cl[order])[sizes - 1], np.cumsum(cr[order])[sizes - 1], len(kl) - half


def _scores(kind, cl, cr, n, a, options):
    """Selection score of the four variants of each event: E or its complement, likelier on the
    first or on the second dataset; shape (4, events)."""
    variants = [(cl, cr), (cr, cl), (n - cl, n - cr), (n - cr, n - cl)]
    if cl.size == 0:
        return np.zeros((4, 0)), np.zeros((4, 0))
    scores = np.stack([event_bound(kind, x, y, n, a, **options) for x, y in variants])
    support = np.stack([x for x, _ in variants]) / max(n, 1)
    return scores, support


def best_event(left: np.ndarray, right: np.ndarray, kind: str, a: float, labels=None, **options) -> EventTest:
    """Select on the first half of the runs, bound on the second; `a` = 1 - confidence."""
    left = np.asarray(left, dtype=float).reshape(len(left), -1)
    right = np.asarray(right, dtype=float).reshape(len(right), -1)
    n = min(len(left), len(right))
    half = n // 2
    sl, sr, tl, tr = left[:half], right[:half], left[half:n], right[half:n]
    n_sel, n_test = half, n - half
    keys_l, keys_r, n_keys = _keys(left[:n], right[:n])
    coords, thresholds, tcl, tcr = _threshold_candidates(sl, sr)
    order, sizes, kcl, kcr, n_keyed = _key_candidates(keys_l[:half], keys_r[:half], n_keys)
    n_events = tcl.size + kcl.size
    if n_events == 0:
        return EventTest("no event separates the outputs (they are identical on every run)", n_test, 0, 0, 0.0, False)
    t_scores, t_support = _scores(kind, tcl, tcr, n_sel, a, options)
    k_scores, k_support = _scores(kind, kcl, kcr, n_keyed, a, options)
    scores = np.concatenate([t_scores, k_scores], axis=1)
    support = np.concatenate([t_support, k_support], axis=1)
    # ties: prefer the event with more support (the larger estimated first-side probability)
    flat = np.lexsort((-support.ravel(), -scores.ravel()))[0]
    variant, index = divmod(int(flat), n_events)
    complement, swapped = variant >= 2, variant in (1, 3)
    if index < tcl.size:
        j, t = int(coords[index]), float(thresholds[index])
        name = labels[j] if labels is not None and j < len(labels) else f"statistic[{j}]"
        in_l, in_r = tl[:, j] >= t, tr[:, j] >= t
        description = f"{name} {'<' if complement else '>='} {t:g}"
    else:
        chosen = order[: sizes[index - tcl.size]]
        member = np.zeros(n_keys, dtype=bool)
        member[chosen] = True
        in_l, in_r = member[keys_l[half:n]], member[keys_r[half:n]]
        count = int(chosen.size)
        description = (
            f"the output is {'not ' if complement else ''}one of the {count} distinct output(s) "
            "likeliest on the first dataset"
        )
    if complement:
        in_l, in_r = ~in_l, ~in_r
    k_l, k_r = int(in_l.sum()), int(in_r.sum())
    if swapped:
        k_l, k_r = k_r, k_l
    bound = float(event_bound(kind, k_l, k_r, n_test, a, **options))
    return EventTest(description, n_test, k_l, k_r, bound, swapped)
