"""Per-attribute and per-geography budgets of a TopDown allocation (the certificates' semantics).

The 2020 P.L. 94-171 production certificates print, beside the total, the budget that protects
one attribute of a person (their hhgq, their race ...) and the budget that protects where in the
hierarchy a person lives ("Block-within-Tract": which block of their tract). The first seed
paper's per-attribute analysis (Part III, §4.2) is the same idea: a neighbour that differs only
in one attribute moves a person between cells of the queries that distinguish that attribute
and of no other query, so only those queries' budgets compose.

- attribute a: the sum of rho_q over every (level, query) whose factor on a's axis has at
  least two groups (a total, or a recode that puts every category in one group, cannot tell
  the two neighbours apart). `detailed` involves every attribute.
- geography "a block within its U": a person moved between two blocks of one unit of level U
  changes the measurements of every level strictly below U and of none at U or above (both
  blocks are in the same U), so rho is the sum of the level budgets below U.

All values are exact Fractions of the declared allocation (the rho_q, not the slightly smaller
cost of rounded-up variances), in the mechanism's native flavor.
"""
from __future__ import annotations

from fractions import Fraction


def attribute_rhos(alloc, schema) -> list[dict]:
    """One entry per histogram variable: its rho and the (level, query) pairs that spend it."""
    out = []
    for axis, name in enumerate(schema.names):
        spent, queries = Fraction(0), []
        for q in alloc.queries:
            if any(_factor_axis(schema, f) == (axis, True) for f in q.query):
                spent += q.rho
                queries.append({"level": q.level, "query": q.name})
        out.append({"attribute": name, "rho": spent, "queries": queries})
    return out


def _factor_axis(schema, factor: str) -> tuple:
    """(axis, distinguishes) of a query factor: does it separate at least two categories?"""
    axis, group_of, size = schema._factor(factor)
    groups = size if group_of is None else len(set(group_of))
    return axis, groups >= 2


def geography_rhos(alloc, levels: list[str]) -> list[dict]:
    """For each level U above the finest (top-down order given in ``levels``): the rho that
    protects which finest unit a person is in within their U."""
    per_level = {lv: Fraction(0) for lv in levels}
    for q in alloc.queries:
        per_level[q.level] += q.rho
    finest = levels[-1]
    out = []
    for i in range(len(levels) - 2, -1, -1):  # from the finest's parent up to the root
        below = levels[i + 1:]
        out.append({"within": levels[i], "finest": finest, "levels": [lv for lv in below if per_level[lv]],
                    "rho": sum((per_level[lv] for lv in below), Fraction(0))})
    return out
