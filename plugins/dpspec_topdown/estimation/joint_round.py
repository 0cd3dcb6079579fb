"""Round two histograms solved jointly in one problem, as production does.

Why: production's rounder works on the stacked household and unit histograms
(L2PlusRounder_interleaved on both, sequential_optimizers.py:461-506 of das_decennial; the
cross constraint enters the rounding as a row with coefficients (1, -1)), so neither table's
tenure sides are fixed before the other's are rounded. Rounding them one after the other also
keeps every constraint, but then the first table's integers decide the second's side.

How: both tables' variables side by side in one rounding problem (`rounding._round`: the
least distance to the fit, each variable between the floor and the ceiling of its fit, an LP
first and a MILP if its vertex is not integral). Each table's rows are stated as margins over
the stacked variables, its own variables keyed as in its own rounding and the other table's on
a spare key without bounds: the children sums (per active cell), the invariants and equality
targets, the bounds, each child's total within floor/ceil of its fit (the stacked children are
the first table's then the second's), and the margins the caller holds (an outer pass's fixed
and rounded answers). Each cross constraint is one row per (child, group): its left side's
variables with coefficient +1, its right side's with -1, equal to 0.
"""

from __future__ import annotations

from typing import Sequence

import attrs
import numpy as np

from dpspec.api import MechanismError

from . import rounding
from .rows import bound_margin
from .joint_problem import _side

_INF = np.inf


def _own_rows(task, variables, margins) -> list:
    """One table's rows as margins over its own variables: (key, n_keys, lo, hi[, coef])."""
    cells, vc, va, vcell = variables
    out = []
    if task.parent is not None:
        target = np.asarray(task.parent[cells], dtype=np.float64)
        out.append((va.astype(np.int64), cells.size, target, target))
    for con in task.constraints:
        target = con.target.ravel().astype(np.float64)
        out.append(
            ((con.child_set[vc] * con.n_groups + con.groups[vcell]).astype(np.int64), target.size, target, target)
        )
    out += [bound_margin(b, vc, vcell) for b in task.bounds]
    return out + list(margins)


def _stacked(margin, first: bool, n_a: int, n_b: int):
    """A table's margin over the stacked variables: the other table's on a spare, free key."""
    key, n_keys, lo, hi, *coef = margin
    spare = np.full(n_b if first else n_a, n_keys, dtype=np.int64)
    key = np.concatenate([key, spare] if first else [spare, key])
    out = (
        key,
        n_keys + 1,
        np.append(np.asarray(lo, dtype=np.float64), -_INF),
        np.append(np.asarray(hi, dtype=np.float64), _INF),
    )
    if coef:
        zero = np.zeros(spare.size)
        out += (np.concatenate([coef[0], zero] if first else [zero, coef[0]]),)
    return out


def _cross_rows(cross: Sequence, var_a, var_b, n_children: int) -> list:
    """Each cross constraint: per (child, group), left side (+1) minus right side (-1) = 0."""
    (_, vc_a, _, vcell_a), (_, vc_b, _, vcell_b) = var_a, var_b
    out = []
    for c in cross:
        n_keys = n_children * c.n_groups + 1
        key = np.full(vc_a.size + vc_b.size, n_keys - 1, dtype=np.int64)
        coef = np.zeros(key.size)
        ua, ka = _side(c.left, vc_a, vcell_a, c.n_groups)
        ub, kb = _side(c.right, vc_b, vcell_b, c.n_groups)
        key[ua], coef[ua] = ka, 1.0
        key[vc_a.size + ub], coef[vc_a.size + ub] = kb, -1.0
        zero = np.zeros(n_keys - 1)
        out.append((key, n_keys, np.append(zero, -_INF), np.append(zero, _INF), coef))
    return out


def round_jointly(task_a, xa, var_a, task_b, xb, var_b, cross: Sequence, margins_a=(), margins_b=(), fail=True):
    """(counts_a, counts_b, seconds, used_milp): both tables' integer children over their
    variables in one rounding problem; every row of each table and every cross constraint exact,
    each margin of ``margins_a`` / ``margins_b`` held. With ``fail=False`` None counts when
    there is no integer solution, else a MechanismError."""
    n_a, n_b, nc = var_a[1].size, var_b[1].size, task_a.n_children
    rows = [_stacked(m, True, n_a, n_b) for m in _own_rows(task_a, var_a, margins_a)]
    rows += [_stacked(m, False, n_a, n_b) for m in _own_rows(task_b, var_b, margins_b)]
    rows += _cross_rows(cross, var_a, var_b, nc)
    # the stacked children: the first table's, then the second's, so each keeps its own total
    vc = np.concatenate([var_a[1], var_b[1] + nc]).astype(np.int64)
    cells = np.arange(n_a + n_b, dtype=np.int64)
    stacked = attrs.evolve(
        task_a, n_children=2 * nc, n_cells=cells.size, parent=None, constraints=(), bounds=(), zero_cells=None
    )
    x = np.concatenate([xa, xb])
    counts, seconds, milp = rounding._round(stacked, x, cells, vc, cells, cells, margins=tuple(rows), fail=False)
    if counts is None:
        if not fail:
            return None, None, seconds, True
        raise MechanismError(
            f"joint node {task_a.key}: no integer split of both tables keeps their constraints and "
            f"the cross constraints ({', '.join(c.name for c in cross)})"
        )
    return counts[:n_a], counts[n_a:], seconds, milp
