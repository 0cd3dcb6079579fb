"""Exact numbers for the certificate and the report's certificate section: fractions as "n/d", floats by their exact binary value."""

from __future__ import annotations

import math
from fractions import Fraction


def rational(value):
    """An exact number as text: a fraction as "n/d", an integer as is, a binary float by its exact value."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, Fraction):
        return str(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return str(Fraction(value))
    if isinstance(value, dict):
        return {str(k): rational(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [rational(v) for v in value]
    return str(value)


def _budget(b) -> dict | None:
    if b is None:
        return None
    params = b.params() if hasattr(b, "params") else {}
    return {"premetric": b.kind, "parameters": rational(dict(params)), "text": str(b)}


def exact_budgets(result) -> dict:
    """The achieved budget in the spec's flavor and natively, and each bound, every number exact."""
    ledger = result.ledger
    return {
        "declared": _budget(ledger.declared),
        "worst": _budget(ledger.worst),
        "native": _budget(result.statement.actual),
        "bounds": [
            {
                "bound": c.bound.describe(),
                "limit": rational(c.bound.value),
                "achieved": rational(c.achieved),
                "holds": bool(c.holds),
                "computed_as": c.currency,
            }
            for c in ledger.bounds
        ],
    }
