"""The project's exact noise samplers: Bernoulli(p) and the discrete Gaussian (Canonne, Kamath &
Steinke 2020), vectorized over samples. One sampler per distribution for the whole project:
mechanisms import them from here (``dpspec.run.noise``), never write their own.

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

Fast path: for sigma² up to about 5e5 (every TopDown query) the discrete Gaussian is drawn from
an exact integer alias table with rejection, one 64-bit word per sample (see the section at the
end); CKS's algorithm below serves larger sigma² and the table's rare exact sub-steps.

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
from decimal import ROUND_CEILING, ROUND_FLOOR, ROUND_HALF_EVEN, Decimal, localcontext
from fractions import Fraction

import attrs

from dpspec.lazy import LazyModule
from dpspec.errors import MechanismError
from dpspec.ir import format_number

np = LazyModule("numpy", "np", globals())  # the samplers need it; budget arithmetic (effective_sigma2) does not

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


def bernoulli_ratios(num, den, rng: np.random.Generator) -> np.ndarray:
    """Exact Bernoulli(num[i] / den[i]) draws, one per element, for integer arrays (int64 or
    Python ints of any size, 0 <= num <= den, den >= 1): `bernoulli` when each draw has its own
    probability, by the same digit comparison."""
    num = np.asarray(num)
    den = np.asarray(den)
    if num.shape != den.shape:
        raise ValueError("num and den must have the same shape")
    if num.size and (bool((num < 0).any()) or bool((den < 1).any()) or bool((num > den).any())):
        raise ValueError("each probability num/den must lie in [0, 1] with den >= 1")
    if num.dtype != object and den.dtype != object and (den.size == 0 or int(den.max()) <= _INT64_SAFE):
        return _bern_ratio(num.astype(np.int64), den.astype(np.int64), rng)
    return _bern_ratio_big(num.astype(object), den.astype(object), rng)


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


def _float_sigma2(sigma2) -> float:
    """sigma² as a float, or a clear error when a tiny budget (rho = 1e-400) puts it beyond floats."""
    try:
        return float(as_fraction(sigma2))
    except OverflowError:
        f = as_fraction(sigma2)
        raise MechanismError(
            f"the noise parameter sigma² (about 10^{len(str(f.numerator)) - len(str(f.denominator))}) is "
            "beyond floating point (above 1.8e308): the budget is too small to release anything"
        ) from None


def discrete_gaussian_variance(sigma2) -> float:
    """Variance of the discrete Gaussian with parameter sigma² (a float: used only as a weight).

    It is below sigma² for small sigma² (0.37 at sigma² = 1/2) and equal to it to 1e-16 from
    sigma² of about 10 on.
    """
    s2 = _float_sigma2(sigma2)
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
    s2 = _float_sigma2(sigma2)
    bound = int(math.floor(60.0 * math.sqrt(s2))) + 2
    n = np.arange(1, bound + 1, dtype=np.float64)
    log_z = math.log(1.0 + 2.0 * float(np.sum(np.exp(-n * n / (2.0 * s2)))))
    x = np.asarray(support, dtype=np.float64)
    return -x * x / (2.0 * s2) - log_z


# --- Bernoulli primitives (each returns a boolean array; arrays are int64 or object) -------


def _bern_ratio(num, den, rng: np.random.Generator) -> np.ndarray:
    """Bernoulli(num/den) elementwise, 0 <= num <= den, den >= 1 (int or array)."""
    num = np.asarray(num)
    if num.dtype != object and (
        np.isscalar(den) and int(den) <= _INT64_SAFE or (not np.isscalar(den) and np.asarray(den).dtype != object)
    ):
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
_FACT_THRESHOLDS = tuple(_FACT // math.factorial(k) for k in range(_FACT_N, 1, -1))  # int64-safe, ascending


def _bern_exp_one(size: int, rng: np.random.Generator) -> np.ndarray:
    """Bernoulli(exp(-1)): K = the first k >= 2 whose trial Bernoulli(1/k) fails; 1 iff K is odd."""
    u = rng.integers(0, _FACT, size=size, dtype=np.int64)
    successes = (
        _FACT_N - 1 - np.searchsorted(np.asarray(_FACT_THRESHOLDS, dtype=np.int64), u, side="right")
    )  # trials k = 2..
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


# The exact samplers draw uniform integers below a discrete Laplace scale's numerator in int64, and
# the noise is u + numerator·G with G geometric (P(G >= g) = e^-g): a numerator below 2^56 keeps it
# inside int64 up to G = 127 (a chance below 1e-55 per draw; beyond that the draw is refused, never
# wrapped), and the noisy count it is added to below 2^63.
MAX_SCALE_NUMERATOR = 1 << 56
_INT64_MAX = (1 << 63) - 1


def _laplace_limit(t: Fraction) -> str | None:
    if t.numerator < MAX_SCALE_NUMERATOR:
        return None
    return (
        f"a discrete Laplace noise scale of about {_about(t)} (exactly a fraction whose numerator has "
        f"{len(str(t.numerator))} digits), beyond the 64-bit integers the exact samplers draw in: they work for a "
        "scale whose exact numerator is below 2^56 (about 7.2e16), so that the noise and the count it is added "
        "to stay 64-bit integers"
    )


def _gaussian_limit(sigma2: Fraction) -> str | None:
    s2 = effective_sigma2(sigma2)
    if math.isqrt(s2.numerator // s2.denominator) + 1 < MAX_SCALE_NUMERATOR:
        return None
    return (
        f"a discrete Gaussian noise parameter sigma² of about {_about(s2)}, beyond the 64-bit integers the exact "
        "samplers draw in: they work for sigma² below (2^56 - 1)² (about 5.2e33), since its discrete Laplace "
        "proposals have scale floor(sigma) + 1, which must stay below 2^56 (about 7.2e16)"
    )


def _about(f: Fraction) -> str:
    """A positive Fraction's size in words, also beyond floats."""
    try:
        return f"{float(f):.3g}"
    except OverflowError:
        return f"10^{len(str(f.numerator)) - len(str(f.denominator))}"


