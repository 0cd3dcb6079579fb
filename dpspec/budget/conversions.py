"""Conversions between premetrics, each returned with the method and the result it cites.

The same mechanism has different budgets under different conversions (rho = 15.29 is
eps = 52.82 by Bun-Steinke and 51.56 by Canonne-Kamath-Steinke at delta = 1e-10), so no figure
leaves this module without the name of the rule that produced it. Conversions that do not exist
(approximate to pure, anything to pure) raise `ConversionError` saying why.

Numerics: budgets are exact (`Fraction`). Rational rules (eps²/2, alpha·rho) are computed exactly;
irrational ones (a logarithm, an exponential, a square root) are evaluated in outward-rounded
interval arithmetic (dpspec.budget.exact) and the figure stated is a certified bound on the safe
side: an epsilon or a delta at or above the true value, never below it. CKS20's optimum is found
by bisection in floating point and then certified: the optimum's order alpha is fixed as an exact
rational and the delta bound it gives (every alpha gives a valid bound) is checked in interval
arithmetic, the float epsilon being raised until the check passes. Gaussian DP's profile needs the
normal CDF (scipy), which has no interval form here: its figures are raised by a relative 1e-13
margin above scipy's value, which bounds scipy's error in practice but is not a proof. Plain
Python otherwise: `dpspec check` loads no scipy.
"""

from __future__ import annotations

import math
from contextlib import contextmanager
from fractions import Fraction

import attrs

from dpspec.errors import ConversionError
from dpspec.lazy import LazyModule

from .exact import INF, iv, upper
from .premetrics import (
    ApproxDP,
    Budget,
    GaussianDP,
    PureDP,
    RenyiCurve,
    RenyiDP,
    ZCDP,
    exact_companions,
    json_number,
    normalize_kind,
    to_exact,
)
from .premetrics import budget_from_params

# heavy libraries, imported on first use
_special = LazyModule("scipy.special", "_special", globals())

CITATIONS = {
    "pure-zcdp": "Bun & Steinke (2016), Concentrated Differential Privacy: Simplifications, "
    "Extensions, and Lower Bounds, Proposition 1.4",
    "bs16": "Bun & Steinke (2016), Concentrated Differential Privacy: Simplifications, "
    "Extensions, and Lower Bounds, Proposition 1.3",
    "cks20": "Canonne, Kamath & Steinke (2020), The Discrete Gaussian for Differential Privacy, "
    "Proposition 12 and Corollary 13 (the conversion OpenDP's make_zCDP_to_approxDP uses)",
    "mironov17": "Mironov (2017), Rényi Differential Privacy, Proposition 3",
    "cks20-renyi": "Canonne, Kamath & Steinke (2020), Proposition 12; Balle, Barthe, Gaboardi, "
    "Hsu & Sato (2020), Hypothesis Testing Interpretations and Renyi Differential Privacy, "
    "Theorem 21",
    "zcdp-renyi": "Bun & Steinke (2016), Definition 1.1 (zCDP bounds the Rényi divergence of "
    "order alpha by alpha * rho)",
    "renyi-monotone": "van Erven & Harremoës (2014), Rényi Divergence and Kullback-Leibler "
    "Divergence, Theorem 3 (Rényi divergence is nondecreasing in its order)",
    "pure-renyi": "Bun & Steinke (2016), Proposition 1.4, and D_alpha <= D_infinity = epsilon",
    "pure-approx": "Dwork & Roth (2014), The Algorithmic Foundations of Differential Privacy, "
    "Definition 2.4 (pure DP is (epsilon, 0)-DP); below epsilon: Kairouz, Oh & Viswanath "
    "(2015), The Composition Theorem for Differential Privacy (the privacy region of "
    "epsilon-DP is that of randomized response)",
    "approx-weaken": "Dwork & Roth (2014), Definition 2.4 ((epsilon, delta)-DP implies "
    "(epsilon', delta') for every epsilon' >= epsilon, delta' >= delta)",
    "drs22": "Dong, Roth & Su (2022), Gaussian Differential Privacy, JRSS-B, Corollary 2.13 "
    "(mu-GDP holds iff (epsilon, delta(epsilon))-DP holds for every epsilon)",
    "gdp-zcdp": "Dong, Roth & Su (2022), Gaussian Differential Privacy (mu-GDP is dominated by "
    "the pair N(0,1), N(mu,1), whose Rényi divergence of order alpha is alpha * mu^2 / 2)",
    "identity": "",
}

