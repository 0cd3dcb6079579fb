"""Each query's exact sensitivity under the native relation (add/remove one row, or change one).

Why per relation rather than by group privacy: changing one row moves a count from one cell to
another (L2² = 2), which is half of what two add/remove steps (4) would charge under zCDP. A
coarser unit (`holds at most K`) is then group privacy over these figures, done by the ledger.
"""

from __future__ import annotations

from fractions import Fraction

import attrs

from .design import Query


@attrs.frozen
class Sensitivity:
    l1: Fraction  # for the discrete Laplace (pure epsilon)
    l2_squared: Fraction  # for the discrete Gaussian (zCDP)
    why: str


def of(query: Query, relation: str, keyed: bool) -> Sensitivity:
    """keyed: the release has cells (`by` is not empty): a changed row may move between cells."""
    if query.statistic == "quantile":  # the exponential mechanism's score: a rank, moved by at most 1
        return Sensitivity(Fraction(1), Fraction(1), "the score |rank(c) - q·n| moves by at most 1")
    if query.statistic == "count":
        if relation == "symdiff":
            return Sensitivity(Fraction(1), Fraction(1), "one row added or removed changes one cell's count by 1")
        if not keyed:
            return Sensitivity(
                Fraction(0), Fraction(0), "changing a row leaves the total count unchanged (an invariant)"
            )
        return Sensitivity(Fraction(2), Fraction(2), "a changed row leaves one cell and joins another: L1 2, L2² 2")
    m = Fraction(max(abs(query.low), abs(query.high)))
    width = Fraction(query.high - query.low)
    if relation == "symdiff":
        return Sensitivity(m, m * m, f"one row added or removed moves one cell's clipped sum by at most {m}")
    if not keyed:
        return Sensitivity(width, width * width, f"a changed row's clipped value moves by at most {width}")
    return Sensitivity(
        max(width, 2 * m),
        max(width * width, 2 * m * m),
        "a changed row moves its clipped value within its cell, or between two cells",
    )
