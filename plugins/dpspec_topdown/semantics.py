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

from dpspec.api import AttributeBudget, AttributeQuery, GeographyBudget, SemanticsRow


def attribute_rhos(alloc, schema, labels: dict | None = None) -> list[AttributeBudget]:
    """One entry per histogram variable: its rho and the (level, query) pairs that spend it,
    each query named by ``labels`` {(level, query): name} when given (as the allocation names it)."""
    return tied_attribute_rhos([("", alloc, schema, labels)])


def tied_attribute_rhos(parts, ties=()) -> list[AttributeBudget]:
    """Per-attribute rhos over several jointly measured tables, attributes tied across them.

    ``parts``: [(prefix, alloc, schema, labels)], the mechanism's own table first with prefix ''
    and each joint table's with 'TABLE: ' (its allocation's keys stripped of the joint mark;
    ``labels`` {(level, query): name} over the stripped keys). ``ties``: pairs of attribute names
    a cross constraint equates at every unit (the units' tenure and the households' `ten`): a
    valid neighbour that changes one changes the other, so each spends the other's queries too
    (`tied_to`). Without ties and joint tables this is `attribute_rhos`."""
    rows, names = [], []
    for prefix, alloc, schema, labels in parts:
        names.extend(prefix + n for n in schema.names)
        for q in alloc.queries:
            axes = {_factor_axis(schema, f) for f in q.query}
            attrs = {prefix + schema.names[axis] for axis, distinguishes in axes if distinguishes}
            rows.append((q.level, (labels or {}).get((q.level, q.query), prefix + q.name), q.rho, attrs))
    group = {n: {n} for n in names}
    for a, b in ties:  # close the ties (a chain of them ties every attribute on it)
        if a in group and b in group:
            merged = group[a] | group[b]
            for n in merged:
                group[n] = merged
    out = []
    for name in names:
        spent = [(level, label, rho) for level, label, rho, attrs in rows if attrs & group[name]]
        out.append(
            AttributeBudget(
                name,
                sum((r for _, _, r in spent), Fraction(0)),
                [AttributeQuery(level, label) for level, label, _ in spent],
                sorted(group[name] - {name}),
            )
        )
    return out


def _factor_axis(schema, factor: str) -> tuple:
    """(axis, distinguishes) of a query factor: does it separate at least two categories?"""
    axis, group_of, size = schema._factor(factor)
    groups = size if group_of is None else len(set(group_of))
    return axis, groups >= 2


def _per_level(alloc, levels: list[str]) -> dict:
    """{level: the rho its queries spend} (0 for a level without queries)."""
    per_level = {lv: Fraction(0) for lv in levels}
    for q in alloc.queries:
        per_level[q.level] += q.rho
    return per_level


def geography_rhos(alloc, levels: list[str]) -> list[GeographyBudget]:
    """For each level U above the finest (top-down order given in ``levels``): the rho that
    protects which finest unit a person is in within their U."""
    per_level = _per_level(alloc, levels)
    finest = levels[-1]
    out = []
    for i in range(len(levels) - 2, -1, -1):  # from the finest's parent up to the root
        below = levels[i + 1 :]
        out.append(
            GeographyBudget(
                levels[i],
                finest,
                [lv for lv in below if per_level[lv]],
                sum((per_level[lv] for lv in below), Fraction(0)),
            )
        )
    return out


def across_split_rho(alloc, levels: list[str], split_levels: list[str]) -> SemanticsRow | None:
    """The rho that protects on which side of the AIAN line a person lives (a move between two
    finest units on opposite sides changes every split level's parts and the finest units), with
    the words the reports print for it (`description`), or None on a spine without the split."""
    if not split_levels:
        return None
    per_level = _per_level(alloc, levels)
    spent = levels[levels.index(split_levels[0]) :]
    finest = levels[-1]
    return SemanticsRow(
        extra={"finest": finest, "split_levels": list(split_levels)},
        levels=[lv for lv in spent if per_level[lv]],
        rho=sum((per_level[lv] for lv in spent), Fraction(0)),
        description=f"a {finest} on the other side of the AIAN line, even in the same {split_levels[-1]} "
        f"(the AIAN and non-AIAN parts of every {', '.join(split_levels)} are measured apart; "
        f"the rows 'within its ...' hold for two {finest}s on one side)",
    )