# The conversions' short names in plain words, for readers of the public report.
METHOD_WORDS = {
    "pure-zcdp": "pure epsilon to zCDP rho (rho = epsilon²/2)",
    "pure-approx": "pure epsilon read as (epsilon, delta) with delta = 0",
    "pure-renyi": "pure epsilon bounds Rényi DP of every order",
    "bs16": "zCDP rho to (epsilon, delta) by Bun & Steinke 2016 (epsilon = rho + 2·sqrt(rho·ln(1/delta)))",
    "cks20": "zCDP rho to (epsilon, delta) by the tighter bound of Canonne, Kamath & Steinke 2020",
    "mironov17": "Rényi DP to (epsilon, delta) by Mironov 2017",
    "cks20-renyi": "Rényi DP to (epsilon, delta) by Canonne, Kamath & Steinke 2020",
    "zcdp-renyi": "zCDP rho to Rényi DP of one order (alpha·rho)",
    "renyi-monotone": "Rényi DP of a higher order covers lower orders",
    "approx-weaken": "an (epsilon, delta) guarantee also holds for any larger epsilon or delta",
    "drs22": "Gaussian DP mu to (epsilon, delta) by Dong, Roth & Su 2022",
    "gdp-zcdp": "Gaussian DP mu to zCDP rho (mu²/2)",
    "symdiff-to-hamming": "add/remove-one to change-one neighbours (one change is a removal and an addition)",
    "identity": "no conversion",
}


def method_words(method: str) -> str:
    """A ledger's method name ('pure-zcdp, then bs16', 'group-6') in plain words; unknown parts as they are."""
    parts = []
    for part in method.replace(", then ", " then ").split(" then "):
        part = part.strip()
        if part.startswith("group-") and part[6:].isdigit():
            parts.append(f"group privacy: one unit holds up to {part[6:]} of the mechanism's units")
        else:
            parts.append(METHOD_WORDS.get(part, part))
    return "; then ".join(parts)


APPROX_METHODS = ("cks20", "bs16")
RENYI_METHODS = ("cks20", "mironov17")


@attrs.frozen
class Conversion:
    """One conversion: what went in, what came out, by which rule.

    exact: the result is a closed form evaluated in floating point (False: a numerical
    optimum or root, accurate to about 1e-15 relative).
    lossless: the result is equivalent to the source (False: it is only implied by it).
    steps: the single conversions of a chain, in order (empty for a single step).
    """

    source: Budget
    result: Budget
    method: str
    citation: str
    exact: bool
    lossless: bool = False
    steps: tuple["Conversion", ...] = ()
    note: str = ""

    def to_json(self) -> dict:
        out = {
            "source": self.source.to_json(),
            "result": self.result.to_json(),
            "method": self.method,
            "citation": self.citation,
            "exact": self.exact,
            "lossless": self.lossless,
        }
        if self.note:
            out["note"] = self.note
        if self.steps:
            out["steps"] = [s.to_json() for s in self.steps]
        return out

    def __str__(self) -> str:
        return f"{self.source} -> {self.result} [{self.method}]"


def identity(budget: Budget, note: str = "") -> Conversion:
    """The no-op conversion, so callers can always hold a Conversion."""
    return Conversion(budget, budget, "identity", "", exact=True, lossless=True, note=note)


def chain(*steps: Conversion) -> Conversion:
    """Compose conversions applied one after another into one record naming every step."""
    real = [s for s in steps if s.method != "identity"]
    if not real:
        return steps[0] if steps else None
    if len(real) == 1:
        return real[0]
    flat = []
    for s in real:
        flat.extend(s.steps or (s,))
    return Conversion(
        source=real[0].source,
        result=real[-1].result,
        method=" then ".join(s.method for s in flat),
        citation="; ".join(dict.fromkeys(s.citation for s in flat if s.citation)),
        exact=all(s.exact for s in flat),
        lossless=all(s.lossless for s in flat),
        steps=tuple(flat),
        note=" ".join(s.note for s in flat if s.note),
    )


# ---- zCDP -> (epsilon, delta) --------------------------------------------------------------


