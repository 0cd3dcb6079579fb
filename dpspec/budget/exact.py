"""Exact budget numbers: rationals, and certified float bounds where the true value is irrational.

A budget that decides whether a declared bound holds must not be a float rounded the wrong way.
Rational steps (sums, products, eps²/2, shares) are done in `Fraction`. A conversion with a
logarithm, an exponential or a square root (zCDP to (epsilon, delta), group privacy for
(epsilon, delta)) is evaluated in interval arithmetic on `Decimal` at 50 digits, with every
rounding directed outward (`ln`, `exp` and `sqrt` are correctly rounded by the decimal module,
so one unit in the last place on each side encloses them); the figure stated is the smallest
float at or above the interval's upper end (or at or below its lower end, for a lower bound), as
an exact `Fraction`. So every figure the budget path states is exact or a proven bound on the
safe side, and is still a number a float can print.
"""

from __future__ import annotations

import math
import numbers
import sys
from decimal import ROUND_CEILING, ROUND_FLOOR, ROUND_HALF_EVEN, Context, Decimal, Inexact
from fractions import Fraction

PRECISION = 50
_UP = Context(prec=PRECISION, rounding=ROUND_CEILING, Emin=-(10**8), Emax=10**8)
_DOWN = Context(prec=PRECISION, rounding=ROUND_FLOOR, Emin=-(10**8), Emax=10**8)
_NEAR = Context(prec=PRECISION, rounding=ROUND_HALF_EVEN, Emin=-(10**8), Emax=10**8)

INF = math.inf


def exact(value) -> Fraction | float:
    """A budget number as an exact Fraction (math.inf stays infinite): a float is read exactly
    (Fraction(0.1) is the double nearest 0.1, not 1/10: the float is what the caller had)."""
    if isinstance(value, Fraction):
        return value
    if isinstance(value, bool):
        raise TypeError(f"a budget number cannot be {value!r}")
    if isinstance(value, numbers.Integral):
        return Fraction(int(value))
    if isinstance(value, float):
        if math.isinf(value):
            return value
        return Fraction(value)
    if isinstance(value, Decimal) and value.is_infinite():
        return INF if value > 0 else -INF
    return Fraction(value)


def ceil_float(q) -> float:
    """The smallest float at or above q (q a Fraction, an int or an infinity)."""
    if isinstance(q, float):
        return q
    f = float(q)
    if not math.isinf(f) and Fraction(f) < q:
        f = math.nextafter(f, math.inf)
    return f


def upper(q) -> Fraction | float:
    """q rounded up to a float, as an exact Fraction (infinity stays infinite)."""
    f = ceil_float(q)
    return f if math.isinf(f) else Fraction(f)


def _dec(q: Fraction, ctx: Context) -> Decimal:
    return ctx.divide(Decimal(q.numerator), Decimal(q.denominator))


class Interval:
    """[lo, hi] of Decimals, closed under +, -, *, / and the monotone ln, exp, sqrt."""

    __slots__ = ("lo", "hi")

    def __init__(self, lo: Decimal, hi: Decimal):
        self.lo, self.hi = lo, hi

    @classmethod
    def of(cls, value) -> "Interval":
        if isinstance(value, Interval):
            return value
        q = exact(value)
        if isinstance(q, float):
            raise OverflowError("an infinite value has no interval enclosure")
        return cls(_dec(q, _DOWN), _dec(q, _UP))

    def __add__(self, other):
        o = Interval.of(other)
        return Interval(_DOWN.add(self.lo, o.lo), _UP.add(self.hi, o.hi))

    __radd__ = __add__

    def __neg__(self):
        return Interval(-self.hi, -self.lo)

    def __sub__(self, other):
        return self + (-Interval.of(other))

    def __rsub__(self, other):
        return Interval.of(other) - self

    def __mul__(self, other):
        o = Interval.of(other)
        lows = [_DOWN.multiply(a, b) for a in (self.lo, self.hi) for b in (o.lo, o.hi)]
        highs = [_UP.multiply(a, b) for a in (self.lo, self.hi) for b in (o.lo, o.hi)]
        return Interval(min(lows), max(highs))

    __rmul__ = __mul__

    def __truediv__(self, other):
        o = Interval.of(other)
        if o.lo <= 0 <= o.hi:
            raise ZeroDivisionError("interval division by an interval holding 0")
        lows = [_DOWN.divide(a, b) for a in (self.lo, self.hi) for b in (o.lo, o.hi)]
        highs = [_UP.divide(a, b) for a in (self.lo, self.hi) for b in (o.lo, o.hi)]
        return Interval(min(lows), max(highs))

    def __rtruediv__(self, other):
        return Interval.of(other) / self

    def ln(self) -> "Interval":
        if self.lo <= 0:
            raise ValueError("ln of an interval reaching 0")
        return Interval(_rounded("ln", self.lo, down=True), _rounded("ln", self.hi, down=False))

    def exp(self) -> "Interval":
        return Interval(_exp_down(self.lo), _exp_up(self.hi))

    def sqrt(self) -> "Interval":
        lo = max(self.lo, Decimal(0))
        return Interval(max(Decimal(0), _rounded("sqrt", lo, down=True)), _rounded("sqrt", self.hi, down=False))

    def min0(self) -> "Interval":
        """min(self, 0)."""
        return Interval(min(self.lo, Decimal(0)), min(self.hi, Decimal(0)))

    def upper(self) -> Fraction | float:
        """The smallest float at or above the interval, as a Fraction (math.inf beyond floats)."""
        return _decimal_upper(self.hi)

    def lower(self) -> Fraction | float:
        """The largest float at or below the interval, as a Fraction (-math.inf beyond floats)."""
        return -_decimal_upper(-self.lo)

    def __repr__(self) -> str:
        return f"Interval({self.lo}, {self.hi})"


