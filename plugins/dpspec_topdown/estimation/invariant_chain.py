"""TopDown's rule that its invariant queries nest, decided from the queries alone.

Why: top-down can always split a parent among its children when the invariant queries form a
chain (each one's factors contain the previous one's): per group of the finest query it is a
transportation problem. Two queries that do not nest (hhgq and votingage per block) fix two
margins of a three-way table, which the already fixed parent may not admit. The rule needs no
data, so `dpspec check` reports it at the invariant's line (plugin.check) and the engine keeps
it as a backstop for callers that skip the check (engine._canonical_invariants). No numpy: the
check runs on every keystroke in an editor.
"""

from __future__ import annotations

from typing import Sequence

from dpspec.api import SpecError

from ..measurement.allocation import query_name


def unnested(queries: Sequence[tuple]) -> tuple[int, int] | None:
    """(i, j), i < j, for the first query j (in the given order) whose factors neither hold nor are
    held by those of an earlier query i; None when the queries form a chain (the order's first
    pair for a set of queries that is no chain, so the check and the engine name the same two)."""
    for j, later in enumerate(queries):
        for i, earlier in enumerate(queries[:j]):
            if not (set(earlier) <= set(later) or set(later) <= set(earlier)):
                return i, j
    return None


def why(earlier: tuple, later: tuple, schema) -> str:
    """The reason two unnested invariant queries fail, and the join to declare instead."""
    try:
        join = f"; declare their join ({query_name(schema.canonical(set(earlier) | set(later)))!r}) instead"
    except SpecError:  # a recode and its own variable: no join to suggest
        join = ""
    return (
        "TopDown needs the invariant queries to form a chain (each one's variables within the next "
        f"one's), or a parent's histogram may admit no split among its children{join}"
    )


def check_chain(queries: Sequence[tuple], schema) -> None:
    """SpecError (without a location: the engine's backstop) when `queries` form no chain."""
    pair = unnested(queries)
    if pair is not None:
        earlier, later = queries[pair[0]], queries[pair[1]]
        raise SpecError(
            f"invariants {query_name(earlier)!r} and {query_name(later)!r} are not nested: "
            + why(earlier, later, schema)
        )
