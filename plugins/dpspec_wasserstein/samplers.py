"""Exact samplers for the Wasserstein exponential mechanism over count vectors (seed 2, Section 4.2).

The target is p(y) proportional to exp(-r ||y - c||_1) mu(y), r = epsilon / (2 Delta), for three
base measures mu. Every random decision goes through the project's exact integer samplers
(`discrete_laplace` with a rational scale, `bernoulli_exp`), never MCMC: the guarantee of
Theorem 9 holds only for exact draws.

- naive (counting measure on the nonnegative integers): the target is a product of discrete
  Laplace laws truncated at 0, drawn coordinatewise by rejection of negatives;
- congenial (counting measure on vectors summing to the public total C): n - 1 coordinates from
  the naive laws tilted by exp(-lambda k) (rational lambda: exact), the last one set to C minus
  their sum and accepted with probability proportional to its own tilted weight (0 if negative),
  which leaves exactly the target (the tilt multiplies it by exp(-lambda C), a constant);
- prior (Dirichlet-multinomial with integer concentrations a_i = previous counts + 1, on the same
  vectors): the same last-cell rejection, from exponentially tilted per-cell laws tabulated over
  the whole support; floats only propose and decide clear cases, every decision is exact (see `prior`).
Each sampler measures its acceptance rate; a pilot run estimates the cost first, and a cost
above the limit is refused with the estimate.
"""
from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from dpspec.api import MechanismError, bernoulli_exp, bernoulli_scaled_exp, discrete_laplace

PILOT = 256  # proposals of the pilot run that estimates the acceptance rate
BATCH_COUNTS = 1 << 21  # proposed counts per round (bounds memory: a few arrays of this many int64)


def rate(epsilon: Fraction, sensitivity: Fraction) -> Fraction:
    """r = epsilon / (2 Delta): the exponential mechanism's rate (Theorem 9)."""
    return Fraction(epsilon) / (2 * Fraction(sensitivity))


def truncated_laplace(centre: np.ndarray, lo: np.ndarray, hi, r: Fraction, rng) -> np.ndarray:
    """One draw per element of P(k) proportional to exp(-r |k - centre|) on lo <= k <= hi (hi may be None).

    Inside the bounds: centre + discrete Laplace, outside ones rejected. A centre beyond a bound
    uses the bound minus |Y| (|Y| = k has twice the mass of the target for k > 0, so those are
    kept with probability 1/2), so acceptance never collapses when the centre is off the support."""
    centre = np.asarray(centre, dtype=np.int64)
    lo = np.broadcast_to(np.asarray(lo, dtype=np.int64), centre.shape)
    hi_arr = None if hi is None else np.broadcast_to(np.asarray(hi, dtype=np.int64), centre.shape)
    if hi_arr is not None and bool((hi_arr < lo).any()):
        raise MechanismError("an empty support: an upper bound below the lower bound")
    out = np.empty(centre.shape, dtype=np.int64)
    pending = np.arange(centre.size)
    scale = 1 / r
    flat_c, flat_lo = centre.ravel(), lo.ravel()
    flat_hi = None if hi_arr is None else hi_arr.ravel()
    while pending.size:
        y = discrete_laplace(scale, pending.size, rng)
        c, low = flat_c[pending], flat_lo[pending]
        high = None if flat_hi is None else flat_hi[pending]
        above = high is not None
        x = c + y
        below_mask = c < low
        above_mask = (c > high) if above else np.zeros(pending.size, dtype=bool)
        mag = np.abs(y)
        half = (mag == 0) | (rng.integers(0, 2, size=pending.size) == 0)
        x = np.where(below_mask, low + mag, x)
        if above:
            x = np.where(above_mask, high - mag, x)
        ok = (x >= low) & ((x <= high) if above else True)
        ok &= ~((below_mask | above_mask) & ~half)
        out.ravel()[pending[ok]] = x[ok]
        pending = pending[~ok]
    return out


def naive(counts: np.ndarray, r: Fraction, draws: int, rng) -> tuple[np.ndarray, dict]:
    """`draws` vectors from the naive base measure (product form: exact coordinatewise)."""
    c = np.broadcast_to(np.asarray(counts, dtype=np.int64), (draws, len(counts)))
    return truncated_laplace(c, 0, None, r, rng), {"acceptance": None, "method": "product form"}


