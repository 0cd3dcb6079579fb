"""Equality to a product already released: a marginal of this release must reproduce it exactly.

Why: the 2020 DHC persons file sits on the P.L. 94-171 file released months earlier; the
DHC's block-level counts by voting age, Hispanic origin, race and group-quarters type must be
the published P.L. 94 ones, or two official products would disagree (the first seed's
"previously released statistics P, H(Z) = P"). The released product is public, so holding the
new release to it spends no budget; it is a constraint like an invariant whose targets come
from the released table instead of the confidential data, summed up the tree to every level.

Targets are kept sparse (finest units x groups of the marginal, CSR): a node receives only its
children's rows, dense.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd
import scipy.sparse as sp

from dpspec.api import shown, LazyModule

from ..measurement.allocation import query_name
from ..measurement.histogram import aggregate
from ..broken import Broken
from ..wording import counted
from ..geography.spine import group_sum, unit_groups

# heavy libraries, imported on first use
_csgraph = LazyModule("scipy.sparse.csgraph", "_csgraph", globals())


def factor_labels(schema, factor: str) -> list:
    """The values a factor of a marginal takes, in group order: a variable's categories or a
    recode's group labels."""
    if factor in schema.names:
        return list(schema.categories[schema.names.index(factor)])
    for r in schema.recodes:
        if r.name == factor:
            return list(r.labels)
    raise KeyError(factor)


def group_text(schema, query: Sequence[str], group: int) -> str:
    """A marginal's group as the reviewer reads it, "hhgq8lev=0, votingage=1" ("" for the total)."""
    labels = [factor_labels(schema, f) for f in query]
    if not labels:
        return ""
    coords = np.unravel_index(int(group), [len(v) for v in labels])
    return ", ".join(f"{f}={shown(v[int(i)])}" for f, v, i in zip(query, labels, coords))


def released_targets(name: str, counts: pd.DataFrame, finest: str, query: Sequence[str], schema, hier) -> sp.csr_matrix:
    """(finest units x groups of `query`) int64 CSR of the released counts.

    ``counts``: the released table counted by (finest, *query factors) as `count`. A value
    that is not a category (or recode label) of its factor, or a finest unit the spine does
    not hold, is a DataError naming it."""
    q = schema.canonical(query)
    sizes = [len(factor_labels(schema, f)) for f in q]
    coords = []
    for f in q:
        labels = factor_labels(schema, f)
        index = pd.Index([str(v) for v in labels]).get_indexer(counts[f].astype(str).to_numpy())
        if (index < 0).any():
            bad = counts[f].to_numpy()[index < 0][0]
            raise Broken(
                f"equal_to {name!r}: {f} = {shown(bad)} in the released table is not one of {labels}",
                ("equal_to", name),
            )
        coords.append(index)
    group = np.ravel_multi_index(coords, sizes) if q else np.zeros(len(counts), dtype=np.int64)
    last = hier.levels[-1]
    codes = counts[finest].astype(str).to_numpy()
    unit = pd.Index(np.asarray(last.codes).astype(str)).get_indexer(codes)
    if (unit < 0).any():
        raise Broken(
            f"equal_to {name!r}: the released table has persons in {finest} {shown(codes[unit < 0][0])}, "
            f"which holds no one in the data TopDown runs on (its spine is built from the data)",
            ("equal_to", name),
        )
    n_groups = int(np.prod(sizes)) if q else 1
    out = sp.csr_matrix(
        (counts["count"].to_numpy(dtype=np.int64), (unit, group)), shape=(last.n_units, n_groups), dtype=np.int64
    )
    out.sum_duplicates()
    return out


def per_level(target: sp.csr_matrix, hier) -> list[sp.csr_matrix]:
    """The finest units' targets summed to every level (index = level)."""
    last = len(hier.levels) - 1
    out = [None] * (last + 1)
    out[last] = target
    for k in range(last, 0, -1):
        out[k - 1] = aggregate(out[k], hier.levels[k].parent, hier.levels[k - 1].n_units)
    return out


def _regroup(schema, query: tuple, coarser: tuple) -> sp.csr_matrix:
    """(groups of query x groups of coarser) 0/1: the coarser marginal's group of each group
    (coarser's factors within query's)."""
    n_coarse = schema.marginal_size(coarser)
    # one int64 code per (group, coarser group) pair: a 1-d unique, far cheaper than unique rows
    rows, cols = np.divmod(np.unique(schema.groups(query) * n_coarse + schema.groups(coarser)), n_coarse)
    return sp.csr_matrix(
        (np.ones(len(rows), dtype=np.int64), (rows, cols)), shape=(schema.marginal_size(query), n_coarse)
    )


