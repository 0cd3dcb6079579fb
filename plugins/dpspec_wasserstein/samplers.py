"""Exact samplers for the Wasserstein exponential mechanism over count vectors (seed 2, Section 4.2).

The target is p(y) proportional to exp(-r ||y - c||_1) mu(y), r = epsilon / (2 Delta), for three
base measures mu. Every random decision goes through the project's exact integer samplers
(`discrete_laplace` with a rational scale, `bernoulli_exp`), never MCMC: the guarantee of
Theorem 9 holds only for exact draws.

- naive (counting measure on the nonnegative integers): the target is a product of discrete
  Laplace laws truncated at 0, drawn coordinatewise by rejection of negatives;
- congenial (counting measure on vectors summing to the public total C): n - 1 coordinates from
  the naive product, the last one set to C minus their sum and accepted with probability
  exp(-r |y_n - c_n|) (0 if negative), which leaves exactly the target;
- prior (Dirichlet-multinomial with integer concentrations a_i = previous counts + 1, on the same
  vectors): Polya-urn proposals (uniform bars and stars, exact) accepted with probability
  exp(-r ||y - c||_1).
Each sampler measures its acceptance rate; a pilot run estimates the cost first, and a cost
above the limit is refused with the estimate.
"""
from __future__ import annotations

from fractions import Fraction

import numpy as np

from dpspec.api import MechanismError, bernoulli_exp, discrete_laplace

PILOT = 256  # proposals of the pilot run that estimates the acceptance rate


def rate(epsilon: Fraction, sensitivity: Fraction) -> Fraction:
    """r = epsilon / (2 Delta): the exponential mechanism's rate (Theorem 9)."""
    return Fraction(epsilon) / (2 * Fraction(sensitivity))


def _accept_exp(distance: np.ndarray, r: Fraction, rng) -> np.ndarray:
    """Exact Bernoulli(exp(-r * distance)) per element (distance >= 0 integers)."""
    return bernoulli_exp(np.asarray(distance, dtype=np.int64) * r.numerator, r.denominator, rng)


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


def _congenial_proposals(counts, total, r, size, rng):
    """Proposals and their exact acceptance for the congenial sampler (see the module doc)."""
    head = truncated_laplace(np.broadcast_to(counts[:-1], (size, len(counts) - 1)), 0, None, r, rng)
    last = total - head.sum(axis=1)
    ok = last >= 0
    idx = np.flatnonzero(ok)
    ok[idx] = _accept_exp(np.abs(last[idx] - counts[-1]), r, rng)
    return np.column_stack([head, last]), ok


def _prior_proposals(alpha, total, counts, r, size, rng):
    """Dirichlet-multinomial(total, alpha) proposals for integer alpha: bars among total + A - 1
    slots chosen uniformly without replacement give a uniform composition into A parts; the parts
    grouped alpha_i at a time are the counts. Accepted with probability exp(-r ||y - c||_1)."""
    a_sum = int(alpha.sum())
    slots = total + a_sum - 1
    edges = np.cumsum(alpha)[:-1]  # the bar that closes cell i is bar number edges[i] - 1
    if a_sum > 1:
        # rows of a uniform permutation (numpy's Fisher-Yates on integers): the first A - 1 are the bars
        bars = np.sort(rng.permuted(np.broadcast_to(np.arange(slots), (size, slots)), axis=1)[:, :a_sum - 1], axis=1)
        closes = bars[:, edges - 1]
    else:
        closes = np.empty((size, 0), dtype=np.int64)
    # stars before the bar that closes cell i: its position minus the bars before it
    stars_upto = np.column_stack([np.zeros(size, dtype=np.int64), closes - (edges - 1), np.full(size, total)])
    out = np.diff(stars_upto, axis=1)
    ok = _accept_exp(np.abs(out - counts).sum(axis=1), r, rng)
    return out, ok


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
        size = int(min(max(64, 1.2 * (draws - got) / rate_est), 1 << 16))
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
    return _rejection(lambda size: _congenial_proposals(counts, total, r, size, rng), draws, len(counts),
                      max_proposals, "deterministic congenial")


def prior(counts, alpha, total: int, r: Fraction, draws: int, rng, max_proposals: int = 10**8):
    """Vectors summing to `total` with P(y) proportional to exp(-r ||y - c||_1) DirMult(y; total, alpha)."""
    counts = np.asarray(counts, dtype=np.int64)
    alpha = np.asarray(alpha, dtype=np.int64)
    return _rejection(lambda size: _prior_proposals(alpha, total, counts, r, size, rng), draws, len(counts),
                      max_proposals, "prior congenial")