def _l1_tilt(counts, total: int, r: Fraction) -> Fraction:
    """A rational tilt lambda in [-r/2, r/2] with sum_i E[y_i] near `total` when y_i has the law
    exp(-r |k - c_i| - lambda k) on k >= 0. Truncation at 0 pushes small cells up, so without a tilt
    the proposals' sum drifts above the total by about a scale per small cell and the acceptance
    collapses at national size; the tilt removes the drift. It only sets the acceptance rate (the
    target given the sum is unchanged), so it is found in floats and then rounded to r * j / 64."""
    rf = float(r)
    width = int(math.ceil(40 / (rf / 2)))  # weights below e^-40 of the centre's are negligible here
    offs = np.arange(-width, width + 1, dtype=float)
    c = counts.astype(float)[:, None]
    k = c + offs[None, :]
    valid = k >= 0

    def mean_sum(lam):
        logw = np.where(valid, -rf * np.abs(offs)[None, :] - lam * offs[None, :], -np.inf)
        w = np.exp(logw - logw.max(axis=1, keepdims=True))
        return float(((w * np.where(valid, k, 0)).sum(axis=1) / w.sum(axis=1)).sum())

    lo, hi = -rf / 2, rf / 2
    if mean_sum(hi) > total or mean_sum(lo) < total:
        return Fraction(0) if abs(mean_sum(0.0) - total) <= abs(mean_sum(hi) - total) else Fraction(1, 2) * r
    for _ in range(10):  # the result is rounded to r/64 anyway
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if mean_sum(mid) > total else (lo, mid)
    return r * Fraction(round((lo + hi) / 2 / rf * 64), 64)


def tilted_truncated_laplace(centre: np.ndarray, r: Fraction, lam: Fraction, rng) -> np.ndarray:
    """Draws of P(k) proportional to exp(-r |k - c| - lam k) on k >= 0, |lam| < r: a truncated discrete
    Laplace of rate r - |lam| accepted with probability exp(-2 |lam| |k - c|) on the side lam pushes
    away from (the ratio of the two laws there, 1 on the other side)."""
    centre = np.asarray(centre, dtype=np.int64)
    if lam == 0:
        return truncated_laplace(centre, 0, None, r, rng)
    out = np.empty(centre.shape, dtype=np.int64)
    flat_c = centre.ravel()
    pending = np.arange(flat_c.size)
    two = 2 * abs(lam)
    while pending.size:
        y = truncated_laplace(flat_c[pending], 0, None, r - abs(lam), rng)
        d = (y - flat_c[pending]) * (1 if lam > 0 else -1)
        ok = d <= 0
        far = np.flatnonzero(~ok)
        ok[far] = bernoulli_exp(d[far] * two.numerator, two.denominator, rng)
        out.ravel()[pending[ok]] = y[ok]
        pending = pending[~ok]
    return out


def _congenial_proposals(counts, total, r, lam, size, rng):
    """Proposals and their exact acceptance for the congenial sampler (see the module doc): the first
    n - 1 cells from their tilted laws, the last set to the remainder and accepted with probability
    exp(-(r |d| + lam d)), d = y_n - c_n, its tilted weight over the largest one (at d = 0)."""
    head = tilted_truncated_laplace(np.broadcast_to(counts[:-1], (size, len(counts) - 1)), r, lam, rng)
    last = total - head.sum(axis=1)
    ok = last >= 0
    idx = np.flatnonzero(ok)
    d = last[idx] - counts[-1]
    exponent_den = r.denominator * lam.denominator
    num = np.abs(d) * (r.numerator * lam.denominator) + d * (lam.numerator * r.denominator)
    ok[idx] = bernoulli_exp(num, exponent_den, rng)
    return np.column_stack([head, last]), ok