_EXP_LIMIT = Decimal(10**6)  # e^(10^6) is far beyond any float: no need to compute it
_FLOAT_TOP = Decimal("1.8e308")
_FLOAT_TINY = Decimal("1e-330")  # below the smallest subnormal float (about 4.9e-324)
_SMALLEST = Fraction(math.ulp(0.0))


def _exp_up(d: Decimal) -> Decimal:
    if d > _EXP_LIMIT:
        return Decimal("Infinity")
    if d < -_EXP_LIMIT:
        return _FLOAT_TINY  # e^d is positive and below every float
    return _rounded("exp", d, down=False)


def _exp_down(d: Decimal) -> Decimal:
    if d > _EXP_LIMIT:
        return _FLOAT_TOP
    if d < -_EXP_LIMIT:
        return Decimal(0)
    return max(Decimal(0), _rounded("exp", d, down=True))


def _decimal_upper(d: Decimal) -> Fraction | float:
    """The smallest float at or above a Decimal, as a Fraction, without expanding a Decimal whose
    exponent is far outside the float range (Fraction(Decimal('1e-99999999')) takes forever)."""
    if d > _FLOAT_TOP:
        return INF
    if d < -_FLOAT_TOP:  # the most negative float is at or above it
        return Fraction(-sys.float_info.max)
    if d.is_zero():
        return Fraction(0)
    if abs(d) < _FLOAT_TINY:
        return _SMALLEST if d > 0 else Fraction(0)
    return upper(Fraction(d))


def _rounded(op: str, d: Decimal, down: bool) -> Decimal:
    """ln, exp or sqrt of d, correctly rounded to nearest by the decimal module, then moved one
    unit in the last place outward, unless the result was exact (ln 1, sqrt 4)."""
    ctx = _NEAR.copy()
    ctx.clear_flags()
    out = getattr(ctx, op)(d)
    if not ctx.flags[Inexact]:
        return out
    return _next_down(out) if down else _next_up(out)


def _next_up(d: Decimal) -> Decimal:
    return _NEAR.next_plus(d)


def _next_down(d: Decimal) -> Decimal:
    return _NEAR.next_minus(d)


def iv(value) -> Interval:
    """An exact number (Fraction, int, float read exactly) as a degenerate-or-tight interval."""
    return Interval.of(value)


def exact_sum(values) -> Fraction | float:
    """The exact sum of budget numbers (an infinite term makes it infinite)."""
    total = Fraction(0)
    for v in values:
        v = exact(v)
        if isinstance(v, float):
            return INF
        total += v
    return total


def sqrt_upper(q) -> Fraction | float:
    """A certified upper bound on sqrt(q) for an exact q >= 0 (exact when q is a square)."""
    q = exact(q)
    if isinstance(q, float):
        return INF
    num, den = q.numerator, q.denominator
    rn, rd = math.isqrt(num), math.isqrt(den)
    if rn * rn == num and rd * rd == den:
        return Fraction(rn, rd)
    return iv(q).sqrt().upper()
