"""Invariants and equality targets that an earlier outer pass's fixed margins already imply.

Why: once an outer pass has fixed a margin exactly, a later pass need not state any constraint
whose groups that margin refines and whose totals it already adds up to; such a constraint only
adds redundant equality rows, which leave the interior point's KKT system singular up to its
regularization and cost it steps. Production drops them before it solves a later outer pass
(DAS_2020_DHC_Production_Code, das_decennial/programs/optimization/geo_optimizer_decomp.py:
removeRedundantConstrsAndFindSubModels, used by DataIndUserSpecifiedQueriesNPassDecomp and
MultipassRounderDecomp, which the DHC configurations name). Measured on the DHC persons' top node
(docs/performance/bench_topdown_dhc.md): its second outer pass holds four fixed margins, which
imply the state total and the P.L. 94 equality target.
"""
from __future__ import annotations

import attrs
import numpy as np


def drop_implied(task, vc: np.ndarray, vcell: np.ndarray, fixed):
    """``task`` without the constraints some fixed margin implies (``fixed``: (key of every
    variable, number of keys, fixed value per key))."""
    kept = tuple(con for con in task.constraints
                 if not any(_implies(margin, con, vc, vcell) for margin in fixed))
    return task if len(kept) == len(task.constraints) else attrs.evolve(task, constraints=kept)


def _implies(margin, con, vc: np.ndarray, vcell: np.ndarray) -> bool:
    """Whether each of the margin's groups lies inside one of ``con``'s (per child set) and the
    fixed values add up to ``con``'s targets wherever a variable is."""
    key, n_keys, value = margin
    if key.size == 0:
        return False
    ckey = con.child_set[vc] * con.n_groups + con.groups[vcell]
    of_key = np.full(n_keys, -1, dtype=np.int64)
    of_key[key] = ckey
    if not np.array_equal(of_key[key], ckey):  # a fixed group straddles two of con's groups
        return False
    present = np.unique(key)
    sums = np.bincount(of_key[present], weights=np.asarray(value, dtype=np.float64)[present],
                       minlength=con.target.size)
    used = np.unique(of_key[present])
    return bool(np.array_equal(sums[used], con.target.ravel()[used].astype(np.float64)))