_LIMITS = {
    "discrete_laplace": (_laplace_limit, Fraction(MAX_SCALE_NUMERATOR - 1)),
    "discrete_gaussian": (_gaussian_limit, Fraction((MAX_SCALE_NUMERATOR - 1) ** 2)),
}


def sampler_limit_problem(kind: str, scale, budget: tuple[str, object] | None = None) -> str | None:
    """Why the exact sampler `kind` would refuse noise of this scale, or None when it draws it.

    kind: "discrete_laplace" (scale: the scale t) or "discrete_gaussian" (scale: sigma²). The one
    test `check` and the samplers share, so a plugin refuses at `check`, in the samplers' words,
    what `compile` could not draw. budget: (name, value) of the budget parameter the scale is
    inversely proportional to (epsilon, rho): the message then says which values of it work.
    """
    if kind not in _LIMITS:
        raise ValueError(f"no exact sampler named {kind!r}: 'discrete_laplace' or 'discrete_gaussian'")
    limit, top = _LIMITS[kind]
    s = as_fraction(scale)
    problem = limit(s) if s > 0 else None  # a scale of 0 or less: the plugin's own checks say why
    if problem is None:
        return None
    if budget is None:
        return (
            f"the noise asks for {problem}. Declare a larger budget (epsilon or rho), or one written with fewer digits"
        )

    name, value = budget
    value = as_fraction(value)
    shown = format_number(value)
    least = value * s / top  # the scale grows as 1/budget: the least budget whose scale is small enough
    works = _round_budget(max(least, value), lambda c: limit(s * value / c) is None)
    example = f" ({name} = {works} works)" if works else ""
    if s <= top:  # small enough, but its exact fraction has too many digits
        return (
            f"{name} = {shown} asks for {problem}. This {name} is large enough, but its exact fraction "
            f"has too many digits: declare it with fewer{example}"
        )
    return (
        f"{name} = {shown} asks for {problem}: noise that large could not be added to a count anyway. "
        f"Declare a larger budget: {name} of at least about {_about(least)}{example}"
    )


def _round_budget(least: Fraction, fits) -> str | None:
    """The first of 1, 2, 5 times a power of ten at or above `least` that `fits`, written short."""
    k = len(str(least.numerator)) - len(str(least.denominator)) - 1
    for _ in range(60):
        for m in (1, 2, 5):
            c = m * Fraction(10) ** k
            if c >= least and fits(c):
                return f"{m}e{k}" if k < -3 or k > 5 else str(m * 10**k if k >= 0 else float(c))
        k += 1
    return None


