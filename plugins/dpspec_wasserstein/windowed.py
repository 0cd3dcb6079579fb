"""The congenial bases' normaliser for a release too large to convolve: tilted, windowed, by FFT, certified.

Z(c) = [x^N] prod_i sum_k w_i(k) exp(-r |k - c_i|) x^k (see `likelihood.log_partition`, the exact
convolution) equals e^{lam N} [x^N] prod_i h_i(x) for every tilt lam, h_i(k) = w_i(k) exp(-r |k - c_i| - lam k)
on 0..N. Each h_i is log-concave (C(k + a - 1, k) is for a >= 1; so are -r |k - c| and the tilt): it rises
to its mode and falls after it, and past any value the ratio of successive values only falls. Every
step below rests on that, and the result is refused unless its certified relative error is below
`MAX_ERROR`.
"""

from __future__ import annotations

import numpy as np

from dpspec.api import MechanismError, LazyModule

# heavy libraries, imported on first use
_special = LazyModule("scipy.special", "_special", globals())

WINDOW = 40.0  # each county's tilted weights are kept where they are within e^-WINDOW of their largest
MAX_ERROR = 1e-9  # the certified relative error (tails and aliasing) must stay below
COARSE = 64  # values per county's window in the first Newton steps of a draw with wide windows
WIDEST = 8  # a draw's widest window may hold this many natural widths (2 WINDOW / r + 1 values), or
WIDEST_VALUES = 4096  # this many values if more: a draw whose windows are wider is refused
SADDLE_STEPS = 30  # tilts tried per draw: the modes' tilt, then safeguarded Newton steps to the saddle point
_BATCH_ELEMENTS = 2_000_000  # draws x cells x window width held at once
_FIRST_ROWS = 64  # draws done first, the farthest from the total (`log_partition_windowed`)
_ROW_ELEMENTS = 20_000_000  # cells x widest window of one draw: above it, the draw is refused
_THETAS = (1.0, 0.5, 0.25, 0.1, 0.03, 0.01, 0.003, 0.001, 3e-4, 1e-4)  # Chernoff's tilts for the aliases


