"""Budgets as text, the same way in `dpspec budget`, programs and `dpspec compile`'s summary."""

from __future__ import annotations

import math
from fractions import Fraction

from dpspec.budget.premetrics import format_figure


def budget_figure(v) -> str:
    """Budgets are printed to 4 decimals (small ones to 4 significant digits): reports must not
    round a 1.0986 to 1.1."""
    if isinstance(v, Fraction):
        v = float(v)
    if not isinstance(v, (int, float)) or isinstance(v, bool):
        return str(v)
    if math.isinf(v) or v == 0 or float(v).is_integer():
        return format_figure(v)
    if abs(v) < 0.01:
        return f"{v:.4g}"
    return f"{v:.4f}".rstrip("0").rstrip(".")


def budget_line(budget_json: dict | None, named: bool = True) -> str:
    """A budget's JSON form as `premetric: name = value, ...` (without the premetric: `(a, b)`)."""
    if not budget_json:
        return "undefined"
    # an exact companion (rho_exact) is for machines; the line prints the figure once
    items = [
        f"{k} = {budget_figure(v)}" for k, v in budget_json.items() if k != "premetric" and not k.endswith("_exact")
    ]
    text = ", ".join(items)
    if not named:
        return f"({text})" if len(items) > 1 else text
    return f"{budget_json['premetric']}: " + text
