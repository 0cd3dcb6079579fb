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
  which leaves exactly the target (the tilt multiplies it by exp(-lambda C), a constant); when no
  tilt the discrete Laplace proposals allow reaches the total (a scale far above the counts), the
  prior sampler below with every concentration 1, whose target is the same;
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

from dpspec.api import (
    MechanismError,
    bernoulli_exp,
    bernoulli_scaled_exp,
    discrete_laplace,
    bernoulli_ratios,
    LazyModule,
)

# heavy libraries, imported on first use
_special = LazyModule("scipy.special", "_special", globals())

PILOT = 256  # proposals of the pilot run that estimates the acceptance rate
FLAT_BELOW = Fraction(1, 1024)  # r (hi - lo + 1) at most this: Laplace proposals land in the support too rarely
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
    if hi_arr is not None and r * (int((hi_arr - lo).max(initial=0)) + 1) <= FLAT_BELOW:
        return _flat_truncated_laplace(centre, lo, hi_arr, r, rng)
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


def _flat_truncated_laplace(centre, lo, hi, r: Fraction, rng) -> np.ndarray:
    """The same law when r (hi - lo + 1) <= FLAT_BELOW, where discrete Laplace proposals of scale
    1/r would almost all fall outside a support much narrower than the scale (a budget near the
    samplers' limit): k uniform on lo..hi, kept with probability exp(-r (|k - centre| - d)), d the
    centre's distance to the support (exact, by `bernoulli_exp`; acceptance above exp(-1/1024))."""
    c, low, high = (a.ravel() for a in (centre, lo, hi))
    d = np.maximum(np.maximum(low - c, c - high), 0)
    out = np.empty(c.size, dtype=np.int64)
    pending = np.arange(c.size)
    while pending.size:
        k = rng.integers(low[pending], high[pending] + 1)
        excess = (np.abs(k - c[pending]) - d[pending]).astype(object) * r.numerator
        keep = bernoulli_exp(excess if r.numerator >= 2**31 else excess.astype(np.int64), r.denominator, rng)
        out[pending[keep]] = k[keep]
        pending = pending[~keep]
    return out.reshape(centre.shape)


def naive(counts: np.ndarray, r: Fraction, draws: int, rng) -> tuple[np.ndarray, dict]:
    """`draws` vectors from the naive base measure (product form: exact coordinatewise)."""
    c = np.broadcast_to(np.asarray(counts, dtype=np.int64), (draws, len(counts)))
    return truncated_laplace(c, 0, None, r, rng), {"acceptance": None, "method": "product form"}


def _l1_tilt(counts, total: int, r: Fraction) -> Fraction | None:
    """A rational tilt lambda in [-r/2, r/2] with sum_i E[y_i] near `total` when y_i has the law
    exp(-r |k - c_i| - lambda k) on k >= 0, or None when no tilt in that range reaches the total.
    Truncation at 0 pushes small cells up, so without a tilt the proposals' sum drifts above the
    total by about a scale per small cell and the acceptance collapses at national size; the tilt
    removes the drift. It only sets the acceptance rate (the target given the sum is unchanged), so
    it is found in floats and then rounded to r * j / 64."""
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
        return None
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
        ok[far] = bernoulli_exp(_exact_products(d[far], two.numerator), two.denominator, rng)
        out.ravel()[pending[ok]] = y[ok]
        pending = pending[~ok]
    return out


def _exact_products(values: np.ndarray, factor: int) -> np.ndarray:
    """values * factor without int64 wrap-around: Python integers (an object array) when the product
    could pass 2^62. An epsilon off a sweep's log grid (44457/2500000) gives rates and tilts with
    denominators near 10^9, whose cross products with a count difference overflow int64."""
    values = np.asarray(values, dtype=np.int64)
    top = int(np.abs(values).max()) if values.size else 0
    if top * abs(int(factor)) < 2**62:
        return values * np.int64(factor)
    return values.astype(object) * int(factor)