def log_partition_windowed(
    truth: np.ndarray, r: float, alpha, total: int, logw: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """log Z(c) per row of `truth` (draws x cells), and a certified bound on its relative error.

    The tilt starts where the counties' modes sum to N (closed-form modes, bisection on lam). Each h_i is
    kept on its window, the values within e^-WINDOW of its mode (found by bisection on each side),
    normalised to a law v_i, and [x^N] is read from the product of the windows' discrete Fourier
    transforms of length L (L at least the widest window). Errors, bounded and returned: the tails cut
    off (at most the first value outside times 1 / (1 - rho), rho its ratio to the last value inside,
    which log-concavity makes a bound on every later ratio), and the aliases N +- L, +-2L, ... the
    cyclic product adds (at most P(S >= N + L) + P(S <= N - L) for S the sum of the windows' laws,
    bounded by Chernoff's inequality at a few tilts); the float rounding of the transforms enters by
    the usual estimate (cells + log2 L roundoffs of the total mass). Where the modes' tilt leaves the
    coefficient far in the sum's tail, the tilt moves to the saddle point (`_solve`); a draw whose bound
    still misses `MAX_ERROR` is refused.
    The weights are read from `logw` (`likelihood.log_weights(alpha, total)`) when given, else computed."""
    c = np.asarray(truth, dtype=float)
    n = c.shape[1]
    a = np.ones(n) if alpha is None else np.asarray(alpha, dtype=float)
    if np.any((a > 0) & (a < 1)):
        raise MechanismError("the windowed normaliser needs concentrations of 0 or at least 1")
    law, out, err = _Law(r, a, total, logw), np.empty(c.shape[0]), np.empty(c.shape[0])
    # the vectors farthest from the total first: where one is refused, the rest is not computed
    order = np.argsort(-np.abs(c.sum(axis=1) - total), kind="stable")
    for rows in (order[:_FIRST_ROWS], order[_FIRST_ROWS:]):
        if rows.size:
            out[rows], err[rows] = _solve(law, c[rows], strict=True)
    if np.any(err > MAX_ERROR):
        raise MechanismError(
            f"the windowed normaliser's certified relative error is {float(err.max()):.3g} "
            f"(limit {MAX_ERROR:g}) even at the saddle point"
        )
    return out, err


class _Law:
    """The counties' tilted weights log h_i(k) at any k, their modes and windows, for one release."""

    def __init__(self, r: float, a: np.ndarray, total: int, logw: np.ndarray | None):
        self.r, self.a, self.total, self.logw = r, a, total, logw
        self.zero = a == 0  # cells held at 0 (no mass elsewhere): their factor is exp(-r c_i)
        self.cells = np.arange(a.size)
        self._padded = None  # the weights' table with -inf past the total, for `on_windows`

    def log_h(self, k: np.ndarray, c: np.ndarray, lam: np.ndarray, cells: np.ndarray | None = None) -> np.ndarray:
        """log h_i(k), -inf outside 0..total: k of shape (draws, cells[, m]), c (draws, cells) and lam
        (draws,); or, `cells` given, k of shape (items[, m]) and c, lam, cells one per item."""
        if cells is None:
            cells, lam = self.cells[None, :], lam[:, None]
        tail = (Ellipsis,) + (None,) * (k.ndim - c.ndim)
        c, lam, cells = c[tail], lam[tail], cells[tail]
        kk = np.clip(k, 0, self.total)
        out = -self.r * np.abs(kk - c) - lam * kk
        if self.logw is not None:
            out += self.logw[cells, kk.astype(np.int64)]
        elif np.any(self.a != 1):
            a = self.a[cells]
            aa = np.where(a == 0, 1.0, a)
            out += np.where(
                a == 0,
                np.where(kk == 0, 0.0, -np.inf),
                _special.gammaln(kk + aa) - _special.gammaln(kk + 1.0) - _special.gammaln(aa),
            )
        return np.where((k >= 0) & (k <= self.total), out, -np.inf)

    def on_windows(self, c: np.ndarray, lam: np.ndarray, first: np.ndarray, width: int) -> np.ndarray:
        """log h_i(first_i + j) for j < width (draws x cells x width; -inf past the total): `log_h` on
        contiguous windows, the weights read as slices of the table (the normaliser's costly part)."""
        if self.logw is None:
            return self.log_h(first[:, :, None] + np.arange(width, dtype=float), c, lam)
        j = np.arange(width, dtype=float)
        out = (first - c)[:, :, None] + j
        np.abs(out, out=out)
        out *= -self.r
        out -= (lam[:, None] * first)[:, :, None]
        out -= lam[:, None, None] * j
        if self._padded is None or self._padded.shape[1] < self.total + 1 + width:
            pad = np.full((self.a.size, max(width, self.total + 1)), -np.inf)
            self._padded = np.concatenate([self.logw, pad], axis=1)  # past the total: no count there
        slices = np.lib.stride_tricks.sliding_window_view(self._padded, width, axis=1)
        out += slices[self.cells[None, :], first.astype(np.int64)]
        return out

    def modes(self, c: np.ndarray, lam: np.ndarray) -> np.ndarray:
        return np.where(self.zero[None, :], 0.0, _tilt_modes(c, self.a[None, :], self.r, lam[:, None], self.total))

    def modes_tilt(self, c: np.ndarray) -> np.ndarray:
        """lam per draw at which the counties' modes sum to the total (the sum falls as lam grows; where it
        equals the total on an interval of lam, as for flat weights, the interval's middle)."""
        b = c.shape[0]

        def boundary(strict):
            lo, hi = np.full(b, -self.r + 1e-12), np.full(b, self.r + float(np.log1p(self.a.max())) + 1.0)
            for _ in range(60):
                mid = (lo + hi) / 2
                s = self.modes(c, mid).sum(axis=1)
                above = s > self.total if strict else s >= self.total
                lo, hi = np.where(above, mid, lo), np.where(above, hi, mid)
            return (lo + hi) / 2

        return (boundary(True) + boundary(False)) / 2

    def windows(self, c: np.ndarray, lam: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Each county's window [first, last]: the values within e^-WINDOW of its mode. h_i rises to its
        mode and falls after it, so on each side the values above the floor are an interval's end, found
        by bisection (a mode computed one off in floating point only widens the window)."""
        mode = self.modes(c, lam)
        floor = self.log_h(mode, c, lam) - WINDOW
        steps = int(self.total).bit_length() + 1
        lo, hi = np.zeros_like(mode), mode.copy()  # the least k in [lo, hi] above the floor; hi is
        for _ in range(steps):
            mid = np.floor((lo + hi) / 2)
            ok = self.log_h(mid, c, lam) >= floor
            hi, lo = np.where(ok, mid, hi), np.where(ok, lo, mid + 1)
        first = hi
        lo, hi = mode.copy(), np.full_like(mode, self.total)  # the greatest k in [lo, hi] above the floor; lo is
        for _ in range(steps):
            mid = np.ceil((lo + hi) / 2)
            ok = self.log_h(mid, c, lam) >= floor
            lo, hi = np.where(ok, mid, lo), np.where(ok, hi, mid - 1)
        return first, lo


def _tilt_modes(c: np.ndarray, a: np.ndarray, r: float, lam: np.ndarray, total: int) -> np.ndarray:
    """The mode of k -> log C(k + a - 1, k) - r |k - c| - lam k on 0..total (a >= 1; log-concave):
    the first k whose increment log((k + a) / (k + 1)) - lam -+ r is <= 0, in closed form per side."""

    def first(mu):  # least k >= 0 with log((k + a) / (k + 1)) <= mu (none when mu <= 0 < a - 1)
        with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
            e = np.expm1(mu)
            k = np.ceil((a - 1.0) / np.where(e > 0, e, np.nan) - 1.0)
        k = np.where(a <= 1, 0.0, k)  # a = 1: the weight is flat, every increment is -lam -+ r
        flat = np.where((a <= 1) & (mu >= 0), 0.0, np.inf)
        return np.where(a <= 1, flat, np.where(mu > 0, np.maximum(k, 0.0), np.inf))

    left = first(lam - r)  # below c the increment carries +r
    right = first(lam + r)
    mode = np.where(left < c, left, np.maximum(c, right))
    return np.clip(mode, 0, total)


class _Windows:
    """The draws' windowed laws: v (draws x cells x width), the windows' starts and ends, the log of
    each window's sum of h_i, and the sum S's mean and variance."""

    def __init__(self, law: _Law, c: np.ndarray, lam: np.ndarray, first: np.ndarray, last: np.ndarray):
        self.first, self.last = first, last
        width = int((last - first).max()) + 1
        self.j = np.arange(width, dtype=float)
        logh = law.on_windows(c, lam, first, width)
        logh[self.j[None, None, :] > (last - first)[:, :, None]] = -np.inf
        top = logh.max(axis=2)
        logh -= top[:, :, None]
        v = np.exp(logh, out=logh)
        mass = v.sum(axis=2)
        v /= mass[:, :, None]
        self.v, self.norm = v, top + np.log(mass)
        vj = v @ self.j
        self.mean = vj.sum(axis=1) + first.sum(axis=1)
        self.var = np.maximum((v @ (self.j * self.j)).sum(axis=1) - (vj**2).sum(axis=1), 0.0)

    def take(self, keep: np.ndarray) -> _Windows:
        """The same windows for the draws `keep` selects."""
        out = object.__new__(_Windows)
        out.j = self.j
        for name in ("first", "last", "v", "norm", "mean", "var"):
            setattr(out, name, getattr(self, name)[keep])
        return out


def _batches(first: np.ndarray, last: np.ndarray):
    """The draws in batches of similar widest windows, each batch within `_BATCH_ELEMENTS` values."""
    n = first.shape[1]
    width = (last - first).max(axis=1) + 1
    order = np.argsort(width, kind="stable")
    start = 0
    while start < order.size:
        stop = start + 1
        while stop < order.size and (stop - start + 1) * n * width[order[stop]] <= _BATCH_ELEMENTS:
            stop += 1
        yield order[start:stop]
        start = stop


def _certify(law: _Law, c: np.ndarray, lam: np.ndarray, w: _Windows) -> tuple[np.ndarray, np.ndarray]:
    """log Z and its certified relative error for the draws of one batch of windows."""
    out, err = np.full(c.shape[0], -np.inf), np.full(c.shape[0], np.inf)
    if c.shape[1] * w.j.size > _ROW_ELEMENTS:
        return out, err  # a window too wide to hold: refused
    tails = _tails(law, c, lam, w)
    size = 1 << int(np.ceil(np.log2(max(w.j.size, 8 * float(np.sqrt(w.var.max())), 2))))
    for _ in range(3):  # the aliases shrink as the transform grows: twice as long, where they alone fail
        got, bound, aliased = _coefficient(w, lam, law.total, size, tails)
        better = bound < err
        out[better], err[better] = got[better], bound[better]
        if not np.any(aliased & (err > MAX_ERROR)):
            break
        size *= 2
    return out, err


def _tails(law: _Law, c: np.ndarray, lam: np.ndarray, w: _Windows) -> np.ndarray:
    """Per draw, the tails' relative mass bound prod_i (1 + t_i) - 1: t_i the mass beyond county i's
    window on both sides over its window's, each at most the first value outside over 1 - rho."""

    def side(outside, inside):
        out_v, in_v = law.log_h(outside, c, lam), law.log_h(inside, c, lam)
        with np.errstate(invalid="ignore", divide="ignore"):
            log_rho = out_v - in_v
            t = np.exp(out_v - w.norm - np.log(-np.expm1(np.minimum(log_rho, 0.0))))
        return np.where(np.isneginf(out_v), 0.0, np.where(log_rho < 0, np.nan_to_num(t, nan=np.inf), np.inf))

    t = side(w.first - 1, w.first) + side(w.last + 1, w.last)
    with np.errstate(over="ignore"):
        return np.expm1(np.log1p(t).sum(axis=1))


def _coefficient(w: _Windows, lam: np.ndarray, total: int, size: int, tails: np.ndarray):
    """log Z from the windows' laws by FFT of length `size`, the certified bound (tails, aliases, rounding),
    and whether the aliases alone keep a draw above the limit."""
    b, n = w.first.shape
    spec = np.fft.rfft(w.v, size, axis=2).prod(axis=1)
    target = total - w.first.sum(axis=1)  # the coefficient wanted, counted from the windows' starts
    coef = np.fft.irfft(spec, size, axis=1)
    got = coef[np.arange(b), (target % size).astype(np.int64)]
    # aliases: P(S >= target + L) + P(S <= target - L), S the sum of the windows' laws (Chernoff at the
    # best of a few tilts on each side). Each county's moment is taken about its window's middle, at tilts
    # small enough that no term over- or underflows (a lost term would make the bound too small)
    mid = (w.j.size - 1) / 2
    up, down = np.full(b, np.inf), np.full(b, np.inf)
    for theta in _THETAS:
        if theta * mid > 600:
            continue
        with np.errstate(divide="ignore"):
            lu = np.log(w.v @ np.exp(theta * (w.j - mid))).sum(axis=1) + theta * (n * mid - target - size)
            ld = np.log(w.v @ np.exp(-theta * (w.j - mid))).sum(axis=1) - theta * (n * mid - target + size)
        up, down = np.fmin(up, np.exp(np.minimum(lu, 700))), np.fmin(down, np.exp(np.minimum(ld, 700)))
    # float rounding of the transforms: the usual estimate, (cells + log2 L) units of roundoff of the laws'
    # total mass 1 (an estimate, not a proof, unlike the terms before it)
    rounding = 4 * (n + np.log2(size)) * np.finfo(float).eps
    absolute = up + down + rounding
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        inside = np.where(got > absolute, got - absolute, np.nan)  # the windows' own coefficient, at least
        bound = np.nan_to_num((tails + absolute) / inside, nan=np.inf)  # |got - Z| <= tails + absolute
        log_z = lam * total + w.norm.sum(axis=1) + np.log(np.where(got > 0, got, np.nan))
        # the draws that a longer transform would certify: the aliases are above the limit, the rest well below
        aliased = ((up + down) / inside > MAX_ERROR / 2) & ((tails + rounding) / inside < MAX_ERROR / 2)
    return np.nan_to_num(log_z, nan=-np.inf), bound, aliased


def _solve(law: _Law, c: np.ndarray, strict: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """log Z and its certified relative error per draw, the tilt moved towards the saddle point, where
    the windows' laws have means summing to the total, for the draws the modes' tilt does not certify.

    The modes' sum is a poor guide where it jumps past the total: a vector off the total at a sharp
    release (epsilon 10 on a month) has no tilt whose modes sum to it, and the one found leaves a
    county balanced on its kink, its law wide and the coefficient sought far in the sum's tail. The
    means' sum falls continuously with the tilt (its derivative is minus the sum's variance), so
    Newton's steps, bracketed and bisected where they leave the bracket, find where the sum's law is
    centred on the total, and the coefficient there is about one over the sum's standard deviation.
    Draws whose windows at the modes' tilt are wide take their first steps on sampled windows
    (`_moments`, cheap whatever the width); then the steps use the windows themselves, and a draw
    is certified as soon as its tilt puts the total within two standard deviations of the sum's
    mean. Refused (error left infinite): a draw centred within half a standard deviation and still
    not certified, and one whose widest window exceeds `WIDEST` times a county's natural width
    (2 WINDOW / r + 1 values) and `WIDEST_VALUES`, the reach of the normaliser's cost; `strict`:
    raise the refusal of such a draw at once, before the others' work (one refused draw refuses all)."""
    b = c.shape[0]
    lam = law.modes_tilt(c)
    bracket = np.full(b, -law.r + 1e-12), np.full(b, law.r + float(np.log1p(law.a.max())) + 1.0)
    natural = 2 * int(np.ceil(WINDOW / law.r)) + 1
    first, last = law.windows(c, lam)
    wide = np.flatnonzero((last - first).max(axis=1) + 1 > 2 * natural)
    for _ in range(SADDLE_STEPS if wide.size else 0):
        first, last = law.windows(c[wide], lam[wide])
        gap, var = _moments(law, c[wide], lam[wide], first, last)
        wide, gap, var = _newton(lam, bracket, wide, gap, var)
        if not wide.size:
            break
    out, err = np.full(b, -np.inf), np.full(b, np.inf)
    todo = np.arange(b)
    # the sampled windows' gaps only guide: the steps on the windows themselves start from the full bracket
    bracket = np.full(b, -law.r + 1e-12), np.full(b, law.r + float(np.log1p(law.a.max())) + 1.0)
    widest = max(WIDEST * natural, WIDEST_VALUES)
    for step in range(SADDLE_STEPS):
        first, last = law.windows(c[todo], lam[todo])
        held = (last - first).max(axis=1) + 1 <= widest
        if step == 0 and strict and not held.all():  # refused whatever the rest gives: say so before the work
            held_at_most = int((last - first).max()) + 1
            raise MechanismError(
                f"the windowed normaliser's windows would hold {held_at_most:,} values at the saddle "
                f"point (limit {widest:,}): a vector too far from the release"
            )
        todo, first, last = todo[held], first[held], last[held]
        gap, var = np.empty(todo.size), np.empty(todo.size)
        for rows in _batches(first, last):
            at = todo[rows]
            w = _Windows(law, c[at], lam[at], first[rows], last[rows])
            gap[rows], var[rows] = w.mean - law.total, w.var
            near = np.abs(gap[rows]) <= 2 * np.sqrt(var[rows]) + 0.5
            if near.any():
                out[at[near]], err[at[near]] = _certify(law, c[at[near]], lam[at[near]], w.take(near))
        pending = err[todo] > MAX_ERROR
        todo, gap, var = _newton(lam, bracket, todo[pending], gap[pending], var[pending])
        if not todo.size:
            break
    return out, err


def _newton(lam, bracket, todo, gap, var):
    """One safeguarded Newton step on the tilt of the draws `todo` whose sum's mean is more than half a
    standard deviation from the total (gap = mean - total, var the sum's variance); those it moves."""
    moving = np.abs(gap) > 0.5 * np.sqrt(var)
    todo, gap, var = todo[moving], gap[moving], np.maximum(var[moving], 1e-12)
    lo, hi = bracket
    at = lam[todo]
    lo[todo], hi[todo] = np.where(gap > 0, at, lo[todo]), np.where(gap < 0, at, hi[todo])  # above: tilt too small
    step = at + gap / var
    lam[todo] = np.where((step > lo[todo]) & (step < hi[todo]), step, (lo[todo] + hi[todo]) / 2)
    return todo, gap, var


def _moments(law: _Law, c: np.ndarray, lam: np.ndarray, first: np.ndarray, last: np.ndarray):
    """(mean - total, variance) of the sum at tilt lam, each county's window read at `COARSE` evenly
    spaced values at most (all of it when narrower): a guide for Newton's steps, never in a bound.
    The counties are taken one by one (in batches of similar widths), so a narrow one costs little."""
    b, n = c.shape
    width = (last - first + 1).ravel()
    stride = np.maximum(1.0, np.ceil(width / COARSE))
    points = np.minimum(width, COARSE)
    first, last, cf = first.ravel(), last.ravel(), c.ravel()
    lf, cells = np.repeat(lam, n), np.tile(law.cells, b)
    mean, spread = np.empty(b * n), np.empty(b * n)
    order = np.argsort(points, kind="stable")
    start = 0
    while start < order.size:
        top = points[order[min(order.size, start + _BATCH_ELEMENTS // COARSE) - 1]]
        at = order[start : start + max(1, _BATCH_ELEMENTS // int(top))]
        t = np.arange(int(points[at].max()), dtype=float)
        k = first[at, None] + stride[at, None] * t
        logh = law.log_h(k, cf[at], lf[at], cells[at])
        logh[k > last[at, None]] = -np.inf
        p = np.exp(logh - logh.max(axis=1, keepdims=True))
        p /= p.sum(axis=1, keepdims=True)
        mean[at] = (p * k).sum(axis=1)
        spread[at] = (p * (k - mean[at, None]) ** 2).sum(axis=1) + (stride[at] ** 2 - 1) / 12
        start += at.size
    return mean.reshape(b, n).sum(axis=1) - law.total, spread.reshape(b, n).sum(axis=1)
