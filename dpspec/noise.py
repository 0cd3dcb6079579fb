"""The project's exact noise samplers: Bernoulli(p) and the discrete Gaussian (Canonne, Kamath &
Steinke 2020), vectorized over samples. One sampler per distribution for the whole project:
mechanisms import them from here (``dpspec.noise``), never write their own.

Why exact: a rounded continuous Gaussian, or a float comparison in an acceptance test, leaks
through the low-order bits of floating point and voids the zCDP proof. Every random decision
here is a comparison of an exact uniform integer from ``rng.integers`` against an integer
computed in exact arithmetic.

How: a discrete Laplace proposal with integer scale t = floor(sigma) + 1 is accepted with
probability exp(-(|Y| - sigma²/t)² / (2 sigma²)). Bernoulli(exp(-gamma)) for rational gamma is
drawn as CKS's Algorithm 1: the integer part of gamma as a run of Bernoulli(exp(-1)) trials,
the fractional part r/D as "K is odd", where K counts trials of Bernoulli(r/(D·k)), each of
which is Bernoulli(r/D) AND Bernoulli(1/k). All three loops run as rounds over the still
unfinished samples (masked numpy arrays), so the Python loop count is the number of rounds,
not the number of samples.

Integers stay in int64 where provably no overflow can happen; the rare proposals (and the
huge-sigma² regimes) where that is not guaranteed go through the same algorithm on Python
integers (numpy object arrays), with Bernoulli(r/D) for D >= 2**63 drawn by comparing
base-2**62 digits of a uniform real with those of r/D.

Rounding: sigma² = p/q is used exactly unless p > 2**25 and q > 1; then it is rounded UP to
the next multiple of 1/Q, Q = the largest power of two with Q·sigma² <= 2**25 (Q >= 1). The
relative increase is below 2**-24 (6e-8). More variance never weakens privacy, and
``effective_sigma2`` tells the caller the value really used, so budgets and variances are
reported for it.
"""
from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

_SMALL_P = 1 << 25  # sigma² numerators up to this are used exactly
_INT64_SAFE = (1 << 62) - 1  # int64 operands are kept below this bound
_DIGIT_BITS = 62
_CHUNK = 1 << 19  # samples drawn per batch


def as_fraction(value) -> Fraction:
    """Exact rational from an int, Fraction or decimal string (floats are read as their repr)."""
    if isinstance(value, Fraction):
        return value
    if isinstance(value, bool):
        raise TypeError("a boolean is not a variance")
    if isinstance(value, int):
        return Fraction(value)
    if isinstance(value, float):
        return Fraction(repr(value))
    return Fraction(value)


def bernoulli(p, n: int, rng: np.random.Generator) -> np.ndarray:
    """n exact Bernoulli(p) draws: a uniform integer below p's denominator compared with its numerator."""
    p = as_fraction(p)
    if not 0 <= p <= 1:
        raise ValueError(f"a probability must lie in [0, 1], got {p}")
    num, den = p.numerator, p.denominator
    if num == 0:
        return np.zeros(n, dtype=bool)
    if num == den:
        return np.ones(n, dtype=bool)
    for dtype in (np.uint8, np.uint16, np.uint32, np.uint64):
        if den - 1 <= np.iinfo(dtype).max:
            return rng.integers(0, den, size=n, dtype=dtype) < dtype(num)
    return _bern_ratio_big(np.full(n, num, dtype=object), np.full(n, den, dtype=object), rng)


