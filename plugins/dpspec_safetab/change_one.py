"""What a change of one record costs, counted by SafeTab's own sensitivity rather than by group privacy.

Production SafeTab measures add/remove one record (Tumult Analytics' AddOneRow: one person for
SafeTab-P, one household for SafeTab-H, whose technical documentation says privacy loss "is
measured with respect to adding/removing one household"). A spec that protects a *change* of one
record can get there two ways:

- generically, a change is two add/remove steps, and zCDP group privacy for 2 steps multiplies
  rho by 4 (the ledger's `symdiff-to-hamming` step; valid for any mechanism);
- from the mechanism: every SafeTab statistic is a count with discrete Gaussian noise. A changed
  record leaves at most k cells and enters at most k cells of one count vector, so the squared L2
  sensitivity is 2k instead of k, and every measurement's rho is exactly doubled (adaptive
  composition keeps the threshold choice inside the budget as before).

The second is the tight change-one figure, half the first. The Census Bureau's published
Detailed DHC-B figure (rho 17.79, as the OpenDP deployments registry quotes it) is 2 x 8.895302:
this count, for a changed household.
"""

from __future__ import annotations

from fractions import Fraction
from dpspec.api import ir, ZCDP, ChangeOne


def change_one_note(spec, params, total: Fraction) -> str | None:
    """A budget note giving both change-one figures when the spec protects a change of one record."""
    unit = spec.unit
    if unit is None or unit.table != params["table"] or unit.relation != "hamming":
        return None

    record = spec.domain.table(params["table"]).unit
    return (
        f"change one {record} (the spec's relation): the record leaves at most k cells and enters at most k "
        f"cells of each count, so the L2 sensitivity squared is 2k and every measurement's rho doubles: "
        f"rho = 2 x {ir.format_number(total)} = {ir.format_number(2 * total)} by the mechanism's own "
        f"sensitivity (the tight change-one figure); the ledger's generic conversion treats a change as two "
        f"add/remove steps (zCDP group privacy, rho x 4 = {ir.format_number(4 * total)}), a valid but looser "
        "bound, and is the figure this spec's own budget states (a program of products counts the tight one, "
        "by Mechanism.change_one)"
    )


def change_one_budget(spec, params, budget):
    """ChangeOne(rho doubled, reason): the tight change-one budget, for `Mechanism.change_one`."""

    if budget is None or budget.kind != "zcdp":
        return None
    record = spec.domain.table(params["table"]).unit
    reason = (
        f"the mechanism's own sensitivity: a changed {record} leaves at most k cells and enters at most k "
        "cells of each count, so the L2 sensitivity squared is 2k instead of k and every measurement's rho "
        "doubles (rho x 2, the tight change-one figure; group privacy's two add/remove steps would give rho x 4)"
    )
    return ChangeOne(ZCDP(2 * budget.rho), reason)