def _log_delta_arg(delta):
    d = to_exact(delta, "delta")
    if not 0 <= d <= 1:
        raise ConversionError(f"delta must be in [0, 1], got {float(d)!r}")
    return d


def _nonneg_arg(value, name):
    out = to_exact(value, name)
    if out < 0:
        raise ConversionError(f"{name} must be at least 0")
    return out


def bs16_epsilon(rho, delta):
    """eps = rho + 2 sqrt(rho ln(1/delta)) (the Census Bureau's published figures use it), as a
    certified upper bound (an exact Fraction at or above the true value)."""
    rho, delta = _nonneg_arg(rho, "rho"), _log_delta_arg(delta)
    if rho == 0 or delta >= 1:
        return Fraction(0) if delta >= 1 else rho
    if delta == 0 or math.isinf(rho):
        return INF
    r = iv(rho)
    return (r + 2 * (r * -iv(delta).ln()).sqrt()).upper()


def bs16_delta(rho, epsilon):
    """The inverse of `bs16_epsilon`: delta = exp(-(eps - rho)^2 / (4 rho)) for eps >= rho, as
    a certified upper bound."""
    rho, eps = _nonneg_arg(rho, "rho"), _nonneg_arg(epsilon, "epsilon")
    if rho == 0:
        return Fraction(0)
    if math.isinf(rho) or eps <= rho:
        return Fraction(1)
    if math.isinf(eps):
        return Fraction(0)
    gap = iv(eps - rho)
    return min(Fraction(1), (-(gap * gap) / (4 * iv(rho))).exp().upper())


def _cks20_s_star(rho: float, eps: float) -> float:
    """The optimal order alpha = 1 + e^s of CKS20's objective at (rho, eps), in floating point.

    The objective is strictly convex in alpha (its derivative (2 alpha - 1) rho - eps +
    ln(1 - 1/alpha) is increasing), so the minimum is the root of that derivative; finding the
    root (with alpha = 1 + e^s, so alpha near 1 stays representable) is accurate to machine
    precision where a direct minimization would only locate alpha to sqrt(machine eps). Any
    alpha gives a valid bound, so an inaccurate s costs tightness only."""

    def slope(s: float) -> float:  # d/d alpha of the objective, at alpha = 1 + e^s
        return (1.0 + 2.0 * math.exp(s)) * rho - eps + s - math.log1p(math.exp(s))

    # slope < -10 at s_lo and > 0 at s_hi (alpha >= 2 there); both are clipped so that e^s stays
    # finite and nonzero. Clipping can only cost tightness: every alpha gives a valid bound.
    s_lo = max(-700.0, min(0.0, eps - 3.0 * rho - 10.0))
    s_hi = min(700.0, max(0.0, math.log((eps + 1.0) / 2.0) - math.log(rho)))
    if slope(s_hi) <= 0:
        return s_hi
    if slope(s_lo) >= 0:
        return s_lo
    # the slope increases with s (its derivative is 2 rho e^s + 1/(1+e^s) > 0): bisect
    return _root_of_increasing(slope, s_lo, s_hi)


def _cks20_log_delta_float(rho: float, eps: float) -> float:
    """CKS20's log delta in floating point (the search for epsilon runs on it)."""
    if rho == 0 or math.isinf(eps):
        return -math.inf
    if math.isinf(rho):
        return 0.0
    s_star = _cks20_s_star(rho, eps)
    t = math.exp(s_star)
    value = t * ((1.0 + t) * rho - eps) + (1.0 + t) * (s_star - math.log1p(t)) - s_star
    return min(0.0, value)


def _cks20_log_delta_interval(rho: Fraction, eps: Fraction):
    """An enclosure of CKS20's objective at the float optimum's order, fixed as an exact alpha:
    (alpha - 1)(alpha rho - eps) + alpha ln(1 - 1/alpha) - ln(alpha - 1), with t = alpha - 1,
    is t((1 + t) rho - eps) + (1 + t)(ln t - ln(1 + t)) - ln t. An upper end is a valid log delta."""
    t = Fraction(math.exp(_cks20_s_star(float(rho), float(eps))))
    ti, t1, ln_t = iv(t), iv(1 + t), iv(t).ln()
    return ti * (t1 * iv(rho) - iv(eps)) + t1 * (ln_t - t1.ln()) - ln_t


