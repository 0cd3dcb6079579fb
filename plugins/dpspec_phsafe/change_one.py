"""What CHANGING one person costs PHSafe, from its own sensitivity rather than by group privacy.

Production proves each measurement's rho for adding or removing one person together with a
change of their unit's record (persons `AddOneRow`, units `AddMaxRows(2)`), with noise
sigma^2 = D^2 / (2 rho): D = 2 tau + 2 for a person table, 2 for a unit table. Group privacy
turns that into a change of one person by rho x 4 (two such steps). The counts give x 2:

The change protected here: one person record replaced by any other (in the same household or
another one), with the unit records of their households changed: either any ONE unit record
replaced by any other, or the records of the (at most two) units they leave and join changed in
place (each keeping its MAFID, the unit's identity).

Why rho x 2. Every measurement is one count vector in which each joined, capped row falls in at
most one cell (one region, one iteration code, one data cell), and a household (MAFID) has at
most tau rows in a person table (the cap) and one in a unit table (units with a repeated MAFID
are dropped). Write the new vector minus the old as G - L, G the histogram of the rows gained
and L of the rows lost. Both are nonnegative, so ||G - L||^2 = ||G||^2 + ||L||^2 - 2 G.L
<= |G|^2 + |L|^2 (L1 sizes). Count the gains and losses step by step:

- the person's removal loses at most their row and gains at most the row their departure lets
  past the cap; the insertion gains at most their row and loses at most the one it pushes out:
  at most 2 gained and 2 lost, person tables only;
- a unit record changed in place re-maps at most its household's tau rows (1 in a unit table):
  at most tau lost and tau gained; two such changes, 2 tau of each;
- one unit record replaced by any other: its removal either loses its household's rows or (a
  repeated MAFID becoming unique) gains them, its insertion likewise at its new MAFID: at most
  2 tau gained and 2 tau lost (2 and 2 in a unit table).

So |G|, |L| <= 2 tau + 2 = D in a person table and <= 2 = D in a unit table, the squared L2
sensitivity is at most 2 D^2, and every measurement's rho at most doubles: rho x 2, the figure
the Census Bureau's published S-DHC number implies (2 x 1.257281 = 2.514562, published as 2.515).
It is attained in a unit table (two units moved in place from one cell to another: L2 squared
2^2 + 2^2 = 2 D^2); a person table stays below it, 8 tau^2 <= 2 D^2.

What the bound does NOT cover: two unit records replaced by arbitrary ones (a changed MAFID can
make a repeated MAFID unique at one household and give a unit to another, gaining tau rows at
each, 4 tau + 2 in all). That change is four of production's unit steps; group privacy (x 4)
still bounds it.
"""

from __future__ import annotations
from dpspec.api import ZCDP, ChangeOne, ir


def change_one_budget(spec, params, budget):
    """ChangeOne(rho doubled, reason) for `Mechanism.change_one`; None outside zCDP."""

    if budget is None or budget.kind != "zcdp":
        return None
    reason = (
        "the mechanism's own sensitivity: a changed person (any record, any household), with their "
        "households' unit records changed (one replaced, or the two they leave and join changed in "
        "place), gains at most 2 tau + 2 capped rows and loses at most 2 tau + 2 in a person-table count "
        "(2 and 2 in a unit table), each row in one cell, so the L2 sensitivity squared is at most twice "
        "the add/remove one's and every measurement's rho at most doubles (rho x 2)"
    )
    return ChangeOne(ZCDP(2 * budget.rho), reason)


def change_one_note(total) -> str:
    """A budget note: the change-one figure beside the add/remove one."""

    return (
        f"change one person (any record, any household; one unit record replaced, or the two units they leave "
        f"and join changed in place): rho = 2 x {ir.format_number(total)} = {ir.format_number(2 * total)} by "
        "the mechanism's own sensitivity (gained and lost capped rows each at most the add/remove "
        f"sensitivity, so the L2 sensitivity squared at most doubles); group privacy would give rho x 4 = "
        f"{ir.format_number(4 * total)}"
    )
