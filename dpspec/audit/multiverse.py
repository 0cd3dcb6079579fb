"""The refinement order of multiverses, read from the invariants two specs declare.

A multiverse built from invariants partitions the domain by their values. One partition
shatters (refines) another when every universe of the first lies inside a universe of the
second, which holds when the first set of invariants determines the second. A count by some
columns determines a count by fewer columns of the same table, and, because a nested column
(`county : category in state`, or a geography `state > county`) determines its parent, a count
by county also determines the count by state. We close each declared count's columns under
that "determines" relation (dpspec.check.invariants) and compare.
"""

from __future__ import annotations

from dpspec import ir
from dpspec.check.invariants import closure, determines, implied_by, parents, undetermined  # noqa: F401

# Geography levels fine enough that exact counts there single out small groups of people.
FINE_LEVEL_NAMES = frozenset(
    {
        "block",
        "blocks",
        "block_group",
        "blockgroup",
        "bg",
        "tract",
        "tracts",
        "census_block",
        "census_tract",
        "tabblock",
    }
)


def merged_domain(*domains: ir.Domain | None) -> ir.Domain | None:
    """One domain holding every table and nesting of several (the first one wins a name)."""
    present = [d for d in domains if d is not None]
    if not present:
        return None
    tables: dict[str, ir.Table] = {}
    for d in present:
        for t in d.tables:
            tables.setdefault(t.name, t)
    geography = next((d.geography for d in present if d.geography is not None), None)
    first = present[0]
    return ir.Domain(first.name, first.description, first.stage, tuple(tables.values()), geography)


def refinement(spec_invariants, baseline_invariants, domain: ir.Domain | None) -> str:
    """How the spec's multiverse relates to the baseline's.

    "same": each set determines the other; "finer": the spec's invariants determine the
    baseline's but not the reverse (the spec's multiverse shatters the baseline's); "coarser":
    the reverse; "incomparable": neither determines the other.
    """
    spec_fixes_base = not undetermined(baseline_invariants, spec_invariants, domain)
    base_fixes_spec = not undetermined(spec_invariants, baseline_invariants, domain)
    if spec_fixes_base and base_fixes_spec:
        return "same"
    if spec_fixes_base:
        return "finer"
    if base_fixes_spec:
        return "coarser"
    return "incomparable"


def geography_levels(query: ir.CountQuery, domain: ir.Domain | None) -> list[str]:
    """The geography columns a count is broken down by (declared levels or fine-sounding names)."""
    levels = domain.geography.levels if domain and domain.geography else ()
    return [c for c in query.columns if c in levels or c.lower() in FINE_LEVEL_NAMES]


def granularity(query: ir.CountQuery, domain: ir.Domain | None) -> str:
    """Plain words for how fine a count is: its finest geography level and other columns."""
    levels = domain.geography.levels if domain and domain.geography else ()
    geo = geography_levels(query, domain)
    finest = max(geo, key=lambda c: levels.index(c) if c in levels else len(levels)) if geo else None
    others = [c for c in query.columns if c not in geo]
    if finest is None:
        where = "the whole domain" if not query.columns else "no geography"
    else:
        where = f"{finest} level"
        if finest in levels and levels.index(finest) == len(levels) - 1 and len(levels) > 1:
            where += " (the finest declared)"
    if others:
        return f"{where}, by {', '.join(others)}"
    return where