def cks20_log_delta(rho, epsilon) -> float:
    """log of the CKS20 delta for rho-zCDP at eps: inf over alpha > 1 of

        (alpha - 1)(alpha rho - eps) + alpha ln(1 - 1/alpha) - ln(alpha - 1),

    in floating point (for plots and searches; `cks20_delta` states the certified bound)."""
    rho, eps = to_exact(rho, "rho"), to_exact(epsilon, "epsilon")
    if rho < 0 or eps < 0:
        raise ConversionError("rho and epsilon must be at least 0")
    return _cks20_log_delta_float(float(rho), float(eps))


def _root_of_increasing(f, lo: float, hi: float, rtol: float = 1e-15) -> float:
    """The root of an increasing f with f(lo) < 0 <= f(hi), by bisection to rtol relative (or to
    the last representable step): plain Python, so the conversions `dpspec check` makes (a
    program's ledger) load no scipy. Returns the upper end, where f >= 0: for an inverted delta
    that is the side whose bound holds."""
    while hi - lo > rtol * abs(hi):
        mid = 0.5 * (lo + hi)
        if mid in (lo, hi):
            break
        if f(mid) < 0:
            lo = mid
        else:
            hi = mid
    return hi


def cks20_delta(rho, epsilon):
    """delta at eps for rho-zCDP by CKS20 Corollary 13 (at most 1), as a certified upper bound."""
    rho, eps = _nonneg_arg(rho, "rho"), _nonneg_arg(epsilon, "epsilon")
    if rho == 0 or math.isinf(eps):
        return Fraction(0)
    if math.isinf(rho):
        return Fraction(1)
    log_d = _cks20_log_delta_interval(rho, eps).min0()
    return min(Fraction(1), log_d.exp().upper())


def _invert_log_delta(log_delta_at, delta: float, start: float) -> float:
    """Smallest eps >= 0 with log_delta_at(eps) <= ln(delta), for a nonincreasing log_delta_at."""
    target = math.log(delta)
    if log_delta_at(0.0) <= target:
        return 0.0
    hi = max(start, 1.0)
    if not math.isfinite(hi):
        raise OverflowError("the search for epsilon starts beyond the largest float")
    while log_delta_at(hi) > target:
        if hi > 1e307:
            return math.inf
        hi *= 2.0
    return _root_of_increasing(lambda e: target - log_delta_at(e), 0.0, hi)


def _raise_until(candidate: float, holds, ceiling):
    """The first of candidate, candidate + 1, 2, 4, ... ulps (as exact Fractions) for which
    `holds` is proven, or `ceiling` (a certified figure known to hold) if that comes first."""
    if not math.isfinite(candidate):
        return ceiling
    step = math.ulp(candidate) if candidate > 0 else math.ulp(1.0)
    value = Fraction(candidate)
    for i in range(80):
        if value >= ceiling:
            return ceiling
        if holds(value):
            return value
        value = upper(Fraction(candidate) + Fraction(step) * 2**i)
    return ceiling


def cks20_epsilon(rho, delta):
    """eps at delta for rho-zCDP by CKS20 Corollary 13, as a certified upper bound: bisection on
    the monotone delta(eps) in floating point, then the found eps is raised until interval
    arithmetic proves CKS20's delta at it is at most delta."""
    rho, delta = _nonneg_arg(rho, "rho"), _log_delta_arg(delta)
    if delta >= 1 or rho == 0:
        return Fraction(0)
    if delta == 0 or math.isinf(rho):
        return INF
    loose = bs16_epsilon(rho, delta)
    # CKS20 is never looser than BS16 in exact arithmetic; where rounding in delta(eps) would make
    # the inverted figure larger (eps far below 1e-15), the BS16 figure is the valid, smaller one.
    rho_f, delta_f = float(rho), float(delta)
    if delta_f == 0:  # a delta below the smallest float: the float search cannot run
        return loose
    found = _invert_log_delta(lambda e: _cks20_log_delta_float(rho_f, e), delta_f, float(loose))
    target = iv(delta).ln().lo

    def holds(eps: Fraction) -> bool:
        return _cks20_log_delta_interval(rho, eps).hi <= target

    return _raise_until(found, holds, loose)


def _check_method(method: str, allowed: tuple[str, ...]) -> str:
    m = str(method).strip().lower()
    if m not in allowed:
        raise ConversionError(f"unknown conversion method {method!r}; expected one of {', '.join(allowed)}")
    return m


