"""The Wasserstein exponential mechanism's likelihoods for `dpspec infer`, for every base measure.

With the counting measure on the nonnegative integers, each released count y is drawn from
P(y | c) = exp(-r |y - c|) / Z_r(c), Z_r(c) = sum_{k >= 0} exp(-r |k - c|) = (1 - e^{-r(c+1)}) / (1 - e^{-r})
+ e^{-r} / (1 - e^{-r}), independently across cells given the counts. The outcome counts (deaths)
are drawn on 0..y (y the released count), so given y their likelihood is the same law truncated
above at y; cases >= deaths thus ties the two statistics through the released cases only.

The congenial bases draw the whole vector on {y >= 0 : sum y = N}: P(y | c) = prod_i w_i(y_i)
exp(-r |y_i - c_i|) / Z(c), with w_i = 1 (deterministic congenial) or C(y_i + a_i - 1, y_i)
(prior: the Dirichlet-multinomial's weights; its other factors do not depend on y). The rows keep
their own factors and Z(c) = [x^N] prod_i sum_k w_i(k) exp(-r |k - c_i|) x^k, which couples them,
is the `joint` term. Small releases (n (N + 1)^2 <= `MAX_JOINT_WORK`) convolve the cells' weight
vectors on 0..N, in floating point over positive terms only. Larger ones (a Pennsylvania month)
tilt the weights so the counties' modes sum to N, keep each on a window, and read [x^N] from the
product of the windows' Fourier transforms, with a certified bound on the relative error (the
truncated tails and the aliases) that must stay below `MAX_ERROR` (`log_partition_windowed`).
"""
from __future__ import annotations

import math

import numpy as np

from dpspec.api import CountLikelihood, MechanismError, ir

BOOL_TRUE = "True"  # how a bool cell is written in a target's cells (the domain's value text)


def _log_norm(c: np.ndarray, r: float, upper=None) -> np.ndarray:
    """log sum_{k=0}^{upper} exp(-r |k - c|) for integer c >= 0 (upper None: infinity)."""
    c = np.asarray(c, dtype=float)
    q = math.exp(-r)
    below = (1 - np.exp(-r * (np.minimum(c, upper if upper is not None else c) + 1))) / (1 - q)
    if upper is None:
        above = q / (1 - q)
        return np.log(below + above)
    upper = np.asarray(upper, dtype=float)
    inside = (1 - np.exp(-r * (np.minimum(c, upper) + 1))) / (1 - q) + np.where(
        c < upper, q * (1 - np.exp(-r * np.maximum(upper - c, 0))) / (1 - q), 0.0)
    # c above the bound: every term carries exp(-r (c - upper)), kept in log space (it underflows
    # for a latent count far above the released one, and log 0 would make the likelihood +inf)
    above = -r * (c - upper) + np.log((1 - np.exp(-r * (upper + 1))) / (1 - q))
    return np.where(c <= upper, np.log(inside), above)


def _one(query, cells, value, r: float, upper, what: str) -> CountLikelihood:
    value = np.asarray(value, dtype=np.int64)

    def logpmf(truth):
        t = np.asarray(truth, dtype=np.int64)
        out = -r * np.abs(value - t) - _log_norm(t, r, upper)
        return np.where(t >= 0, out, -np.inf)

    scale = 1 / r
    log_max = -_log_norm(np.zeros(len(value)), r, upper)  # the mass at y = c is largest at c = 0
    return CountLikelihood(query, cells, value, logpmf, log_max,
                           value.astype(float), np.full(len(value), 2 * scale * scale), what)


MAX_JOINT_WORK = 4_000_000  # n (N + 1)^2: the joint normalizer's operations per posterior draw