def _congenial_proposals(counts, total, r, lam, size, rng):
    """Proposals and their exact acceptance for the congenial sampler (see the module doc): the first
    n - 1 cells from their tilted laws, the last set to the remainder and accepted with probability
    exp(-(r |d| + lam d)), d = y_n - c_n, its tilted weight over the largest one (at d = 0)."""
    head = tilted_truncated_laplace(np.broadcast_to(counts[:-1], (size, len(counts) - 1)), r, lam, rng)
    last = total - head.sum(axis=1)
    ok = last >= 0
    idx = np.flatnonzero(ok)
    d = last[idx] - counts[-1]
    exponent_den = math.lcm(r.denominator, lam.denominator)  # lam = r j / 64: the lcm keeps num in int64
    num = _exact_products(np.abs(d), r.numerator * (exponent_den // r.denominator)) + _exact_products(
        d, lam.numerator * (exponent_den // lam.denominator)
    )
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
            "used because the guarantee holds only for exact draws"
        )
    while got < draws:
        size = int(min(max(64, 1.2 * (draws - got) / rate_est), max(64, BATCH_COUNTS // n)))
        y, ok = propose(size)
        accepted.append(y[ok])
        tried += size
        got += int(ok.sum())
    return np.concatenate(accepted)[:draws], {
        "acceptance": got / tried,
        "proposals": tried,
        "method": "exact rejection",
    }


def congenial(counts, total: int, r: Fraction, draws: int, rng, max_proposals: int = 10**8):
    """Vectors summing to `total` with P(y) proportional to exp(-r ||y - c||_1).

    When a tilt within [-r/2, r/2] centres the proposals on the total, the tilted discrete Laplace
    proposals above. Otherwise (a scale far above the typical count: epsilon 0.01 gives Pennsylvania
    a scale of 800 against a median county of 6 cases in March 2020) the truncated proposals sum to
    several times the total, the remainder is negative in every proposal, and the rejection never ends;
    the tilt needed (0.0129 there, 10 r) leaves the per-cell law exp(-r |k - c| - lam k) a
    decreasing one that no discrete Laplace proposal covers. Then the draws come from the prior
    sampler's windowed integer tables with every concentration 1: DirMult(y; total, 1) is constant
    on the vectors summing to the total, so its target is exactly this one, at any tilt."""
    counts = np.asarray(counts, dtype=np.int64)
    if len(counts) == 1:
        return np.full((draws, 1), total, dtype=np.int64), {"acceptance": 1.0, "method": "a single cell"}
    lam = _l1_tilt(counts, total, r)
    if lam is None:
        y, info = prior(
            counts,
            np.ones(len(counts), dtype=np.int64),
            total,
            r,
            draws,
            rng,
            max_proposals,
            what="deterministic congenial",
        )
        info["method"] = (
            "exact rejection from windowed integer tables (the flat Dirichlet-multinomial: no tilt within r/2 reaches the total)"
        )
        return y, info
    y, info = _rejection(
        lambda size: _congenial_proposals(counts, total, r, lam, size, rng),
        draws,
        len(counts),
        max_proposals,
        "deterministic congenial",
    )
    info["tilt"] = float(lam)
    return y, info


MAX_TABLE = 50_000_000  # entries of the prior sampler's per-cell tables (cells x (total + 1))


_U = 2.0**-53  # the unit roundoff of float64
WINDOW = 40.0  # each cell's table spans the values whose weight is within e^-40 of its mode's
_RHO_BITS = 40  # tail decay rates are rationals j / 2^40, rounded up


def _modes(alpha, counts, total: int, rf: float, lam: float) -> np.ndarray:
    """The mode of each cell's law C(k + a - 1, k) exp(-r |k - c| - lam k) on 0..total: the first k
    whose increment log1p((a - 1)/(k + 1)) - r sign(k - c + 1/2) - lam is <= 0 (log-concave, so
    the increments fall), by bisection over all cells at once."""
    lo = np.zeros(len(counts), dtype=np.int64)
    hi = np.full(len(counts), total, dtype=np.int64)
    a = alpha.astype(float)
    while bool((lo < hi).any()):
        mid = (lo + hi) // 2
        inc = np.log1p((a - 1) / (mid + 1)) - rf * np.where(mid >= counts, 1.0, -1.0) - lam
        down = inc <= 0
        hi = np.where(down, mid, hi)
        lo = np.where(down, lo, mid + 1)
    return lo


def _approx_logg(alpha, counts, rf, lam, k, m):
    """log of a cell's weight at k relative to its mode m, in float (only to place the windows)."""
    f = lambda x: _special.gammaln(x + alpha) - _special.gammaln(x + 1) - rf * np.abs(x - counts) - lam * x  # noqa: E731
    return f(k.astype(float)) - f(m.astype(float))


def _edge(alpha, counts, rf, lam, m, bound, cutoff: float, upward: bool) -> np.ndarray:
    """The farthest k from the mode toward `bound` whose weight is still above e^-cutoff (bisection)."""
    near, far = m.copy(), np.asarray(bound, dtype=np.int64).copy()
    while bool((np.abs(far - near) > 1).any()):
        mid = (near + far) // 2 if upward else (near + far + 1) // 2
        inside = _approx_logg(alpha, counts, rf, lam, mid, m) >= -cutoff
        near = np.where(inside, mid, near)
        far = np.where(inside, far, mid)
    keep_far = _approx_logg(alpha, counts, rf, lam, far, m) >= -cutoff
    return np.where(keep_far, far, near)


class _PriorLaws:
    """The prior sampler's per-cell laws q_i(k) proportional to h_i(k) e^{-lam k}, k >= 0, in float
    (to propose and decide fast) and exactly (to decide the rare close calls and the tails).

    h_i(k) = exp(-r |k - c_i|) C(k + a_i - 1, k), log-concave. Each cell is tabulated on a window
    [lo_i, hi_i] around its mode m_i holding the values within e^-WINDOW of the mode's weight;
    beyond it a geometric envelope g(edge) rho^j (rho a rational above the edge's decay,
    exp(slope); log-concavity makes it an upper bound) carries the tails, so no value is ever
    dropped. Inside a window, log C(k + a - 1, k) - log C(m + a - 1, m) is a running sum of
    log1p((a - 1) / j); g_i(k) = q_i(k) / q_i(m_i) is exactly R·exp(-x) with
    R = C(k + a_i - 1, k) / C(m_i + a_i - 1, m_i) and x = r (|k - c_i| - |m_i - c_i|) + lam (k - m_i),
    and its float logarithm is within `eta` of the truth: eta bounds the rounding of a running sum
    (Higham's (width + 1) u sum|terms|) and of the products, with a factor 4 to spare."""

    def __init__(self, counts, alpha, total: int, r: Fraction, cutoff: float = None):
        cutoff = WINDOW if cutoff is None else cutoff
        self.counts, self.alpha, self.total, self.r = counts, alpha, total, r
        rf = float(r)
        a = alpha.astype(float)
        lam = self._tilt(alpha, counts, total, rf, cutoff)
        self.lam = Fraction(round(lam * 2**24), 2**24)  # rational: the exact side needs it
        lf = float(self.lam)
        m = _modes(alpha, counts, total, rf, lf)
        self.lo = _edge(a, counts, rf, lf, m, np.zeros_like(m), cutoff, upward=False)
        self.hi = _edge(a, counts, rf, lf, m, np.full_like(m, total), cutoff, upward=True)
        self.lo = np.minimum(self.lo, np.maximum(m - 1, 0))  # room for a slope on each side
        self.hi = np.maximum(self.hi, np.minimum(m + 1, total))
        self.width = int((self.hi - self.lo).max()) + 1
        cols = np.arange(self.width)[None, :]
        ks = self.lo[:, None] + cols
        valid = ks <= self.hi[:, None]
        with np.errstate(divide="ignore", invalid="ignore"):
            steps = np.where((cols > 0) & valid, np.log1p((a[:, None] - 1) / np.maximum(ks, 1)), 0.0)
        logc = np.cumsum(steps, axis=1)
        logq = logc - rf * np.abs(ks - counts[:, None]) - lf * ks
        logq = np.where(valid, logq, -np.inf)
        top = np.argmax(logq, axis=1)
        self.mode = self.lo + top
        self.logg = logq - logq[np.arange(len(counts)), top][:, None]  # <= 0 exactly, 0 at the mode
        size = float(np.abs(logc).max()) + rf * (total + float(counts.max())) + abs(lf) * total + 1
        self.eta = 16 * (self.width + 16) * _U * size
        self.eta_q = Fraction(self.eta) * 2  # a rational above eta
        # tails: decay rates above exp(edge slope + 2 eta) (the true slope is within 2 eta)
        rows = np.arange(len(counts))
        right_slope = self.logg[rows, self.hi - self.lo] - self.logg[rows, np.maximum(self.hi - self.lo - 1, 0)]
        left_slope = self.logg[rows, 0] - self.logg[rows, np.minimum(1, self.hi - self.lo)]
        self.right = self._tail(right_slope, self.logg[rows, self.hi - self.lo], self.hi < total)
        self.left = self._tail(left_slope, self.logg[rows, 0], self.lo > 0)

    def _tail(self, slope, log_edge, present):
        """(rho as rationals, upper bounds of g at the edge, present) for one side's geometric envelopes."""
        rho = np.exp(slope + 2 * self.eta) * (1 + 1e-9)
        if bool((present & (rho >= 1 - 1e-9)).any()):
            raise MechanismError("the prior sampler's window ends where its law is still flat; raise the window")
        rho_num = np.ceil(np.minimum(rho, 1 - 2**-30) * 2.0**_RHO_BITS).astype(np.int64)
        edge = np.exp(log_edge + self.eta) * (1 + 1e-9)
        return rho_num, edge, present

    @staticmethod
    def _tilt(alpha, counts, total, rf, cutoff):
        """lam with the cells' means summing to the total (the tilt leaves the target given the sum
        unchanged; it only sets the acceptance rate), by bisection; each mean is taken over the
        cell's window at that lam (at most 400 evenly spaced values of it)."""
        a = alpha.astype(float)

        def mean_sum(lam):
            m = _modes(alpha, counts, total, rf, lam)
            left = _edge(a, counts, rf, lam, m, np.zeros_like(m), cutoff, upward=False)
            right = _edge(a, counts, rf, lam, m, np.full_like(m, total), cutoff, upward=True)
            stride = max(1, int((right - left).max()) // 400)
            ks = left[:, None] + np.arange(0, int((right - left).max()) + 1, stride)[None, :]
            valid = ks <= right[:, None]
            w = np.where(valid, _approx_logg(a[:, None], counts[:, None], rf, lam, ks, m[:, None]), -np.inf)
            w = np.exp(w - w.max(axis=1, keepdims=True))
            return float(((w * ks).sum(axis=1) / w.sum(axis=1)).sum())

        lo, hi = -1.0, 1.0
        while mean_sum(lo) < total:
            lo *= 2
        while mean_sum(hi) > total:
            hi *= 2
        for _ in range(40):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if mean_sum(mid) > total else (lo, mid)
        return (lo + hi) / 2

    def exact(self, cell: int, k: int, extra: Fraction = Fraction(0)) -> tuple[Fraction, Fraction]:
        """(R, x) with g_cell(k)·exp(-extra) = R·exp(-x) exactly."""
        a, m, c = int(self.alpha[cell]), int(self.mode[cell]), int(self.counts[cell])
        if k >= m:  # C(k + a - 1, k) / C(m + a - 1, m) = prod_{j=m+1}^{k} (j + a - 1) / j
            ratio = Fraction(math.perm(k + a - 1, k - m), math.perm(k, k - m))
        else:
            ratio = Fraction(math.perm(m, m - k), math.perm(m + a - 1, m - k))
        return ratio, self.r * (abs(k - c) - abs(m - c)) + self.lam * (k - m) + extra

    def logg_at(self, cell, k):
        """Float log g at k (inside the window) and its error bound; outside: a value that sends
        the decision to the exact path (the tails are rare)."""
        col = k - self.lo[cell]
        inside = (col >= 0) & (k <= self.hi[cell])
        est = np.where(inside, self.logg[cell, np.clip(col, 0, self.width - 1)], -1.0)
        err = np.where(inside, self.eta, np.inf)
        return est, err


def _geometric(rho_num: np.ndarray, rng) -> np.ndarray:
    """j >= 1 with P(j) = (1 - rho) rho^(j - 1), rho = rho_num / 2^40 per element (exact: a run of
    Bernoulli(rho) successes)."""

    j = np.ones(rho_num.size, dtype=np.int64)
    alive = np.arange(rho_num.size)
    den = np.int64(1 << _RHO_BITS)
    while alive.size:
        more = bernoulli_ratios(rho_num[alive], np.full(alive.size, den), rng)
        alive = alive[more]
        j[alive] += 1
    return j


def prior(
    counts,
    alpha,
    total: int,
    r: Fraction,
    draws: int,
    rng,
    max_proposals: int = 10**8,
    cutoff: float = None,
    what: str = "prior congenial",
):
    """Vectors summing to `total` with P(y) proportional to exp(-r ||y - c||_1) DirMult(y; total, alpha).

    The target is a product of h_i(y_i) = exp(-r |y_i - c_i|) C(y_i + a_i - 1, y_i) given the sum
    (integer concentrations a_i). Proposals: every cell but the widest from its tilted law q_i,
    the widest set to the total minus their sum and accepted with probability
    q_n(y_n) / max q_n·exp(-eta_q), which leaves exactly the target (see `_PriorLaws`). Every
    decision is exact: a cell's value is proposed from integer weights (W_i(k) >= 2^B g_i(k) on
    its window, and one weight per geometric tail envelope) by an integer uniform against their
    running sum, and kept with probability target / envelope; those and the last cell's
    acceptance are exact Bernoulli(R·exp(-x)) draws (`bernoulli_scaled_exp`), so no float
    rounding reaches the law."""
    counts = np.asarray(counts, dtype=np.int64)
    alpha = np.asarray(alpha, dtype=np.int64)
    n = len(counts)
    if n == 1:
        return np.full((draws, 1), total, dtype=np.int64), {"acceptance": 1.0, "method": "a single cell"}
    laws = _PriorLaws(counts, alpha, total, r, cutoff)
    if n * (laws.width + 2) > MAX_TABLE:
        raise MechanismError(
            f"the {what} sampler needs {n} x {laws.width + 2:,} probability tables "
            f"({n * (laws.width + 2):.3g} entries, above the limit of {MAX_TABLE:.3g})"
        )
    g = np.exp(laws.logg)
    ks = laws.lo[:, None] + np.arange(laws.width)[None, :]
    mean = (g * ks).sum(axis=1) / g.sum(axis=1)
    var = (g * ks**2).sum(axis=1) / g.sum(axis=1) - mean**2
    last = int(np.argmax(var))
    head = np.array([i for i in range(n) if i != last])
    bits = min(40, 62 - (total + 2).bit_length() - 2, 62 - (laws.width + 2).bit_length() - 8)
    scale = 2.0**bits
    inner = np.where(np.isfinite(laws.logg[head]), np.ceil(np.exp(laws.logg[head] + laws.eta) * scale) + 1, 0)
    rho_r, edge_r, has_r = (x[head] for x in laws.right)
    rho_l, edge_l, has_l = (x[head] for x in laws.left)

    def tail_weight(rho_num, edge, present):  # >= 2^B sum_j g(edge) rho^j = 2^B g(edge) rho / (1 - rho)
        rho = rho_num / 2.0**_RHO_BITS
        return np.where(present, np.ceil(scale * edge * rho / (1 - rho) * (1 + 1e-9)) + 1, 0)

    weights = np.concatenate(
        [tail_weight(rho_l, edge_l, has_l)[:, None], inner, tail_weight(rho_r, edge_r, has_r)[:, None]], axis=1
    )
    if float(weights.sum(axis=1).max()) >= 2.0**62:
        raise MechanismError("the prior sampler's integer weights would overflow")
    weights = weights.astype(np.int64)
    cum = np.cumsum(weights, axis=1)
    big = 1 << _RHO_BITS

    def head_cells(size):
        ys = np.empty((size, len(head)), dtype=np.int64)
        pending_r, pending_c = np.repeat(np.arange(size), len(head)), np.tile(np.arange(len(head)), size)
        while pending_r.size:
            u = rng.integers(0, cum[pending_c, -1], dtype=np.int64)
            sym = np.empty(pending_r.size, dtype=np.int64)
            for j in np.unique(pending_c):
                at = pending_c == j
                sym[at] = np.searchsorted(cum[j], u[at], side="right")
            cell = head[pending_c]
            lo, hi = laws.lo[cell], laws.hi[cell]
            val = lo + sym - 1
            ok = np.zeros(pending_r.size, dtype=bool)
            inside = (sym >= 1) & (sym <= laws.width)
            # inside a window: keep with probability 2^B g(k) / W(k)
            idx = np.flatnonzero(inside)
            if idx.size:
                w = weights[pending_c[idx], sym[idx]]
                est = bits * math.log(2) + laws.logg[cell[idx], sym[idx] - 1] - np.log(w.astype(float))
                ok[idx] = bernoulli_scaled_exp(
                    est,
                    laws.eta + 4 * _U * (bits + 1),
                    lambda i: _times(laws.exact(int(cell[idx[i]]), int(val[idx[i]])), Fraction(1 << bits, int(w[i]))),
                    rng,
                )
            # a tail: j from the geometric envelope, kept with probability 2^B g(k) / (W_tail P(j))
            for side, rho_of, sign, edge_of in ((0, rho_l, -1, lo), (laws.width + 1, rho_r, 1, hi)):
                idx = np.flatnonzero(sym == side)
                if not idx.size:
                    continue
                rho_num = rho_of[pending_c[idx]]
                j = _geometric(rho_num, rng)
                k = edge_of[idx] + sign * j
                val[idx] = k
                live = (k >= 0) & (k <= total)
                sub = idx[live]
                if not sub.size:
                    continue
                wt = weights[pending_c[sub], side]
                jj, rr = j[live], rho_num[live]

                def exact(i, sub=sub, wt=wt, jj=jj, rr=rr):
                    ratio, x = laws.exact(int(cell[sub[i]]), int(val[sub[i]]))
                    rho = Fraction(int(rr[i]), big)
                    return ratio * Fraction(1 << bits, int(wt[i])) / ((1 - rho) * rho ** (int(jj[i]) - 1)), x

                ok[sub] = bernoulli_scaled_exp(np.zeros(sub.size), np.full(sub.size, np.inf), exact, rng)
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
        est, err = laws.logg_at(last, rest[idx])
        ok[idx] = bernoulli_scaled_exp(
            est - float(laws.eta_q),
            err + laws.eta + 1e-15,
            lambda i: laws.exact(last, int(rest[idx[i]]), laws.eta_q),
            rng,
        )
        return ys, ok

    y, info = _rejection(propose, draws, n, max_proposals, what)
    info.update(
        method="exact rejection (integer weights, exact Bernoulli(R exp(-x)) acceptances)", tilt=float(laws.lam)
    )
    return y, info


def _times(pair, factor: Fraction):
    ratio, x = pair
    return ratio * factor, x


def grid_laplace(centre: Fraction, r: Fraction, top: int, draws: int, rng) -> np.ndarray:
    """`draws` exact draws of k in 0..top with P(k) proportional to exp(-r |k - centre|), a rational
    centre off the integers (the K-norm gradient mechanisms' law on their declared grid).

    Proposal: the integer-centred law at c0 = floor(centre) (`truncated_laplace`). With f = centre
    - c0, the target over the proposal is exp(-r f) for k <= c0 and exp(+r f) for k > c0, so the
    right side is kept and the left side kept with probability exp(-2 r f) (an exact
    `bernoulli_exp` of a rational exponent): acceptance at least about 1/2 whatever r. A centre
    beyond the grid is clamped to one step outside it, which leaves the proposal's law unchanged
    (a one-sided geometric); r = 0 is the uniform law on the grid."""
    centre, r = Fraction(centre), Fraction(r)
    if r == 0:
        return rng.integers(0, top + 1, size=draws)
    c0 = math.floor(centre)
    f = centre - c0
    c0 = min(max(c0, -1), top + 1)
    out = np.empty(draws, dtype=np.int64)
    pending = np.arange(draws)
    x = 2 * r * f
    while pending.size:
        k = truncated_laplace(np.full(pending.size, c0), 0, np.full(pending.size, top), r, rng)
        left = k <= c0
        keep = ~left
        if f and c0 <= top and left.any():  # every k on the left (c0 past the top): a constant ratio
            num = np.full(int(left.sum()), x.numerator, dtype=object if abs(x.numerator) >= 2**62 else np.int64)
            keep[left] = bernoulli_exp(num, x.denominator, rng)
        elif c0 > top or not f:
            keep[:] = True
        out[pending[keep]] = k[keep]
        pending = pending[~keep]
    return out