def _need_one(delta, epsilon, what: str):
    if (delta is None) == (epsilon is None):
        raise ConversionError(
            f"converting {what} to (epsilon, delta) needs exactly one of delta (to get epsilon) "
            "or epsilon (to get delta)"
        )


def zcdp_to_approx(b: ZCDP, *, delta=None, epsilon=None, method: str = "cks20") -> Conversion:
    """rho-zCDP to (eps, delta): give delta to get eps, or eps to get delta."""
    m = _check_method(method, APPROX_METHODS)
    _need_one(delta, epsilon, "zCDP")
    if delta is not None:
        d = _log_delta_arg(delta)
        eps = bs16_epsilon(b.rho, d) if m == "bs16" else cks20_epsilon(b.rho, d)
        result = ApproxDP(eps, d)
    else:
        eps = to_exact(epsilon, "epsilon")
        d = bs16_delta(b.rho, eps) if m == "bs16" else cks20_delta(b.rho, eps)
        result = ApproxDP(eps, d)
    return Conversion(b, result, m, CITATIONS[m], exact=(m == "bs16"))


def pure_to_zcdp(b: PureDP) -> Conversion:
    """eps-DP implies (eps^2/2)-zCDP."""
    return Conversion(b, ZCDP(b.epsilon**2 / 2), "pure-zcdp", CITATIONS["pure-zcdp"], exact=True)


def pure_to_approx(b: PureDP, *, delta=None, epsilon=None) -> Conversion:
    """eps-DP is (eps, 0)-DP; at a smaller eps' it is (eps', (e^eps - e^eps')/(1 + e^eps))-DP."""
    if epsilon is None:
        # (eps, 0) implies (eps, delta) for any requested delta; state the stronger one.
        return Conversion(b, ApproxDP(b.epsilon, 0), "pure-approx", CITATIONS["pure-approx"], exact=True, lossless=True)
    e2 = to_exact(epsilon, "epsilon")
    if e2 >= b.epsilon:
        d = Fraction(0)
    elif math.isinf(b.epsilon):
        d = Fraction(1)
    else:  # (1 - e^(eps' - eps)) / (1 + e^-eps), certified from above
        d = min(Fraction(1), ((1 - iv(e2 - b.epsilon).exp()) / (1 + iv(-b.epsilon).exp())).upper())
    return Conversion(b, ApproxDP(e2, d), "pure-approx", CITATIONS["pure-approx"], exact=True)


def pure_to_renyi(b: PureDP, alpha) -> Conversion:
    """eps-DP bounds D_alpha by min(eps, alpha eps^2 / 2)."""
    result = _renyi_at(alpha, lambda a: min(b.epsilon, a * b.epsilon**2 / 2))
    return Conversion(b, result, "pure-renyi", CITATIONS["pure-renyi"], exact=True)


def _renyi_at(alpha, eps_of_alpha) -> Budget:
    if isinstance(alpha, (list, tuple)):
        return RenyiCurve(tuple((a, eps_of_alpha(to_exact(a, "alpha"))) for a in alpha))
    a = to_exact(alpha, "alpha")
    return RenyiDP(a, eps_of_alpha(a))


def zcdp_to_renyi(b: ZCDP, alpha) -> Conversion:
    """rho-zCDP is (alpha, alpha rho)-RDP for every alpha > 1 (a list of alphas gives a curve)."""
    return Conversion(b, _renyi_at(alpha, lambda a: a * b.rho), "zcdp-renyi", CITATIONS["zcdp-renyi"], exact=True)


# ---- Rényi -> (epsilon, delta) -------------------------------------------------------------


def renyi_epsilon(alpha, tau, delta, method: str = "cks20"):
    """eps at delta from D_alpha <= tau: Mironov's eps = tau + ln(1/delta)/(alpha - 1), or the
    improved tau + ln(1 - 1/alpha) - (ln delta + ln alpha)/(alpha - 1) (never larger); a
    certified upper bound."""
    alpha, tau, delta = to_exact(alpha, "alpha"), to_exact(tau, "epsilon"), _log_delta_arg(delta)
    if delta >= 1:
        return Fraction(0)
    if math.isinf(alpha):
        return tau
    if delta == 0 or math.isinf(tau):
        return INF
    a, am1, ln_d = iv(alpha), iv(alpha - 1), iv(delta).ln()
    if method == "mironov17":
        eps = iv(tau) - ln_d / am1
    else:
        eps = iv(tau) + iv((alpha - 1) / alpha).ln() - (ln_d + a.ln()) / am1
    return max(Fraction(0), eps.upper())


