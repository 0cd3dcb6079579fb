"""Constraints that an earlier outer pass's fixed margins already imply, and so are not stated again.

Why: once an outer pass has fixed a margin exactly, a later pass need not state a constraint
whose groups that margin refines and whose totals the fixed values already meet. Such a
constraint only adds redundant equality rows. These leave the interior point's KKT system
singular up to its regularization, cost it steps, and tie together parts of the problem that are
otherwise independent (decompose.py). Production drops them before it solves a later outer
pass (DAS_2020_DHC_Production_Code, das_decennial/programs/optimization/geo_optimizer_decomp.py:
removeRedundantConstrsAndFindSubModels; a cross constraint between two histograms whose sides
are fixed is turned into constraints on one histogram by removeConstrsWithElementsEqualToNegativeOne
and then dropped the same way).

A single table's later passes drop them from both fit and rounding; the rounding keeps the fixed
margins exactly, so they still hold. A joint node drops them from its fit only.
"""

from __future__ import annotations

import attrs
import numpy as np


def fixed_sums(ckey: np.ndarray, n_ckeys: int, fixed) -> np.ndarray | None:
    """The sums over the groups ``ckey`` gives the variables (-1: a variable in no group) as the
    first fixed margin that determines them adds them up. None if no fixed margin does, that is,
    if every fixed margin has some group straddling two of ckey's groups, or a group and none."""
    for key, n_keys, value in fixed:
        if key.size == 0:
            continue
        of_key = np.full(n_keys, -2, dtype=np.int64)
        of_key[key] = ckey
        if not np.array_equal(of_key[key], ckey):
            continue
        present = np.unique(key)
        group = of_key[present]
        inside = group >= 0
        return np.bincount(
            group[inside], weights=np.asarray(value, dtype=np.float64)[present][inside], minlength=n_ckeys
        )
    return None


def drop_implied(task, vc: np.ndarray, vcell: np.ndarray, fixed):
    """``task`` without the invariants and equality targets that a fixed margin implies (``fixed``:
    (key of every variable, number of keys, fixed value per key))."""
    kept = tuple(con for con in task.constraints if not _implies(con, vc, vcell, fixed))
    return task if len(kept) == len(task.constraints) else attrs.evolve(task, constraints=kept)


def _implies(con, vc: np.ndarray, vcell: np.ndarray, fixed) -> bool:
    ckey = con.child_set[vc] * con.n_groups + con.groups[vcell]
    sums = fixed_sums(ckey, con.target.size, fixed)
    if sums is None:
        return False
    used = np.unique(ckey)
    return bool(np.array_equal(sums[used], con.target.ravel()[used].astype(np.float64)))


def cross_implied(cross, var_a, var_b, fixed_a, fixed_b, n_children: int) -> bool:
    """Whether both sides of a cross constraint (joint.CrossConstraint) are fixed by the two
    tables' fixed margins, at equal values in every child and group."""
    n_keys = n_children * cross.n_groups
    sums = []
    for groups, (_, vc, _, vcell), fixed in ((cross.left, var_a, fixed_a), (cross.right, var_b, fixed_b)):
        g = groups[vcell]
        side = fixed_sums(np.where(g >= 0, vc * cross.n_groups + g, -1), n_keys, fixed)
        if side is None:
            return False
        sums.append(side)
    return bool(np.array_equal(sums[0], sums[1]))