def log_weights(alpha, total: int) -> np.ndarray:
    """log C(k + a_i - 1, k) on k = 0..total per cell (a_i = 0: mass only at 0)."""
    from scipy.special import gammaln

    k = np.arange(total + 1, dtype=float)[None, :]
    a = np.asarray(alpha, dtype=float)[:, None]
    with np.errstate(divide="ignore", invalid="ignore"):
        out = gammaln(k + a) - gammaln(k + 1) - gammaln(np.maximum(a, 1))
    return np.where(a > 0, out, np.where(k == 0, 0.0, -np.inf))


def log_partition(truth: np.ndarray, r: float, logw: np.ndarray, total: int) -> np.ndarray:
    """log Z(c) = log sum over {y >= 0, sum y = total} of prod_i w_i(y_i) exp(-r |y_i - c_i|), per row of
    `truth` (draws x cells): the cells' weight vectors convolved on 0..total, rescaled after each cell."""
    truth = np.asarray(truth, dtype=float)
    draws, n = truth.shape
    k = np.arange(total + 1, dtype=float)[None, :]
    log_scale = np.zeros(draws)
    dp = np.zeros((draws, total + 1))
    dp[:, 0] = 1.0
    for i in range(n):
        lw = -r * np.abs(k - truth[:, i:i + 1]) + logw[i][None, :]
        top = lw.max(axis=1)
        w = np.exp(lw - top[:, None])
        new = np.zeros_like(dp)
        for s in range(total + 1):  # new[:, j] = sum_s w[:, s] dp[:, j - s]
            new[:, s:] += w[:, s:s + 1] * dp[:, :total + 1 - s]
        peak = new.max(axis=1)
        dp = new / peak[:, None]
        log_scale += top + np.log(peak)
    with np.errstate(divide="ignore"):
        return log_scale + np.log(dp[:, total])


WINDOW = 40.0  # each county's tilted weights are kept within e^-WINDOW of their largest
MAX_ERROR = 1e-9  # the windowed normaliser's certified relative error (tails and aliasing) must stay below
MAX_WINDOW_WORK = 20_000_000  # cells x window width per posterior draw (the windowed normaliser's cost)
_BATCH_ELEMENTS = 2_000_000  # draws x cells x window width held at once


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