def renyi_delta(alpha, tau, epsilon, method: str = "cks20"):
    """delta at eps from D_alpha <= tau (the inverse of `renyi_epsilon`, at most 1), a certified
    upper bound."""
    alpha, tau, eps = to_exact(alpha, "alpha"), to_exact(tau, "epsilon"), to_exact(epsilon, "epsilon")
    if math.isinf(alpha):
        return Fraction(0) if eps >= tau else Fraction(1)
    if math.isinf(tau):
        return Fraction(1)
    if math.isinf(eps):
        return Fraction(0)
    a, am1 = iv(alpha), iv(alpha - 1)
    if method == "mironov17":
        log_d = -am1 * iv(eps - tau)
    else:
        log_d = am1 * iv(tau - eps) + a * iv((alpha - 1) / alpha).ln() - am1.ln()
    return min(Fraction(1), log_d.min0().exp().upper())


def renyi_to_approx(b: RenyiDP | RenyiCurve, *, delta=None, epsilon=None, method: str = "cks20") -> Conversion:
    """(alpha, eps)-RDP (or a curve: the best point) to (eps', delta)."""
    m = "mironov17" if str(method).lower() in ("bs16", "mironov17") else _check_method(method, RENYI_METHODS)
    _need_one(delta, epsilon, "Rényi DP")
    points = b.points
    if delta is not None:
        d = _log_delta_arg(delta)
        eps, best = min((renyi_epsilon(a, t, d, m), a) for a, t in points)
        result = ApproxDP(eps, d)
    else:
        e = to_exact(epsilon, "epsilon")
        d, best = min((renyi_delta(a, t, e, m), a) for a, t in points)
        result = ApproxDP(e, d)
    note = f"best order alpha = {float(best):g} of {len(points)}" if len(points) > 1 else ""
    cite = CITATIONS["mironov17" if m == "mironov17" else "cks20-renyi"]
    return Conversion(b, result, m, cite, exact=True, note=note)


def renyi_to_renyi(b: RenyiDP | RenyiCurve, alpha) -> Conversion:
    """D_alpha is nondecreasing in alpha: a bound at order a holds at every order below a."""

    def at(a: float) -> float:
        above = [t for a0, t in b.points if a0 >= a]
        if not above:
            raise ConversionError(
                f"a Rényi bound at order {float(max(a0 for a0, _ in b.points)):g} says nothing about the "
                f"larger order {float(a):g} (Rényi divergence grows with its order)"
            )
        return min(above)

    result = _renyi_at(alpha, at)
    if result == b:
        return identity(b)
    return Conversion(b, result, "renyi-monotone", CITATIONS["renyi-monotone"], exact=True)


# ---- Gaussian DP ---------------------------------------------------------------------------


def gdp_log_delta(mu: float, epsilon: float) -> float:
    """log of delta(eps) = Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2), in log space so
    that tiny deltas keep their relative precision."""
    mu, eps = float(mu), float(epsilon)
    if mu == 0 or math.isinf(eps):
        return -math.inf
    if math.isinf(mu):
        return 0.0

    a = float(_special.log_ndtr(-eps / mu + mu / 2.0))
    b = eps + float(_special.log_ndtr(-eps / mu - mu / 2.0))
    if b >= a:
        return -math.inf
    return min(0.0, a + math.log(-math.expm1(b - a)))


GDP_MARGIN = Fraction(1, 10**13)  # scipy's normal CDF has no interval form here: a relative margin


def _raised(value: float, cap=None):
    """A float figure from scipy raised by GDP_MARGIN (relative) and rounded up, as a Fraction."""
    if math.isinf(value):
        return INF
    out = upper(Fraction(value) * (1 + GDP_MARGIN))
    return out if cap is None else min(cap, out)


def gdp_delta(mu, epsilon):
    """delta at eps for mu-GDP (Dong, Roth & Su, Corollary 2.13): scipy's value, raised by a
    relative 1e-13 (not a proof: the normal CDF is not evaluated in interval arithmetic)."""
    return _raised(math.exp(gdp_log_delta(mu, epsilon)), Fraction(1))


