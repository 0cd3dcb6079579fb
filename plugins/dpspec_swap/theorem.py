"""The PSA's budget (seed paper, Theorem II.1) and the data fact it depends on (b).

The budget is a per-universe quantity: it depends on the data only through b, the size of the
largest match-key stratum that holds at least two different records, and b is a function of the
invariants. Everything here is exact where the theorem is: the rate is an exact fraction and
ln(o) is computed from its integer numerator and denominator.
"""

from __future__ import annotations

import math
from decimal import Decimal, localcontext
from fractions import Fraction
from numbers import Rational

from dpspec.api import MechanismError, interval, LazyModule

# heavy libraries, imported on first use
np = LazyModule("numpy", "np", globals())


def as_rate(p) -> Fraction:
    """The swap rate as an exact fraction in [0, 1].

    A float is read as the decimal the user wrote (0.05 -> 1/20), not as its binary
    approximation, so that a spec's ``rate: 0.05`` means exactly one in twenty.
    """
    if isinstance(p, bool):
        raise MechanismError(f"swap rate must be a number, not {p!r}")
    if isinstance(p, Fraction):
        q = p
    elif isinstance(p, (int, Rational)):
        q = Fraction(p)
    elif isinstance(p, (float, np.floating)):
        if not math.isfinite(p):
            raise MechanismError(f"swap rate must be finite, got {p!r}")
        q = Fraction(repr(float(p)))
    elif isinstance(p, (Decimal, str)):
        try:
            q = Fraction(p)
        except (ValueError, ArithmeticError) as exc:
            raise MechanismError(f"swap rate {p!r} is not a number") from exc
    else:
        raise MechanismError(f"swap rate must be a number, got {type(p).__name__}")
    if not 0 <= q <= 1:
        raise MechanismError(f"swap rate must lie in [0, 1], got {p}")
    return q


def log_odds(p) -> float:
    """ln(p / (1 - p)) from the exact numerator and denominator (no cancellation near 0 or 1)."""
    q = as_rate(p)
    num, den = q.numerator, q.denominator
    if num == 0 or num == den:
        raise MechanismError("the odds of a swap rate of 0 or 1 are not finite")
    # p = num/den, 1 - p = (den - num)/den, so o = num / (den - num); math.log takes big ints.
    return math.log(num) - math.log(den - num)


def psa_epsilon(b: int, p) -> float:
    """Theorem II.1: the pure-DP budget of the PSA, subject to its invariants.

    ``b`` is the size of the largest stratum holding two different records (0 if none).
    With b == 0 nothing can move, so the budget is 0; with p in {0, 1} and b > 0 the
    mechanism is deterministic on a stratum that could differ, so no finite budget exists.
    """
    if isinstance(b, bool) or not isinstance(b, (int, np.integer)):
        raise MechanismError(f"b must be a non-negative integer, got {b!r}")
    b = int(b)
    if b < 0:
        raise MechanismError(f"b must be a non-negative integer, got {b}")
    q = as_rate(p)
    if b == 0:
        return 0.0
    if q == 0 or q == 1:
        return math.inf
    ln_o = log_odds(q)
    ln_b1 = math.log(b + 1)
    if q <= Fraction(1, 2):
        return ln_b1 - ln_o
    return max(ln_o, ln_b1 - ln_o)


def psa_epsilon_bound(b: int, p):
    """`psa_epsilon` as the budget states it: the same logarithms in outward-rounded interval
    arithmetic, so the figure (an exact Fraction, the smallest float at or above the true
    value) is never below Theorem II.1's."""

    if psa_epsilon(b, p) in (0.0, math.inf):  # validates b and p; 0 and infinity are exact
        return psa_epsilon(b, p)
    q = as_rate(p)
    ln_o = interval(Fraction(q.numerator, q.denominator - q.numerator)).ln()
    ln_b1 = interval(int(b) + 1).ln()
    if q <= Fraction(1, 2):
        return (ln_b1 - ln_o).upper()
    return max(ln_o.upper(), (ln_b1 - ln_o).upper())


# ---- the whole curve: its minimum and its inverse -------------------------------------------
#
# For p <= 1/2 the budget ln(b+1) - ln(o) falls as p grows; for p > 1/2 it is the larger of
# ln(o) (rising) and ln(b+1) - ln(o) (falling), so the curve has one minimum, where the two
# meet: ln(o) = ln(b+1)/2, i.e. o = sqrt(b+1). Every larger epsilon E is reached at exactly two
# rates, one on each side: ln(o) = ln(b+1) - E (the falling branch) and ln(o) = E (the rising one).


def _rate_of_log_odds(ln_o: float) -> Fraction:
    """p = o / (1 + o) from ln(o), as a fraction carried to 40 digits: near 1 a float would hold
    1 - p to only a few digits, and the theorem maps the rate back through ln(p / (1 - p))."""
    with localcontext() as ctx:
        ctx.prec = 40
        o = Decimal(repr(float(ln_o))).exp()
        return Fraction(o / (1 + o))


def minimum_epsilon(b: int) -> tuple[float, Fraction | None]:
    """(smallest epsilon over all rates, the rate attaining it) for largest stratum b.

    The minimum is ln(b+1)/2 at o = sqrt(b+1), p = sqrt(b+1) / (1 + sqrt(b+1)), on the p > 1/2
    branch. With b == 0 every rate gives 0 and no rate is singled out (None)."""
    psa_epsilon(b, Fraction(1, 2))  # validates b
    b = int(b)
    if b == 0:
        return 0.0, None
    half = math.log(b + 1) / 2
    return half, _rate_of_log_odds(half)


def rates_for_epsilon(b: int, epsilon: float) -> tuple[Fraction, Fraction]:
    """The two rates (lower, higher) whose budget is exactly `epsilon` for largest stratum b.

    lower: ln(o) = ln(b+1) - epsilon; higher: ln(o) = epsilon. They coincide at the minimum.
    Refused below the minimum (no rate gives less) and for b == 0 (every rate gives 0)."""
    low_eps, _ = minimum_epsilon(b)
    b = int(b)
    if b == 0:
        raise MechanismError("with b = 0 nothing can move: every rate gives epsilon = 0")
    if not math.isfinite(epsilon):
        raise MechanismError("epsilon must be finite: only rates 0 and 1 give an infinite budget")
    if epsilon < low_eps * (1 - 1e-12):
        raise MechanismError(
            f"no swap rate gives epsilon {epsilon:g} for b = {b:,}: the smallest attainable "
            f"is ln(b+1)/2 = {low_eps:.6g}"
        )
    epsilon = max(epsilon, low_eps)
    return _rate_of_log_odds(math.log(b + 1) - epsilon), _rate_of_log_odds(epsilon)