def _rejection(propose, draws: int, n: int, max_proposals: int, what: str) -> tuple[np.ndarray, dict]:
    """Exact rejection: a pilot estimates the acceptance rate; refuse when the expected number of
    proposed coordinates exceeds the limit; then draw in rounds until `draws` are accepted."""
    pilot, ok = propose(PILOT)
    accepted = [pilot[ok]]
    tried, got = PILOT, int(ok.sum())
    rate_est = max(got, 0.5) / tried
    expected = draws / rate_est * n
    if expected > max_proposals:
        raise MechanismError(
            f"the {what} sampler would need about {expected:.3g} proposed counts for {draws} exact draw(s) "
            f"(measured acceptance {got}/{tried}); that is above the limit of {max_proposals:.3g}. Raise "
            "'max_proposals', lower the privacy (a larger epsilon), or use another base measure; MCMC is not "
            "used because the guarantee holds only for exact draws")
    while got < draws:
        size = int(min(max(64, 1.2 * (draws - got) / rate_est), max(64, BATCH_COUNTS // n)))
        y, ok = propose(size)
        accepted.append(y[ok])
        tried += size
        got += int(ok.sum())
    return np.concatenate(accepted)[:draws], {"acceptance": got / tried, "proposals": tried, "method": "exact rejection"}


def congenial(counts, total: int, r: Fraction, draws: int, rng, max_proposals: int = 10**8):
    """Vectors summing to `total` with P(y) proportional to exp(-r ||y - c||_1)."""
    counts = np.asarray(counts, dtype=np.int64)
    if len(counts) == 1:
        return np.full((draws, 1), total, dtype=np.int64), {"acceptance": 1.0, "method": "a single cell"}
    lam = _l1_tilt(counts, total, r)
    y, info = _rejection(lambda size: _congenial_proposals(counts, total, r, lam, size, rng), draws, len(counts),
                         max_proposals, "deterministic congenial")
    info["tilt"] = float(lam)
    return y, info


MAX_TABLE = 50_000_000  # entries of the prior sampler's per-cell tables (cells x (total + 1))


def _tilt(logh, total):
    """lambda with sum_i E[y_i] = total under q_i(k) proportional to h_i(k) e^{-lambda k} (bisection):
    the tilt leaves the target given the sum unchanged and centres the proposals' sum on it. It
    only sets the acceptance rate, so it is found on every `stride`-th support point."""
    stride = max(1, logh.shape[1] // 2000)
    logh = logh[:, ::stride]
    k = np.arange(0, stride * logh.shape[1], stride, dtype=float)

    def mean_sum(lam):
        w = logh - lam * k
        w = np.exp(w - w.max(axis=1, keepdims=True))
        return float(((w * k).sum(axis=1) / w.sum(axis=1)).sum())

    lo, hi = -1.0, 1.0
    while mean_sum(lo) < total:
        lo *= 2
    while mean_sum(hi) > total:
        hi *= 2
    for _ in range(30):  # the tilt changes only the acceptance rate, never the law
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if mean_sum(mid) > total else (lo, mid)
    return (lo + hi) / 2


_U = 2.0 ** -53  # the unit roundoff of float64


class _PriorLaws:
    """The prior sampler's per-cell laws q_i(k) proportional to h_i(k) e^{-lam k} on 0..total, in
    float (to propose and decide fast) and exactly (to decide the rare close calls).

    h_i(k) = exp(-r |k - c_i|) C(k + a_i - 1, k). log C(k + a - 1, k) is the running sum of
    log1p((a - 1) / j), j = 1..k; every other term is a product of a rational and an integer. So
    g_i(k) = q_i(k) / q_i(m_i) (m_i the float mode) is exactly R·exp(-x) with
    R = C(k + a_i - 1, k) / C(m_i + a_i - 1, m_i) and x = r (|k - c_i| - |m_i - c_i|) + lam (k - m_i),
    and its float logarithm is within `eta` of the truth: eta bounds the rounding of a running
    sum of N + 1 terms (Higham's (N + 1) u sum|terms|) and of the products, with a factor 4 to spare."""

    def __init__(self, counts, alpha, total: int, r: Fraction):
        self.counts, self.alpha, self.total, self.r = counts, alpha, total, r
        k = np.arange(total + 1)
        j = np.arange(1, total + 1, dtype=float)[None, :]
        steps = np.log1p((alpha.astype(float)[:, None] - 1) / j)
        logc = np.concatenate([np.zeros((len(counts), 1)), np.cumsum(steps, axis=1)], axis=1)
        rf = float(r)
        logh = logc - rf * np.abs(k[None, :] - counts[:, None])
        self.lam = Fraction(round(_tilt(logh, total) * 2**24), 2**24)  # rational: the exact side needs it
        logq = logh - float(self.lam) * k[None, :]
        self.mode = np.argmax(logq, axis=1)
        self.logg = logq - logq[np.arange(len(counts)), self.mode][:, None]  # <= 0 exactly, 0 at the mode
        size = float(logc[:, -1].max()) + rf * (total + float(counts.max())) + abs(float(self.lam)) * total + 1
        self.eta = 16 * (total + 16) * _U * size
        self.eta_q = Fraction(self.eta) * 2  # a rational above eta

    def exact(self, cell: int, k: int, extra: Fraction = Fraction(0)) -> tuple[Fraction, Fraction]:
        """(R, x) with g_cell(k)·exp(-extra) = R·exp(-x) exactly."""
        a, m, c = int(self.alpha[cell]), int(self.mode[cell]), int(self.counts[cell])
        ratio = Fraction(math.comb(k + a - 1, k), math.comb(m + a - 1, m))
        return ratio, self.r * (abs(k - c) - abs(m - c)) + self.lam * (k - m) + extra


def prior(counts, alpha, total: int, r: Fraction, draws: int, rng, max_proposals: int = 10**8):
    """Vectors summing to `total` with P(y) proportional to exp(-r ||y - c||_1) DirMult(y; total, alpha).

    The target is a product of h_i(y_i) = exp(-r |y_i - c_i|) C(y_i + a_i - 1, y_i) given the sum
    (integer concentrations a_i). Proposals: every cell but the widest from its tilted law q_i,
    the widest set to the total minus their sum and accepted with probability
    q_n(y_n) / max q_n·exp(-eta_q), which leaves exactly the target (see `_PriorLaws`). Every
    decision is exact: a cell's value is proposed from integer weights W_i(k) >= 2^B g_i(k) (an
    integer uniform against their running sum) and kept with probability 2^B g_i(k) / W_i(k), and
    both that and the last cell's acceptance are exact Bernoulli(R·exp(-x)) draws
    (`bernoulli_scaled_exp`), so no float rounding reaches the law."""
    counts = np.asarray(counts, dtype=np.int64)
    alpha = np.asarray(alpha, dtype=np.int64)
    n = len(counts)
    if n * (total + 1) > MAX_TABLE:
        raise MechanismError(f"the prior congenial sampler needs {n} x {total + 1:,} probability tables "
                             f"({n * (total + 1):.3g} entries, above the limit of {MAX_TABLE:.3g})")
    if n == 1:
        return np.full((draws, 1), total, dtype=np.int64), {"acceptance": 1.0, "method": "a single cell"}
    laws = _PriorLaws(counts, alpha, total, r)
    k = np.arange(total + 1)
    g = np.exp(laws.logg)
    var = (g * k**2).sum(axis=1) / g.sum(axis=1) - ((g * k).sum(axis=1) / g.sum(axis=1)) ** 2
    last = int(np.argmax(var))
    head = np.array([i for i in range(n) if i != last])
    bits = min(40, 62 - (total + 2).bit_length() - 2)  # W's float rounding below 1; running sums below 2**62
    weights = np.ceil(np.exp(laws.logg[head] + laws.eta) * 2.0**bits).astype(np.int64) + 1
    cum = np.cumsum(weights, axis=1)
    log_keep = bits * math.log(2) + laws.logg[head] - np.log(weights.astype(float))  # log(2^B g / W) <= 0
    log_err = laws.eta + 4 * _U * (bits + 1)

    def head_cells(size):
        ys = np.empty((size, len(head)), dtype=np.int64)
        pending_r, pending_c = np.repeat(np.arange(size), len(head)), np.tile(np.arange(len(head)), size)
        while pending_r.size:
            u = rng.integers(0, cum[pending_c, -1], dtype=np.int64)
            val = np.empty(pending_r.size, dtype=np.int64)
            for j in np.unique(pending_c):
                at = pending_c == j
                val[at] = np.searchsorted(cum[j], u[at], side="right")
            cell, w = head[pending_c], weights[pending_c, val]
            ok = bernoulli_scaled_exp(
                log_keep[pending_c, val], log_err, lambda i: _times(laws.exact(int(cell[i]), int(val[i])),
                                                                    Fraction(1 << bits, int(w[i]))), rng)
            ys[pending_r[ok], pending_c[ok]] = val[ok]
            pending_r, pending_c = pending_r[~ok], pending_c[~ok]
        return ys

    def propose(size):
        ys = np.empty((size, n), dtype=np.int64)
        ys[:, head] = head_cells(size)
        rest = total - ys[:, head].sum(axis=1)
        ys[:, last] = rest
        ok = rest >= 0
        idx = np.flatnonzero(ok)
        ok[idx] = bernoulli_scaled_exp(laws.logg[last, rest[idx]] - float(laws.eta_q), 2 * laws.eta + 1e-15,
                                       lambda i: laws.exact(last, int(rest[idx[i]]), laws.eta_q), rng)
        return ys, ok

    y, info = _rejection(propose, draws, n, max_proposals, "prior congenial")
    info.update(method="exact rejection (integer weights, exact Bernoulli(R exp(-x)) acceptances)", tilt=float(laws.lam))
    return y, info


def _times(pair, factor: Fraction):
    ratio, x = pair
    return ratio * factor, x