def log_partition_windowed(truth: np.ndarray, r: float, alpha, total: int,
                           logw: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """log Z(c) (see `log_partition`) per row of `truth`, and a certified bound on its relative error.

    Z(c) = e^{lam N} [x^N] prod_i h_i(x) for any tilt lam, h_i(k) = w_i(k) exp(-r |k - c_i| - lam k).
    lam is set per draw so the counties' modes sum to N; each h_i, log-concave, is kept on a window
    of its values within e^-WINDOW of its mode, normalised to a law v_i (the weights read from `logw`,
    `log_weights(alpha, total)`, when given, else computed), and the coefficient is read
    from the product of the windows' discrete Fourier transforms of length L (each window fits in L).
    Two errors, both bounded and returned: the tails cut off (at most the edge value times
    rho / (1 - rho), rho the edge ratio, which log-concavity makes a bound on every later ratio), and
    the aliases N +- L, +-2L, ... the cyclic product adds (at most P(S >= N + L) + P(S <= N - L) for S
    the sum of the windows' laws, bounded by Chernoff's inequality at a few tilts). The float rounding
    of the transforms enters the bound by the usual estimate (cells + log2 L roundoffs of the total)."""
    truth = np.asarray(truth, dtype=float)
    draws, n = truth.shape
    a = np.ones(n) if alpha is None else np.asarray(alpha, dtype=float)
    if np.any((a > 0) & (a < 1)):
        raise MechanismError("the windowed normaliser needs concentrations of 0 or at least 1")
    zero = a == 0  # cells held at 0 (no mass elsewhere): their factor is exp(-r c_i)
    half = int(np.ceil(WINDOW / r)) + 1
    out = np.empty(draws)
    err = np.full(draws, np.inf)
    for attempt in range(4):  # draws whose bound is above MAX_ERROR are done again with wider windows
        width = 2 * half + 1
        size = 1 << int(np.ceil(np.log2(width)))  # each window fits; the aliases are bounded below
        todo = np.flatnonzero(err > MAX_ERROR)
        rows = max(1, _BATCH_ELEMENTS // max(n * width, 1))
        for start in range(0, todo.size, rows):
            sl = todo[start:start + rows]
            out[sl], err[sl] = _windowed_batch(truth[sl], r, a, zero, total, half, size, logw)
        if np.all(err <= MAX_ERROR):
            return out, err
        half *= 2
    raise MechanismError(f"the windowed normaliser's certified relative error is {float(err.max()):.3g} "
                         f"(limit {MAX_ERROR:g}) even with windows of {2 * half + 1:,} values")


def _windowed_batch(c, r, a, zero, total, half, size, logw=None):
    b, n = c.shape
    # tilt: the counties' modes sum to the total (bisection; the sum falls as lam grows)
    # (the modes' sum can equal the total on an interval of lam, as for flat weights: its middle)
    live = ~zero

    def boundary(strict):
        lo, hi = np.full(b, -r + 1e-12), np.full(b, r + float(np.log1p(a.max())) + 1.0)
        for _ in range(60):
            mid = (lo + hi) / 2
            s = np.where(live[None, :], _tilt_modes(c, a[None, :], r, mid[:, None], total), 0.0).sum(axis=1)
            above = s > total if strict else s >= total
            lo, hi = np.where(above, mid, lo), np.where(above, hi, mid)
        return (lo + hi) / 2

    lam = (boundary(True) + boundary(False)) / 2
    v, first, j, edges, top, mass = _windows(c, r, a, zero, total, half, lam, logw)
    out, bound = _coefficient(v, first, j, edges, top, mass, lam, live, total, half, size)
    redo = np.flatnonzero(bound > MAX_ERROR)
    if redo.size:
        # the modes' sum is not the means' (a county near 0 has its mean above its mode): one Newton
        # step on the windows' laws, d E[S] / d lam = -Var[S], centres the coefficient on the sum's law
        vj = v[redo] @ j
        mean = vj.sum(axis=1) + first[redo].sum(axis=1)
        var = (v[redo] @ (j * j)).sum(axis=1) - (vj**2).sum(axis=1)
        lam2 = np.maximum(lam[redo] + (mean - total) / np.maximum(var, 1e-12), -r + 1e-9)
        parts = _windows(c[redo], r, a, zero, total, half, lam2, logw)
        out[redo], bound[redo] = _coefficient(*parts, lam2, live, total, half, size)
    return out, bound


def _windows(c, r, a, zero, total, half, lam, logw=None):
    """Each county's tilted weights on its window around the mode: (laws v, window starts, offsets j,
    the log weights at the windows' two outermost values on each side, their maxima, the windows'
    masses relative to the maxima). Computed in place: this is the normaliser's costly part."""
    from scipy.special import gammaln

    b, n = c.shape
    live = ~zero
    width = 2 * half + 1
    mode = np.where(live[None, :], _tilt_modes(c, a[None, :], r, lam[:, None], total), 0.0)
    first = np.clip(mode - half, 0, None)
    first = np.where(live[None, :], np.minimum(first, np.maximum(total - 2 * half, 0)), 0.0)
    j = np.arange(width, dtype=float)
    ki = first.astype(np.int64)[:, :, None] + np.arange(width, dtype=np.int64)[None, None, :]
    logh = ki - c[:, :, None]
    np.abs(logh, out=logh)
    logh *= -r
    logh -= lam[:, None, None] * ki
    if logw is not None and np.any(a != 1):  # the weights tabulated on 0..total (a = 0: mass at 0 only)
        logh += logw[np.arange(n)[None, :, None], np.minimum(ki, total)]
    elif np.any(a != 1):
        aa = np.where(zero, 1.0, a)[None, :, None]
        logh += np.where(live[None, :, None], gammaln(ki + aa) - gammaln(ki + 1.0) - gammaln(aa), 0.0)
        logh[~np.broadcast_to(live[None, :, None] | (ki == 0), logh.shape)] = -np.inf
    if total < 2 * half:  # windows reach past the total: no count there
        logh[ki > total] = -np.inf
    last = np.minimum(total - first, 2 * half).astype(np.int64)
    ib, icell = np.meshgrid(np.arange(b), np.arange(n), indexing="ij")
    edges = (logh[:, :, 0].copy(), logh[:, :, 1].copy() if width > 1 else logh[:, :, 0].copy(),
             logh[ib, icell, last], logh[ib, icell, np.maximum(last - 1, 0)], last)
    top = logh.max(axis=2)
    logh -= top[:, :, None]
    v = np.exp(logh, out=logh)
    mass = v.sum(axis=2)
    v /= mass[:, :, None]
    return v, first, j, edges, top, mass


def _coefficient(v, first, j, edges, top, mass, lam, live, total, half, size):
    """log Z from the windows' laws by FFT, and the certified bound (tails, aliases, rounding)."""
    b, n = first.shape
    # tails beyond each window, relative to its mass (log-concave: the edge ratio bounds every later one)
    left0, left1, right0, right1, last = edges
    norm = top + np.log(mass)

    def tail(edge, inner, present):
        with np.errstate(invalid="ignore", divide="ignore"):  # a flat edge (rho = 1): no bound, inf
            log_rho = np.minimum(edge - inner, 0.0)
            out = np.exp(edge - norm + log_rho - np.log(-np.expm1(log_rho)))
        return np.where(present & live[None, :], np.nan_to_num(out, nan=np.inf), 0.0)

    t = tail(right0, right1, first + last < total) + tail(left0, left1, first > 0)
    spec = np.fft.rfft(v, size, axis=2).prod(axis=1)
    target = total - first.sum(axis=1)  # the coefficient wanted, counted from the windows' starts
    coef = np.fft.irfft(spec, size, axis=1)
    got = coef[np.arange(b), (target % size).astype(np.int64)]
    # aliases: P(S >= target + L) + P(S <= target - L), S = the sum of the windows' laws (Chernoff,
    # at the best of a few tilts on each side)
    up, down = np.full(b, np.inf), np.full(b, np.inf)
    for theta in (0.5, 0.25, 0.1, 0.03, 0.01, 0.003, 0.001):
        with np.errstate(over="ignore", divide="ignore", invalid="ignore"):  # inf x 0 outside a window: NaN, skipped
            up = np.fmin(up, np.exp(np.log(v @ np.exp(theta * j)).sum(axis=1) - theta * (target + size)))
            down = np.fmin(down, np.exp(np.log(v @ np.exp(-theta * j)).sum(axis=1) + theta * (target - size)))
    alias = up + down
    with np.errstate(divide="ignore", invalid="ignore"):
        inside = np.where(got > alias, got - alias, np.nan)  # the windows' own coefficient, at least
        # float rounding of the transforms: the usual estimate, (cells + log2 L) units of roundoff of the
        # laws' total mass 1 (an estimate, not a proof, unlike the two terms before it)
        rounding = 4 * (n + np.log2(size)) * np.finfo(float).eps
        bound = np.nan_to_num((np.expm1(np.log1p(t).sum(axis=1)) + alias + rounding) / inside, nan=np.inf)
    with np.errstate(divide="ignore", invalid="ignore"):
        log_z = lam * total + norm.sum(axis=1) + np.log(np.where(got > 0, got, np.nan))
    return np.nan_to_num(log_z, nan=-np.inf), bound


def _congenial_one(query, cells, value, r: float, alpha, what: str) -> CountLikelihood:
    value = np.asarray(value, dtype=np.int64)
    total = int(value.sum())
    n = len(value)
    a = np.ones(n) if alpha is None else np.asarray(alpha, dtype=float)
    if n * (total + 1) ** 2 <= MAX_JOINT_WORK:  # small: the exact convolution over 0..total
        logw = log_weights(a, total)
        own = logw[np.arange(n), value]

        def joint(truth):
            return -log_partition(np.maximum(np.asarray(truth), 0), r, logw, total)
        how = "normaliser by exact convolution"
    else:
        width = n * (2 * (int(np.ceil(WINDOW / r)) + 1) + 1)
        if width > MAX_WINDOW_WORK:
            raise MechanismError(
                f"the likelihood of a congenial release normalizes over every vector of {n} counts summing to {total:,}: "
                f"its windowed normaliser takes {width:.3g} values per posterior draw (limit {MAX_WINDOW_WORK:.3g}); "
                "infer on a coarser target or a smaller release")
        own = _own_weights(a, value)
        table = log_weights(a, total) if alpha is not None and n * (total + 1) <= MAX_WINDOW_WORK else None

        def joint(truth):
            return -log_partition_windowed(np.maximum(np.asarray(truth), 0), r, None if alpha is None else a, total,
                                           table)[0]
        how = (f"normaliser by windowed FFT convolution, certified to a relative error below {MAX_ERROR:g} per draw "
               "(truncated tails and aliasing bounded; refused above it)")

    def logpmf(truth):
        t = np.asarray(truth, dtype=np.int64)
        return np.where(t >= 0, -r * np.abs(value - t) + own, -np.inf)

    # Z(c) >= its term y = c, prod_i w_i(c_i) >= 1 (integer weights): the joint term is at most 0
    return CountLikelihood(query, cells, value, logpmf, own, value.astype(float), np.full(n, 2 / (r * r)),
                           f"{what}; {how}", joint=joint, joint_max=0.0)


def _own_weights(a: np.ndarray, value: np.ndarray) -> np.ndarray:
    """log C(y_i + a_i - 1, y_i) of the released vector (a_i = 0: 0 at y_i = 0, else -inf)."""
    from scipy.special import gammaln

    safe = np.where(a > 0, a, 1.0)
    out = gammaln(value + safe) - gammaln(value + 1.0) - gammaln(safe)
    return np.where(a > 0, out, np.where(value == 0, 0.0, -np.inf))


def naive_likelihoods(params, outputs, r_c, r_o, total_z=None, base: str = "naive", alpha=None):
    """The release's likelihoods: cases (with the base measure's normalization), deaths, the total."""
    frame = outputs.get("counts")
    if frame is None:
        return None
    # the released period's label travels with its counts, so a target by period covers that period only
    keys = tuple(c for c in (params.get("period"), params["cell"]) if c and c in frame.columns)
    cells = frame[list(keys)].astype(str).reset_index(drop=True)
    y = frame[params["table"]].to_numpy(dtype=np.int64)
    query = ir.CountQuery(params["table"], keys)
    what = f"Wasserstein exponential mechanism, {base} base, rate {float(r_c):g}"
    if base == "naive":
        out = [_one(query, cells, y, float(r_c), None, what)]
    else:
        out = [_congenial_one(query, cells, y, float(r_c), alpha, what)]
    if r_o is not None and params.get("outcome") in frame.columns:
        z = frame[params["outcome"]].to_numpy(dtype=np.int64)
        died = cells.assign(**{params["outcome"]: BOOL_TRUE})
        out.append(_one(ir.CountQuery(params["table"], (*keys, params["outcome"])), died, z, float(r_o), y,
                        f"outcome counts on 0..released count, rate {float(r_o):g}"))
    total = outputs.get("total")
    if total_z is not None and total is not None:
        columns = list(total_z.query.columns)
        out.append(CountLikelihood.exact(total_z.query, total[columns].astype(str).reset_index(drop=True),
                                         total["count"].to_numpy(), "the public total the release conditions on (Z)"))
    return out