def gdp_epsilon(mu, delta):
    """eps at delta for mu-GDP: root of the decreasing delta(eps), raised by a relative 1e-13
    (see gdp_delta)."""
    mu, delta = float(mu), float(_log_delta_arg(delta))
    if delta >= 1 or mu == 0:
        return Fraction(0)
    if delta == 0 or math.isinf(mu):
        return INF
    return _raised(
        _invert_log_delta(lambda e: gdp_log_delta(mu, e), delta, mu * mu / 2 + mu * math.sqrt(-2 * math.log(delta)))
    )


def gdp_to_approx(b: GaussianDP, *, delta=None, epsilon=None) -> Conversion:
    """mu-GDP to one (eps, delta) point of its exact privacy profile."""
    _need_one(delta, epsilon, "Gaussian DP")
    if delta is not None:
        d = _log_delta_arg(delta)
        return Conversion(b, ApproxDP(gdp_epsilon(b.mu, d), d), "drs22", CITATIONS["drs22"], exact=False)
    e = to_exact(epsilon, "epsilon")
    return Conversion(b, ApproxDP(e, gdp_delta(b.mu, e)), "drs22", CITATIONS["drs22"], exact=True)


def gdp_to_zcdp(b: GaussianDP) -> Conversion:
    """mu-GDP implies (mu^2/2)-zCDP."""
    return Conversion(b, ZCDP(b.mu**2 / 2), "gdp-zcdp", CITATIONS["gdp-zcdp"], exact=True)


# ---- approximate DP ------------------------------------------------------------------------


def approx_to_approx(b: ApproxDP, *, delta=None, epsilon=None) -> Conversion:
    """(eps, delta) restated at a larger delta or a larger eps (weakening only)."""
    if delta is None and epsilon is None:
        return identity(b)
    e = b.epsilon if epsilon is None else to_exact(epsilon, "epsilon")
    d = b.delta if delta is None else _log_delta_arg(delta)
    if e < b.epsilon or d < b.delta:
        raise ConversionError(
            f"{b} does not imply (epsilon = {float(e):g}, delta = {float(d):g}): an (epsilon, delta) guarantee "
            "alone cannot be restated with a smaller epsilon or delta (the mechanism's full "
            "privacy profile would be needed)"
        )
    if (e, d) == (b.epsilon, b.delta):
        return identity(b)
    return Conversion(b, ApproxDP(e, d), "approx-weaken", CITATIONS["approx-weaken"], exact=True)


# ---- dispatch ------------------------------------------------------------------------------

_NO_PURE = {
    "approx": "(epsilon, delta)-DP allows any output with probability delta, which no finite pure epsilon bounds",
    "zcdp": "zCDP bounds Rényi divergences of finite order only; a Gaussian-noise mechanism is "
    "zCDP but its output likelihood ratio is unbounded",
    "renyi": "a Rényi bound at finite orders does not bound the max log-ratio (order infinity)",
    "gdp": "mu-GDP for mu > 0 allows an unbounded likelihood ratio (the Gaussian trade-off)",
}

_NOT_IMPLIED = {
    ("approx", "zcdp"): "(epsilon, delta)-DP with delta > 0 allows a catastrophic event of "
    "probability delta, under which every Rényi divergence is infinite",
    ("approx", "renyi"): "(epsilon, delta)-DP with delta > 0 allows a catastrophic event of "
    "probability delta, under which every Rényi divergence is infinite",
    ("approx", "gdp"): "a single (epsilon, delta) point does not determine a Gaussian trade-off "
    "function (delta > 0 allows a catastrophic event)",
    ("zcdp", "gdp"): "zCDP bounds Rényi divergences only, which do not determine the trade-off "
    "function that Gaussian DP bounds",
    ("renyi", "zcdp"): "zCDP needs a bound at every order alpha > 1; a Rényi bound at finitely "
    "many orders does not give one",
    ("renyi", "gdp"): "Rényi bounds do not determine the trade-off function that Gaussian DP bounds",
    ("pure", "gdp"): "eps-DP does imply some mu-GDP, but dpspec has no exact rule for it; "
    "convert to zcdp or approx instead",
}