def discrete_laplace(t, size: int, rng: np.random.Generator) -> np.ndarray:
    """Discrete Laplace with scale t: P(y) proportional to exp(-|y|/t) (CKS Algorithm 2).

    t is a positive integer or a rational num/den (CKS draw X with integer scale num and return
    floor(X / den)); an integer t draws exactly as before."""
    t = as_fraction(t)
    if t <= 0:
        raise ValueError("the discrete Laplace scale must be positive")
    num, den = t.numerator, t.denominator
    problem = sampler_limit_problem("discrete_laplace", t)
    if problem is not None:  # `check` refuses it first; this is the last line of defence
        raise MechanismError(problem)
    out = np.empty(size, dtype=np.int64)
    pending = np.arange(size)
    while pending.size:
        n = pending.size
        u = rng.integers(0, num, size=n, dtype=np.int64) if num > 1 else np.zeros(n, dtype=np.int64)
        keep = _bern_exp_fraction(u, num, rng) if num > 1 else np.ones(n, dtype=bool)
        x = np.zeros(n, dtype=np.int64)
        ki = np.flatnonzero(keep)
        g = _geometric_exp_one(ki.size, rng)
        if g.size and int(g.max()) > (_INT64_MAX - num) // num:  # never wrap: refuse (below 1e-55 per draw)
            raise MechanismError(
                f"a discrete Laplace draw of scale {_about(t)} left the 64-bit integers; declare a larger budget"
            )
        x[ki] = u[ki] + num * g
        if den > 1:
            x //= den
        neg = rng.integers(0, 2, size=n, dtype=np.int64) == 1
        ok = keep & ~(neg & (x == 0))
        y = np.where(neg, -x, x)
        out[pending[ok]] = y[ok]
        pending = pending[~ok]
    return out


def bernoulli_exp(num, den, rng: np.random.Generator) -> np.ndarray:
    """Exact Bernoulli(exp(-num[i]/den)) per element, for integers num >= 0 and den >= 1 (the
    acceptance step of exact rejection samplers whose log-ratio is rational)."""
    num = np.asarray(num)
    if num.size and bool((num < 0).any()):
        raise ValueError("bernoulli_exp needs num >= 0")
    if num.dtype != object:
        num = num.astype(np.int64)
    return _bern_exp_rational(num, int(den), rng)


