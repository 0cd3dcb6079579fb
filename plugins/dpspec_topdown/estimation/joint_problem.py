"""The joint least-squares problem of two tables at one node (joint.py solves it): both tables'
problems side by side, tied by one row per (child, group) of every cross constraint."""

from __future__ import annotations

from typing import Sequence

import attrs
import numpy as np
import scipy.sparse as sp

from . import postprocess
from .postprocess import NodeQP, NodeTask, _node_variables
from .rows import _Rows, _sum_rows


@attrs.frozen
class CrossConstraint:
    """At every child and group g: sum of the left table's cells in g = sum of the right's."""

    name: str
    left: np.ndarray  # (n_cells of the left table,) group of every cell, -1 outside the side
    right: np.ndarray  # (n_cells of the right table,) group of every cell, -1 outside the side
    n_groups: int


def _side(groups, vc, vcell, n_groups):
    """(variables on the side, their (child, group) keys)."""
    g = groups[vcell]
    use = np.flatnonzero(g >= 0)
    return use, vc[use] * n_groups + g[use]


def joint_qp(
    task_a: NodeTask,
    queries_a,
    task_b: NodeTask,
    queries_b,
    cross: Sequence[CrossConstraint],
    variables_a=None,
    variables_b=None,
) -> tuple[NodeQP, int]:
    """(problem, offset): one QP, both tables' fits side by side (the second table's variables
    from ``offset`` on), tied by the cross constraints' rows."""
    va_ = variables_a if variables_a is not None else _node_variables(task_a)
    vb_ = variables_b if variables_b is not None else _node_variables(task_b)
    pa = postprocess.build_node_qp(task_a, queries_a, va_)
    pb = postprocess.build_node_qp(task_b, queries_b, vb_)
    n = pa.n_var + pb.n_var
    rows = _Rows()
    for c in cross:
        ua, ka = _side(c.left, va_[1], va_[3], c.n_groups)
        ub, kb = _side(c.right, vb_[1], vb_[3], c.n_groups)
        keys = np.concatenate([ka, kb])
        local, present = _sum_rows(keys, task_a.n_children * c.n_groups)
        rows.add(
            local,
            np.concatenate([ua, pa.n_var + ub]),
            np.concatenate([np.ones(ua.size), -np.ones(ub.size)]),
            np.zeros(present.size),
            np.zeros(present.size),
        )
    a_c, lo_c, hi_c = rows.matrix(n)
    a = sp.vstack([sp.block_diag([pa.a, pb.a], format="csc"), a_c]).tocsc()
    return NodeQP(
        hess=np.concatenate([pa.hess, pb.hess]),
        cost=np.concatenate([pa.cost, pb.cost]),
        lower=np.concatenate([pa.lower, pb.lower]),
        upper=np.concatenate([pa.upper, pb.upper]),
        a=a,
        lo=np.concatenate([pa.lo, pb.lo, lo_c]),
        hi=np.concatenate([pa.hi, pb.hi, hi_c]),
        n_x=pa.n_x,
    ), pa.n_var


def side_sums(hist: sp.spmatrix, groups: np.ndarray, n_groups: int) -> np.ndarray:
    """Dense (units x n_groups) sums of one side of a cross constraint over a histogram."""
    on = np.flatnonzero(groups >= 0)
    indicator = sp.csr_matrix((np.ones(on.size, dtype=np.int64), (on, groups[on])), shape=(groups.size, n_groups))
    return np.asarray((hist @ indicator).toarray(), dtype=np.int64)
