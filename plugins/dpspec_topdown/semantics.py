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
- on an AIAN spine every level from the state down to the finest's parent is measured as its
  AIAN and non-AIAN parts, and each part nests in the part of its parent on the same side. Two
  blocks on opposite sides of the AIAN line, even in one block group, lie in different parts at
  every split level, so a person moved between them changes the measurements of every level
  from the split one down (`across_split`). The figures above hold for two blocks on one side;
  the 2020 certificates print only those.

All values are exact Fractions of the declared allocation (the rho_q, not the slightly smaller
cost of rounded-up variances), in the mechanism's native flavor.
"""
from __future__ import annotations

from fractions import Fraction


def attribute_rhos(alloc, schema, labels: dict | None = None) -> list[dict]:
    """One entry per histogram variable: its rho and the (level, query) pairs that spend it,
    each query named by ``labels`` {(level, query): name} when given (as the allocation names it)."""
    labels = labels or {}
    out = []
    for axis, name in enumerate(schema.names):
        spent, queries = Fraction(0), []
        for q in alloc.queries:
            if any(_factor_axis(schema, f) == (axis, True) for f in q.query):
                spent += q.rho
                queries.append({"level": q.level, "query": labels.get((q.level, q.query), q.name)})
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


def across_split_rho(alloc, levels: list[str], split_levels: list[str]) -> dict | None:
    """The rho that protects on which side of the AIAN line a person lives (a move between two
    finest units on opposite sides changes every split level's parts and the finest units), or
    None on a spine without the split."""
    if not split_levels:
        return None
    per_level = {lv: Fraction(0) for lv in levels}
    for q in alloc.queries:
        per_level[q.level] += q.rho
    spent = levels[levels.index(split_levels[0]):]
    return {"finest": levels[-1], "split_levels": list(split_levels),
            "levels": [lv for lv in spent if per_level[lv]], "rho": sum((per_level[lv] for lv in spent), Fraction(0))}