def convert(budget: Budget, to: str, *, delta=None, epsilon=None, alpha=None, method: str = "cks20") -> Conversion:
    """Convert a budget to premetric `to` ('pure', 'approx', 'zcdp', 'renyi', 'gdp').

    approx targets need delta (to get eps) or epsilon (to get delta); renyi targets need alpha.
    `method` chooses between the zCDP/Rényi -> approx bounds ('cks20', 'bs16'; 'mironov17' for
    Rényi) and is ignored where one exact rule exists."""
    with beyond_floats(budget):
        return _convert(budget, to, delta=delta, epsilon=epsilon, alpha=alpha, method=method)


@contextmanager
def beyond_floats(budget):
    """Budgets so large that a conversion overflows floating point (or its root finder cannot
    converge) are a user's error to fix, not a crash: they protect nothing anyway."""
    try:
        yield
    except (OverflowError, FloatingPointError, RuntimeError) as exc:
        raise ConversionError(
            f"converting this {getattr(budget, 'kind', '')} budget overflows floating point ({exc}); "
            "a budget this large protects nothing: check the figures"
        ) from None


def _convert(budget: Budget, to: str, *, delta=None, epsilon=None, alpha=None, method: str = "cks20") -> Conversion:

    budget = budget_from_params(budget)
    src, dst = budget.kind, normalize_kind(to)
    if dst == "approx" and src != "approx" and delta is not None and epsilon is not None:
        raise ConversionError("give delta (to get epsilon) or epsilon (to get delta), not both")
    if src == dst and src != "renyi" and src != "approx":
        return identity(budget)
    if dst == "pure" and src == "renyi" and math.isinf(budget.points[-1][0]):
        # A bound at order infinity is a bound on the max log-ratio: pure DP itself.
        return Conversion(
            budget,
            PureDP(budget.points[-1][1]),
            "renyi-infinity",
            "Mironov (2017), Rényi Differential Privacy, Section 3 (order infinity is pure DP)",
            exact=True,
        )
    if dst == "pure":
        raise ConversionError(f"the conversion {src} -> pure does not exist: {_NO_PURE[src]}")
    if (src, dst) in _NOT_IMPLIED:
        raise ConversionError(f"the conversion {src} -> {dst} does not exist: {_NOT_IMPLIED[src, dst]}")
    if dst == "renyi" and alpha is None:
        if src == "renyi":
            return identity(budget)
        raise ConversionError(f"converting {src} to Rényi DP needs the order alpha")
    if dst == "approx" and src not in ("approx", "pure") and delta is None and epsilon is None:
        raise ConversionError(
            f"converting {src} to (epsilon, delta) needs delta (to get epsilon) or epsilon (to get delta)"
        )

    if src == "pure":
        if dst == "zcdp":
            return pure_to_zcdp(budget)
        if dst == "approx":
            return pure_to_approx(budget, epsilon=epsilon)
        if dst == "renyi":
            return pure_to_renyi(budget, alpha)
    if src == "approx":
        return approx_to_approx(budget, delta=delta, epsilon=epsilon)
    if src == "zcdp":
        if dst == "approx":
            return zcdp_to_approx(budget, delta=delta, epsilon=epsilon, method=method)
        if dst == "renyi":
            return zcdp_to_renyi(budget, alpha)
    if src == "renyi":
        if dst == "approx":
            return renyi_to_approx(budget, delta=delta, epsilon=epsilon, method=method)
        if dst == "renyi":
            return renyi_to_renyi(budget, alpha)
    if src == "gdp":
        if dst == "approx":
            return gdp_to_approx(budget, delta=delta, epsilon=epsilon)
        if dst == "zcdp":
            return gdp_to_zcdp(budget)
        if dst == "renyi":
            step = gdp_to_zcdp(budget)
            return chain(step, zcdp_to_renyi(step.result, alpha))
    raise ConversionError(f"the conversion {src} -> {dst} does not exist")  # pragma: no cover


def conversion_json(c: Conversion) -> dict:
    """Flat JSON of a conversion's result: its parameters, premetric, method and citation."""
    out = {
        k: (json_number(v) if not isinstance(v, list) else [json_number(x) for x in v])
        for k, v in c.result.params().items()
    }
    out.update(exact_companions(c.result.params()))
    out.update({"premetric": c.result.kind, "method": c.method, "citation": c.citation})
    return out