def discrete_gaussian(sigma2, size, rng: np.random.Generator) -> np.ndarray:
    """``size`` exact discrete Gaussian samples (int64) with parameter sigma² (a Fraction).

    sigma² may be rounded up first (``effective_sigma2``). Deterministic for a seeded ``rng``.
    """
    shape = (size,) if np.isscalar(size) else tuple(size)
    total = int(np.prod(shape)) if shape else 1
    s2 = effective_sigma2(sigma2)
    problem = sampler_limit_problem("discrete_gaussian", s2)
    if problem is not None:  # `check` refuses it first; this is the last line of defence
        raise MechanismError(problem)
    p, q = s2.numerator, s2.denominator
    t = math.isqrt(p // q) + 1
    qt = q * t
    den = 2 * p * q * t * t  # gamma = (|Y|·q·t - p)² / den
    a_max = math.isqrt(_INT64_SAFE)
    # |Y| up to y_fast keeps a = |Y|·q·t - p and a² inside int64.
    y_fast = (a_max - p) // qt if den <= _INT64_SAFE and p <= a_max else -1
    out = np.empty(total, dtype=np.int64)
    table = _gaussian_table(p, q)
    # fixed-size chunks bound the temporaries; the chunking is part of the deterministic stream
    for start in range(0, total, _CHUNK):
        if table is not None:
            out[start : min(total, start + _CHUNK)] = _table_sample(min(total, start + _CHUNK) - start, table, rng)
            continue
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


# --- the fast path: an exact alias table with rejection -----------------------------------
#
# Why: CKS's sampler spends ~15 random draws and ~30 numpy passes per sample (0.4M samples/s);
# TopDown draws tens of millions. For the sigma² TopDown uses (up to about 5e5) a table does the
# same job exactly with one 64-bit draw per sample, almost always:
#
#   * symbols: every y in [-B, B] (B >= 11 sigma), one "tail" symbol for |y| > B, one "reject"
#     symbol; integer weights w_s >= c·f_s, where f_y = exp(-y²/(2 sigma²)), f_tail = the sum of
#     f_y over |y| > B and c is the largest integer that fits; the reject symbol takes the rest
#     of N = n·2**32;
#   * one uniform 64-bit word picks a symbol exactly (Walker's alias method on integers: the top
#     bits a bucket, the next 32 bits a threshold) and its low k bits start a uniform real U;
#     the symbol is accepted iff U < c·f_s / w_s, so each round outputs y with probability
#     c·f_y / N, proportional to the target; a rejected round is repeated;
#   * the decision U < c·f_s / w_s is made from the k bits against integer bounds
#     A_s <= 2**k·c·f_s/w_s <= R_s, certified by interval arithmetic in the decimal module with
#     directed rounding; the rare draws between them (about 2**-k of them) are decided exactly by
#     drawing more bits of U and narrowing the interval of f_s at growing precision;
#   * an accepted tail symbol draws y exactly from the tail: y = ±(B + 1 + L), L geometric with
#     ratio exp(-(B+1)/sigma²), accepted with probability exp(-L²/(2 sigma²)) (CKS Bernoullis).
#
# Nothing here rounds a probability: the table only decides how often the exact slow decision
# is needed.

_TABLE_MAX_BITS = 14  # at most 2**14 symbols (sigma up to about 740)
_ALIAS_BITS = 32
_PREC = 40  # decimal digits of the table's interval arithmetic


def _exp_neg_interval(x: Fraction, prec: int) -> tuple[Fraction, Fraction]:
    """Rigorous bounds on exp(-x) for a rational x >= 0 (decimal's exp is correctly rounded)."""
    with localcontext() as ctx:
        ctx.prec = prec
        ctx.rounding = ROUND_FLOOR
        x_lo = Decimal(x.numerator) / Decimal(x.denominator)
        ctx.rounding = ROUND_CEILING
        x_hi = Decimal(x.numerator) / Decimal(x.denominator)
        ctx.rounding = ROUND_HALF_EVEN
        e_hi, e_lo = (-x_lo).exp(), (-x_hi).exp()  # within half an ulp of the true values
    ulp = lambda d: Fraction(10) ** (d.adjusted() - prec + 1)  # noqa: E731
    return max(Fraction(0), Fraction(e_lo) - 2 * ulp(e_lo)), Fraction(e_hi) + 2 * ulp(e_hi)


def _tail_interval(p: int, q: int, b: int, prec: int) -> tuple[Fraction, Fraction]:
    """Bounds on the sum of exp(-y² q / 2p) over |y| > b, to about ``prec`` digits."""
    lo = hi = Fraction(0)
    y = b + 1
    first = None
    while True:
        e_lo, e_hi = _exp_neg_interval(Fraction(y * y * q, 2 * p), prec)
        first = e_hi if first is None else first
        lo, hi = lo + e_lo, hi + e_hi
        if e_hi < first * Fraction(1, 10**prec):
            break
        y += 1
    # the remaining terms shrink at least geometrically with ratio exp(-(2y+3) q / 2p)
    _, r_hi = _exp_neg_interval(Fraction((2 * y + 3) * q, 2 * p), prec)
    n_lo, n_hi = _exp_neg_interval(Fraction((y + 1) * (y + 1) * q, 2 * p), prec)
    hi += n_hi / (1 - r_hi)
    return 2 * lo, 2 * hi


@attrs.frozen
class _Table:
    p: int
    q: int
    b: int  # center symbols are y = -b..b (index y + b); then tail, then reject
    bits: int  # log2 of the number of buckets
    acc_bits: int  # bits of the 64-bit word left for the acceptance test
    c: int  # the common scale: symbol s is output with probability c·f_s / N per round
    thresh: np.ndarray  # uint64 alias thresholds (out of 2**32)
    alias: np.ndarray  # int64
    weight: tuple  # exact integer weights w_s per symbol (Python ints)
    acc_lo: np.ndarray  # A_s (uint64)
    acc_hi: np.ndarray  # R_s (uint64)

    @property
    def tail(self) -> int:
        return 2 * self.b + 1

    def f_interval(self, s: int, prec: int) -> tuple[Fraction, Fraction]:
        if s == self.tail:
            return _tail_interval(self.p, self.q, self.b, prec)
        y = s - self.b
        return _exp_neg_interval(Fraction(y * y * self.q, 2 * self.p), prec)


def _gaussian_table(p: int, q: int) -> "_Table | None":
    """The alias table for sigma² = p/q, or None when sigma² is too large for one (cached)."""
    key = (p, q)
    if key in _TABLES:
        return _TABLES[key]

    b = math.isqrt(-(-121 * p // q)) + 2  # b >= 11 sigma: the tail has mass below 2**-80
    n_sym = 2 * b + 3
    bits = max(1, (n_sym - 1).bit_length())
    if bits > _TABLE_MAX_BITS:
        _TABLES[key] = None
        return None
    acc_bits = 64 - bits - _ALIAS_BITS
    # f_y for y = 0..b+1 by the recurrence f_{y+1} = f_y·r_y, r_{y+1} = r_y·r1², r_0 = r1 =
    # exp(-q/2p), once rounded down and once up: rigorous bounds from two exponentials.
    r1_lo, r1_hi = _exp_neg_interval(Fraction(q, 2 * p), _PREC)
    bounds = []
    for r1, rounding in ((r1_lo, ROUND_FLOOR), (r1_hi, ROUND_CEILING)):
        with localcontext() as ctx:
            ctx.prec, ctx.rounding = _PREC, rounding
            r1d = Decimal(r1.numerator) / Decimal(r1.denominator)
            f, r, r2 = Decimal(1), r1d, r1d * r1d
            seq = []
            for _ in range(b + 2):
                seq.append(f)
                f, r = f * r, r * r2
            bounds.append(seq)
    f_lo = [Fraction(v) for v in bounds[0]]
    f_hi = [Fraction(v) for v in bounds[1]]
    # terms beyond b shrink at least geometrically, with ratio exp(-(2b+1) q / 2p) < 1
    _, ratio_hi = _exp_neg_interval(Fraction((2 * b + 1) * q, 2 * p), _PREC)
    tail_hi = 2 * f_hi[b + 1] / (1 - ratio_hi)
    tail_lo = 2 * f_lo[b + 1]
    sym_lo = [f_lo[abs(y)] for y in range(-b, b + 1)] + [tail_lo]
    sym_hi = [f_hi[abs(y)] for y in range(-b, b + 1)] + [tail_hi]
    n_buckets = 1 << bits
    total = n_buckets << _ALIAS_BITS
    mass_hi = sum(sym_hi, Fraction(0))
    # the largest integer c with sum(ceil(c·f_hi)) < total: the reject symbol gets almost nothing
    c = (Fraction(total - len(sym_hi) - 1) / mass_hi).__floor__()
    weights = [math.ceil(c * v) for v in sym_hi]
    weights = [max(1, w) for w in weights]
    rest = total - sum(weights)
    if rest < 0:
        raise AssertionError("discrete Gaussian table overflow")  # cannot happen: scale leaves room
    weights.append(rest)  # the reject symbol
    weights += [0] * (n_buckets - len(weights))
    big_k = 1 << acc_bits
    acc_lo = [min(big_k, (big_k * c * lo / w).__floor__()) for lo, w in zip(sym_lo, weights)] + [0] * (
        n_buckets - len(sym_lo)
    )
    acc_hi = [min(big_k, (big_k * c * hi / w).__ceil__()) for hi, w in zip(sym_hi, weights)] + [0] * (
        n_buckets - len(sym_hi)
    )
    thresh, alias = _alias(weights, _ALIAS_BITS)
    table = _Table(
        p,
        q,
        b,
        bits,
        acc_bits,
        c,
        thresh,
        alias,
        tuple(weights),
        np.array(acc_lo, dtype=np.uint64),
        np.array(acc_hi, dtype=np.uint64),
    )
    _TABLES[key] = table
    return table


_TABLES: dict = {}


def _alias(weights: list, cap_bits: int) -> tuple[np.ndarray, np.ndarray]:
    """Walker/Vose alias table on integers: bucket i keeps symbol i below thresh[i] (out of
    2**cap_bits) and gives alias[i] otherwise; every symbol's total is its weight exactly."""
    cap = 1 << cap_bits
    n = len(weights)
    left = list(weights)
    thresh = [cap] * n
    alias = list(range(n))
    small = [i for i, w in enumerate(left) if w < cap]
    large = [i for i, w in enumerate(left) if w > cap]
    while small and large:
        s, g = small.pop(), large.pop()
        thresh[s], alias[s] = left[s], g
        left[g] -= cap - left[s]
        if left[g] < cap:
            small.append(g)
        elif left[g] > cap:
            large.append(g)
    # any leftovers hold exactly cap (integer arithmetic: sums are exact)
    return np.array(thresh, dtype=np.uint64), np.array(alias, dtype=np.int64)


def _raw64(n: int, rng: np.random.Generator) -> np.ndarray:
    """n uniform 64-bit words straight from the generator's bit stream."""
    raw = getattr(rng.bit_generator, "random_raw", None)
    if raw is not None:
        return np.asarray(raw(n), dtype=np.uint64)
    return rng.integers(0, 1 << 64, size=n, dtype=np.uint64, endpoint=False)


class _OneStream:
    """Every word of a table draw from one generator, in the order the sampler asks for them."""

    def __init__(self, rng: np.random.Generator):
        self._rng = rng

    def words(self, pending: np.ndarray) -> np.ndarray:
        return _raw64(pending.size, self._rng)

    def rng(self, draw: int) -> np.random.Generator:
        return self._rng


def _table_sample(n: int, table: _Table, rng: np.random.Generator) -> np.ndarray:
    """n table draws from one generator: n words first, then whatever the rare paths need."""
    return _table_draws(table, _raw64(n, rng), _OneStream(rng))


def _table_draws(table: _Table, first: np.ndarray, source) -> np.ndarray:
    """The table sampler: draw i starts from the 64-bit word ``first[i]``.

    The rare steps ask ``source`` for more randomness: ``source.words(pending)`` gives one new
    word for each draw (by index) still pending after a rejection, and ``source.rng(i)`` is
    the generator draw i's exact acceptance and tail steps read from. With one generator
    (`_OneStream`) this is the classic order: n words, then each round's exact steps in draw
    order, then the next round's words. `dpspec.run.keyed_noise` gives every draw its own
    unit's stream instead, so the same code path serves keyed (per-cell) randomness.
    """
    n = first.size
    out = np.empty(n, dtype=np.int64)
    pending = None  # all of them, in the first round
    shift_bucket = np.uint64(64 - table.bits)
    shift_alias = np.uint64(table.acc_bits)
    mask_alias = np.uint64((1 << _ALIAS_BITS) - 1)
    mask_acc = np.uint64((1 << table.acc_bits) - 1)
    r = first
    while r.size:
        bucket = (r >> shift_bucket).astype(np.intp)
        u = (r >> shift_alias) & mask_alias
        sym = np.where(u < table.thresh[bucket], bucket, table.alias[bucket])
        acc = r & mask_acc
        accept = acc < table.acc_lo[sym]
        doubt = np.flatnonzero(~accept)
        doubt = doubt[acc[doubt] < table.acc_hi[sym[doubt]]]
        for i in doubt:  # about 2**-acc_bits of the draws: decide exactly
            accept[i] = _accept_exactly(table, int(sym[i]), int(acc[i]), source.rng(_draw_index(pending, i)))
        values = sym - table.b
        for i in np.flatnonzero(accept & (sym == table.tail)):  # probability below 2**-80
            values[i] = _tail_sample(table, source.rng(_draw_index(pending, i)))
        if pending is None:  # first round: keep everything, redo the rejected ones
            out[:] = values
            pending = np.flatnonzero(~accept)
        else:
            out[pending[accept]] = values[accept]
            pending = pending[~accept]
        r = source.words(pending) if pending.size else pending[:0].astype(np.uint64)
    return out


def _draw_index(pending, i) -> int:
    """The draw at position i of a round: i itself in round one, then ``pending[i]``."""
    return int(i if pending is None else pending[i])


def _accept_exactly(table: _Table, s: int, acc: int, rng: np.random.Generator) -> bool:
    """U < c·f_s/w_s for the uniform real U whose first acc_bits bits are ``acc``."""
    c_over_w = Fraction(table.c, table.weight[s])

    def interval(prec):
        f_lo, f_hi = table.f_interval(s, prec)
        return c_over_w * f_lo, c_over_w * f_hi

    return _below_lazily(acc, table.acc_bits, interval, 2 * _PREC, rng)


def _below_lazily(num: int, bits: int, interval, prec: int, rng: np.random.Generator) -> bool:
    """U < p for the uniform real U whose first ``bits`` bits are ``num``, where ``interval(prec)``
    gives rigorous rational bounds on p that tighten as prec grows: more bits of U are drawn
    while U's interval and p's overlap, a finer bound on p is asked for when p's is the wider."""
    p_lo, p_hi = interval(prec)
    while True:
        u_lo, u_hi = Fraction(num, 1 << bits), Fraction(num + 1, 1 << bits)
        if u_hi <= p_lo:
            return True
        if u_lo >= p_hi:
            return False
        if Fraction(1, 1 << bits) > p_hi - p_lo:
            num = (num << 62) | int(rng.integers(0, 1 << 62, dtype=np.int64))
            bits += 62
        else:
            prec *= 2
            p_lo, p_hi = interval(prec)


def _scaled_exp_interval(ratio: Fraction, x: Fraction, prec: int) -> tuple[Fraction, Fraction]:
    """Rigorous bounds on ratio·exp(-x) for rationals ratio >= 0 and x of either sign."""
    if x >= 0:
        lo, hi = _exp_neg_interval(x, prec)
        return ratio * lo, ratio * hi
    lo, hi = _exp_neg_interval(-x, prec)
    while lo == 0:  # exp(|x|) beyond the precision: ask for more digits
        prec *= 2
        lo, hi = _exp_neg_interval(-x, prec)
    return ratio / hi, ratio / lo


def bernoulli_scaled_exp(log_p, log_err, exact, rng: np.random.Generator) -> np.ndarray:
    """Exact Bernoulli(p[i]) per element for reals p[i] = R·exp(-x) <= 1 with R, x rational, as
    exact rejection samplers whose acceptance mixes an integer ratio (a binomial coefficient)
    with an exponential need (neither factor alone need be at most 1).

    log_p[i] is a float estimate of log p[i], within log_err[i] (a rigorous bound the caller
    derives from its float arithmetic); exact(i) returns (R, x) for element i. One 62-bit uniform
    word per element decides whenever it falls outside the estimate's band; the rare ones inside
    (a fraction of about 2·log_err) are decided by interval arithmetic on R·exp(-x), drawing more
    bits of the uniform as needed, so the outcome is exactly Bernoulli(p[i])."""
    log_p = np.asarray(log_p, dtype=float)
    log_err = np.broadcast_to(np.asarray(log_err, dtype=float), log_p.shape)
    n = log_p.size
    u = rng.integers(0, 1 << _DIGIT_BITS, size=n, dtype=np.int64)
    scale = float(1 << _DIGIT_BITS)
    # float exp is within an ulp or two: the (1 -+ 2**-50) factors cover it
    p_lo = np.minimum(np.exp(log_p - log_err) * (1 - 2.0**-50), 1.0)
    p_hi = np.minimum(np.exp(log_p + log_err) * (1 + 2.0**-50), 1.0)
    # integer thresholds (p·2**62 is exact in float, and so is its floor or ceiling below 2**63)
    thr_lo = np.floor(p_lo * scale).astype(np.int64)  # U < p_lo when u + 1 <= p_lo·2**62
    # U >= p_hi when u >= p_hi·2**62; at least 1, so a p that underflows in float is still decided exactly
    thr_hi = np.maximum(np.ceil(p_hi * scale).astype(np.int64), 1)
    out = u + 1 <= thr_lo
    doubt = np.flatnonzero(~out & (u < thr_hi))
    for i in doubt:  # about 2·log_err of the elements
        ratio, x = exact(int(i))
        out[i] = _below_lazily(
            int(u[i]), _DIGIT_BITS, lambda prec: _scaled_exp_interval(Fraction(ratio), Fraction(x), prec), _PREC, rng
        )
    return out


def _tail_sample(table: _Table, rng: np.random.Generator) -> int:
    """One exact draw of y conditioned on |y| > b (see the section comment)."""
    p, q, b = table.p, table.q, table.b
    while True:
        length = 0
        while _bern_exp_rational(np.array([(b + 1) * q], dtype=object), p, rng)[0]:
            length += 1
        if _bern_exp_rational(np.array([length * length * q], dtype=object), 2 * p, rng)[0]:
            sign = 1 if rng.integers(0, 2) else -1
            return sign * (b + 1 + length)