def effective_sigma2(sigma2) -> Fraction:
    """The sigma² the sampler really uses: sigma² itself, or sigma² rounded up (see module doc)."""
    s2 = as_fraction(sigma2)
    if s2 <= 0:
        raise ValueError(f"sigma² must be positive, got {s2}")
    p, q = s2.numerator, s2.denominator
    if p <= _SMALL_P or q == 1:
        return s2
    big_q = 1
    while (2 * big_q) * s2 <= _SMALL_P:
        big_q *= 2
    return Fraction(-((-p * big_q) // q), big_q)


def discrete_gaussian_variance(sigma2) -> float:
    """Variance of the discrete Gaussian with parameter sigma² (a float: used only as a weight).

    It is below sigma² for small sigma² (0.37 at sigma² = 1/2) and equal to it to 1e-16 from
    sigma² of about 10 on.
    """
    s2 = float(as_fraction(sigma2))
    if s2 > 100.0:
        return s2
    bound = int(math.floor(60.0 * math.sqrt(s2))) + 2
    n = np.arange(1, bound + 1, dtype=np.float64)
    w = np.exp(-n * n / (2.0 * s2))
    return float(2.0 * np.sum(n * n * w) / (1.0 + 2.0 * np.sum(w)))


def discrete_gaussian_pmf(sigma2, support) -> np.ndarray:
    """Probabilities of the discrete Gaussian at integer points (floats; for tests and plots)."""
    return np.exp(discrete_gaussian_logpmf(sigma2, support))


def discrete_gaussian_logpmf(sigma2, support) -> np.ndarray:
    """Log-probabilities of the discrete Gaussian at integer points (floats; no underflow).

    The likelihood `dpspec infer` uses for discrete Gaussian noisy counts: log P(noise = x).
    """
    s2 = float(as_fraction(sigma2))
    bound = int(math.floor(60.0 * math.sqrt(s2))) + 2
    n = np.arange(1, bound + 1, dtype=np.float64)
    log_z = math.log(1.0 + 2.0 * float(np.sum(np.exp(-n * n / (2.0 * s2)))))
    x = np.asarray(support, dtype=np.float64)
    return -x * x / (2.0 * s2) - log_z


# --- Bernoulli primitives (each returns a boolean array; arrays are int64 or object) -------


def _bern_ratio(num, den, rng: np.random.Generator) -> np.ndarray:
    """Bernoulli(num/den) elementwise, 0 <= num <= den, den >= 1 (int or array)."""
    num = np.asarray(num)
    if num.dtype != object and (np.isscalar(den) and int(den) <= _INT64_SAFE or (
            not np.isscalar(den) and np.asarray(den).dtype != object)):
        den_arr = den if np.isscalar(den) else np.asarray(den, dtype=np.int64)
        return rng.integers(0, den_arr, size=num.shape, dtype=np.int64) < num
    return _bern_ratio_big(num.astype(object), np.broadcast_to(np.asarray(den, dtype=object), num.shape), rng)


def _bern_ratio_big(num: np.ndarray, den: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Bernoulli(num/den) for Python-int arrays: compare base-2**62 digits of U and num/den."""
    out = np.zeros(num.shape, dtype=bool)
    alive = np.arange(num.size)
    x = num.copy()
    den = np.array(den, dtype=object)
    while alive.size:
        x = x * (1 << _DIGIT_BITS)
        digit = x // den
        x = x - digit * den
        digit64 = digit.astype(np.int64)
        u = rng.integers(0, 1 << _DIGIT_BITS, size=alive.size, dtype=np.int64)
        out[alive[u < digit64]] = True
        tie = u == digit64
        alive, x, den = alive[tie], x[tie], den[tie]
    return out


def _bern_exp_fraction(num, den, rng: np.random.Generator) -> np.ndarray:
    """Bernoulli(exp(-num/den)) for 0 <= num <= den: CKS Algorithm 1, gamma in [0, 1]."""
    num = np.asarray(num)
    scalar_den = np.isscalar(den)
    den_arr = None if scalar_den else np.asarray(den)
    out = np.zeros(num.shape, dtype=bool)
    alive = np.arange(num.size)
    k = 1
    while alive.size:
        d = den if scalar_den else den_arr[alive]
        a = _bern_ratio(num[alive], d, rng)
        if k > 1:
            a &= rng.integers(0, k, size=alive.size, dtype=np.int64) == 0
        if k % 2 == 1:  # stopping now means K = k, which is odd
            out[alive[~a]] = True
        alive = alive[a]
        k += 1
    return out


_FACT_N = 20
_FACT = math.factorial(_FACT_N)  # 20! < 2**63
# A uniform U in [0, 20!) is below 20!/k! with probability exactly 1/k!, and these events are
# nested, so one draw decides the first 19 trials Bernoulli(1/2), ..., Bernoulli(1/20) of the
# K loop for gamma = 1 at once.
_FACT_THRESHOLDS = np.array([_FACT // math.factorial(k) for k in range(_FACT_N, 1, -1)], dtype=np.int64)


def _bern_exp_one(size: int, rng: np.random.Generator) -> np.ndarray:
    """Bernoulli(exp(-1)): K = the first k >= 2 whose trial Bernoulli(1/k) fails; 1 iff K is odd."""
    u = rng.integers(0, _FACT, size=size, dtype=np.int64)
    successes = _FACT_N - 1 - np.searchsorted(_FACT_THRESHOLDS, u, side="right")  # trials k = 2..
    k = successes + 2
    out = (k % 2) == 1
    rest = np.flatnonzero(successes == _FACT_N - 1)  # all 19 succeeded (u == 0): keep going
    if rest.size:
        out[rest] = _bern_exp_one_from(rest.size, _FACT_N + 1, rng)
    return out


def _bern_exp_one_from(size: int, k: int, rng: np.random.Generator) -> np.ndarray:
    """The K loop for gamma = 1 continued from trial k (all earlier trials succeeded)."""
    out = np.zeros(size, dtype=bool)
    alive = np.arange(size)
    while alive.size:
        a = rng.integers(0, k, size=alive.size, dtype=np.int64) == 0
        if k % 2 == 1:
            out[alive[~a]] = True
        alive = alive[a]
        k += 1
    return out


def _geometric_exp_one(size: int, rng: np.random.Generator) -> np.ndarray:
    """Number of Bernoulli(exp(-1)) successes before the first failure."""
    v = np.zeros(size, dtype=np.int64)
    alive = np.arange(size)
    while alive.size:
        b = _bern_exp_one(alive.size, rng)
        alive = alive[b]
        v[alive] += 1
    return v


def _bern_exp_integer(m: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Bernoulli(exp(-m)) for integers m >= 0: m Bernoulli(exp(-1)) successes in a row."""
    out = np.ones(m.shape, dtype=bool)
    left = m.astype(np.int64, copy=True)
    alive = np.flatnonzero(left > 0)
    while alive.size:
        b = _bern_exp_one(alive.size, rng)
        out[alive[~b]] = False
        alive = alive[b]
        left[alive] -= 1
        alive = alive[left[alive] > 0]
    return out


def _bern_exp_rational(num, den, rng: np.random.Generator) -> np.ndarray:
    """Bernoulli(exp(-num/den)) for num >= 0: integer part first, fraction only for survivors.

    Integer parts are capped at 2**62 - 1: surviving that many Bernoulli(exp(-1)) rounds is
    an event no execution can reach, so the cap changes no possible run.
    """
    num = np.asarray(num)
    if num.dtype == object:
        den_obj = den
        m_obj = num // den_obj
        r = num - m_obj * den_obj
        m = np.array([min(int(v), _INT64_SAFE) for v in m_obj], dtype=np.int64)
        if den <= _INT64_SAFE:
            r = r.astype(np.int64)
    else:
        m = num // den
        r = num - m * den
    out = _bern_exp_integer(m, rng)
    idx = np.flatnonzero(out)
    if idx.size:
        d = den if np.isscalar(den) or isinstance(den, int) else np.asarray(den)[idx]
        out[idx] = _bern_exp_fraction(r[idx], d, rng)
    return out


# --- distributions ----------------------------------------------------------------------------


def discrete_laplace(t: int, size: int, rng: np.random.Generator) -> np.ndarray:
    """Discrete Laplace with integer scale t: P(y) proportional to exp(-|y|/t) (CKS Algorithm 2)."""
    t = int(t)
    if t < 1:
        raise ValueError("the discrete Laplace scale must be a positive integer")
    out = np.empty(size, dtype=np.int64)
    pending = np.arange(size)
    while pending.size:
        n = pending.size
        u = rng.integers(0, t, size=n, dtype=np.int64) if t > 1 else np.zeros(n, dtype=np.int64)
        keep = _bern_exp_fraction(u, t, rng) if t > 1 else np.ones(n, dtype=bool)
        x = np.zeros(n, dtype=np.int64)
        ki = np.flatnonzero(keep)
        x[ki] = u[ki] + t * _geometric_exp_one(ki.size, rng)
        neg = rng.integers(0, 2, size=n, dtype=np.int64) == 1
        ok = keep & ~(neg & (x == 0))
        y = np.where(neg, -x, x)
        out[pending[ok]] = y[ok]
        pending = pending[~ok]
    return out


def discrete_gaussian(sigma2, size, rng: np.random.Generator) -> np.ndarray:
    """``size`` exact discrete Gaussian samples (int64) with parameter sigma² (a Fraction).

    sigma² may be rounded up first (``effective_sigma2``). Deterministic for a seeded ``rng``.
    """
    shape = (size,) if np.isscalar(size) else tuple(size)
    total = int(np.prod(shape)) if shape else 1
    s2 = effective_sigma2(sigma2)
    p, q = s2.numerator, s2.denominator
    t = math.isqrt(p // q) + 1
    qt = q * t
    den = 2 * p * q * t * t  # gamma = (|Y|·q·t - p)² / den
    a_max = math.isqrt(_INT64_SAFE)
    # |Y| up to y_fast keeps a = |Y|·q·t - p and a² inside int64.
    y_fast = (a_max - p) // qt if den <= _INT64_SAFE and p <= a_max else -1
    out = np.empty(total, dtype=np.int64)
    # fixed-size chunks bound the temporaries; the chunking is part of the deterministic stream
    for start in range(0, total, _CHUNK):
        stop = min(total, start + _CHUNK)
        out[start:stop] = _gaussian_chunk(stop - start, p, t, qt, den, y_fast, rng)
    return out.reshape(shape)


def _gaussian_chunk(n, p, t, qt, den, y_fast, rng) -> np.ndarray:
    """CKS Algorithm 3 on n samples: discrete Laplace proposals, exact Gaussian acceptance."""
    out = np.empty(n, dtype=np.int64)
    pending = np.arange(n)
    while pending.size:
        y = discrete_laplace(t, pending.size, rng)
        ay = np.abs(y)
        accept = np.zeros(pending.size, dtype=bool)
        fast = ay <= y_fast
        fi = np.flatnonzero(fast)
        if fi.size:
            a = ay[fi] * qt - p
            accept[fi] = _bern_exp_rational(a * a, den, rng)
        si = np.flatnonzero(~fast)
        if si.size:
            a = ay[si].astype(object) * qt - p
            accept[si] = _bern_exp_rational(a * a, den, rng)
        out[pending[accept]] = y[accept]
        pending = pending[~accept]
    return out