def check_bounds(name: str, query: tuple, target: sp.csr_matrix, schema, level_bounds, hier) -> None:
    """DataError when the released product breaks a facility bound it determines (the bound's
    factors within the product's): no release could keep both."""
    last = len(hier.levels) - 1
    for bound_name, _, _, q, per_level in level_bounds:
        if not set(q) <= set(query):
            continue
        got = np.asarray((target @ _regroup(schema, query, q)).toarray(), dtype=np.int64)
        lo, hi = per_level[last]
        bad = np.argwhere((got < lo) | (got > hi))
        if bad.size:
            u, g = bad[0]
            raise Broken(
                f"equal_to {name!r}: the released product breaks the constraint {bound_name!r} at "
                f"{hier.levels[last].name} {shown(hier.levels[last].codes[u])} (cell "
                f"{group_text(schema, q, g) or 'total'} of {query_name(q)!r}): released {int(got[u, g])}, "
                f"bounds [{int(lo[u, g])}, {hi[u, g]:g}]",
                ("equal_to", name),
                ("constraints", bound_name),
            )


def shared_totals(schema, query: tuple, other: tuple) -> tuple[sp.csr_matrix, sp.csr_matrix, list]:
    """What marginals `query` and `other` both determine: the finest groups of cells that are
    unions of groups of each (the parts of the graph whose edges are the pairs of groups sharing
    a cell). Returns (groups of query x parts) and (groups of other x parts) 0/1 maps, and per
    part the group of `other` it is, or else of `query`, or None (a union of several of each).

    Why: an invariant and an equality target must agree on every total both fix. When the
    invariant's factors are within the target's, the parts are the invariant's groups; two
    recodes of one variable that nest group by group (the units' gqhh_vect and h1) share the
    housing units' total and each group-quarters total, which a test on names alone misses."""
    n_q, n_o = schema.marginal_size(query), schema.marginal_size(other)
    rows, cols = np.divmod(np.unique(schema.groups(query).astype(np.int64) * n_o + schema.groups(other)), n_o)
    graph = sp.csr_matrix((np.ones(len(rows), dtype=np.int8), (rows, n_q + cols)), shape=(n_q + n_o, n_q + n_o))
    n, part = _csgraph.connected_components(graph, directed=False)
    # parts numbered as the other marginal's groups come: the first disagreement is its first group's
    both = np.concatenate([part[n_q:], part[:n_q]])
    rank = np.empty(n, dtype=np.int64)
    rank[np.argsort(np.unique(both, return_index=True)[1])] = np.arange(n)
    part_o, part_q = rank[part[n_q:]], rank[part[:n_q]]
    to_parts = [
        sp.csr_matrix((np.ones(len(p), dtype=np.int64), (np.arange(len(p)), p)), shape=(len(p), n))
        for p in (part_q, part_o)
    ]
    count_q, count_o = np.bincount(part_q, minlength=n), np.bincount(part_o, minlength=n)
    named = [
        ("other", int(np.flatnonzero(part_o == k)[0]))
        if count_o[k] == 1
        else ("query", int(np.flatnonzero(part_q == k)[0]))
        if count_q[k] == 1
        else None
        for k in range(n)
    ]
    return to_parts[0], to_parts[1], named


def check_against(name: str, query: tuple, targets: list, schema, hier, conf: list, invariants, zero_cells) -> None:
    """DataError when the released product contradicts what this release must also keep: an
    invariant on a total they both determine (shared_totals), or a structural zero."""

    eq_groups = schema.groups(query)
    n_eq = schema.marginal_size(query)
    for lvl, q in invariants:
        from_query, from_invariant, named = shared_totals(schema, query, q)
        groups, n = unit_groups(hier.levels[lvl])
        released = group_sum(np.asarray((targets[lvl] @ from_query).toarray(), dtype=np.int64), groups, n)
        truth = group_sum(
            np.asarray((conf[lvl] @ schema.indicator(q) @ from_invariant).toarray(), dtype=np.int64), groups, n
        )
        bad = np.argwhere(released != truth)
        if bad.size:
            u, g = bad[0]
            level = hier.levels[lvl]
            code = (level.labels if level.labels is not None else level.codes)[np.flatnonzero(groups == u)[0]]
            which = named[g]
            text = (
                ""
                if which is None
                else group_text(schema, q, which[1])
                if which[0] == "other"
                else group_text(schema, query, which[1])
            )
            cell = f" (cell {text})" if text else ""
            raise Broken(
                f"equal_to {name!r}: the released product disagrees with the invariant "
                f"{query_name(q)!r} at {level.name} {shown(code)}{cell}: released "
                f"{int(released[u, g])}, invariant {int(truth[u, g])}",
                ("equal_to", name),
                ("invariant", level.name, q),
            )
    if zero_cells is not None:
        allowed = np.bincount(eq_groups[~zero_cells], minlength=n_eq) > 0
        finest = targets[-1].tocoo()
        bad = ~allowed[finest.col] & (finest.data > 0)
        if bad.any():
            i = np.flatnonzero(bad)[0]
            level = hier.levels[-1]
            raise Broken(
                f"equal_to {name!r}: the released product has {counted(finest.data[i], 'person')} in "
                f"{level.name} {shown(level.codes[finest.row[i]])}, cell "
                f"{group_text(schema, query, finest.col[i])} of {query_name(query)!r}, where every "
                "cell is a structural zero",
                ("equal_to", name),
                ("setting", "structural_zeros"),
            )
