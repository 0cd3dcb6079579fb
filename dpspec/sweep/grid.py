"""The sweep's grid: `NAME=VALUES` axes, their values, and the product of several axes.

VALUES is a comma-separated list whose items are numbers (0.05, 5%, 1/20, 1e-3: exact, as a
spec reads them), ranges START:STOP:STEP (inclusive of STOP when a step lands on it, exact
fractions throughout) and log-ranges log:START:STOP:N (N values spaced evenly in log scale,
START and STOP included, each rounded to 6 significant digits so it is an exact decimal).
"""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import attrs

from dpspec.errors import DpspecError

MAX_AXIS_VALUES = 10_000  # a range longer than this is a typo (0:1:1e-9), not a design
DEFAULT_LIMIT = 100  # grid points without --yes


class GridError(DpspecError):
    """A --vary option the grid cannot be built from (the user must fix it)."""


@attrs.frozen
class Axis:
    name: str  # a parameter path such as `rate` or `queries.state.total`
    values: tuple  # of Fraction, in the order given, without repeats


def number(text: str) -> Fraction:
    """One exact number: 0.05, 5%, 1/20, 1e-3 (a decimal means exactly what it says)."""
    item = text.strip()
    scale = 1
    if item.endswith("%"):
        item, scale = item[:-1].strip(), 100
    try:
        value = Fraction(item) / scale
    except (ValueError, ZeroDivisionError):
        raise GridError(f"{text.strip()!r} is not a number (write 0.05, 5%, 1/20 or 1e-3)") from None
    if abs(value) > 10**308 or (value and abs(value) < Fraction(1, 10**300)):
        raise GridError(f"{text.strip()!r} is too large or too small to be a parameter")
    return value


def _range(text: str) -> list[Fraction]:
    parts = text.split(":")
    if parts[0].strip().lower() == "log":
        if len(parts) != 4:
            raise GridError(f"{text!r}: a log-range is log:START:STOP:N, e.g. log:1e-3:1:7")
        start, stop = number(parts[1]), number(parts[2])
        try:
            n = int(parts[3])
        except ValueError:
            raise GridError(f"{text!r}: N, the number of values, must be a whole number") from None
        if start <= 0 or stop <= 0:
            raise GridError(f"{text!r}: a log-range needs positive START and STOP")
        if n < 1 or n > MAX_AXIS_VALUES:
            raise GridError(f"{text!r}: N must be between 1 and {MAX_AXIS_VALUES}")
        if n == 1:
            return [start]
        a, b = math.log(start), math.log(stop)
        inner = [Fraction(f"{math.exp(a + (b - a) * i / (n - 1)):.6g}") for i in range(1, n - 1)]
        return [start, *inner, stop]
    if len(parts) != 3:
        raise GridError(f"{text!r}: a range is START:STOP:STEP, e.g. 0.1:0.5:0.1")
    start, stop, step = (number(p) for p in parts)
    if step <= 0:
        raise GridError(f"{text!r}: the step must be positive")
    count = math.floor((stop - start) / step) + 1 if stop >= start else 0
    if count > MAX_AXIS_VALUES:
        raise GridError(f"{text!r} has {count:,} values; at most {MAX_AXIS_VALUES:,} per axis")
    return [start + i * step for i in range(count)]


def parse_axis(option: str) -> Axis:
    """`NAME=VALUES` as given to --vary."""
    name, sep, values = option.partition("=")
    name = name.strip()
    if not sep or not name:
        raise GridError(f"--vary {option!r}: expected NAME=VALUES, e.g. rate=0.01,0.05 or rho=log:0.1:10:5")
    out: list[Fraction] = []
    for item in values.split(","):
        if not item.strip():
            continue
        out.extend(_range(item) if ":" in item else [number(item)])
    unique = tuple(dict.fromkeys(out))
    if not unique:
        raise GridError(f"--vary {name}: no values (the list or range is empty)")
    return Axis(name, unique)


def product(axes: list[Axis]) -> list[dict]:
    """Every combination, the last axis varying fastest: [{name: value}]."""
    names = [a.name for a in axes]
    if len(set(names)) != len(names):
        dup = next(n for n in names if names.count(n) > 1)
        raise GridError(f"--vary {dup} is given twice; list all its values in one option")
    return [dict(zip(names, combo)) for combo in itertools.product(*(a.values for a in axes))]


def size(axes: list[Axis]) -> int:
    """The number of points of the axes' product, computed before any point is built."""
    return math.prod(len(a.values) for a in axes)


MAX_POINTS = 1_000_000  # even with --yes: a million points are already days of runs, and held in memory


def check_size(points: int, runs: int, limit: int, yes: bool) -> None:
    """Refuse a grid larger than `limit` points unless the user said --yes, and any grid beyond
    MAX_POINTS (its points would not fit in memory, --yes or not)."""
    if points == 0:
        raise GridError("the grid is empty")
    if points > MAX_POINTS:
        raise GridError(
            f"the grid has {points:,} points, more than the {MAX_POINTS:,} a sweep can hold; narrow it "
            "(fewer values per axis, or fewer axes)"
        )
    if points > limit and not yes:
        raise GridError(
            f"the grid has {points:,} points ({points * runs:,} runs of the mechanism), more than the "
            f"limit of {limit:,}; narrow it, or pass --yes to run it anyway (or --limit N)"
        )
