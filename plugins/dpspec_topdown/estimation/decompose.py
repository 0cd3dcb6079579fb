"""Production's sub-models: a later outer pass's fit solved in independent parts, a batch at a time.

Why: once earlier outer passes have fixed their margins exactly, a later pass's least squares
falls apart into independent parts. Each part is a set of cells that no row ties to any cell
outside it: not a fixed margin, a parent sum, an invariant, a held answer, nor a measured group.
Production finds these sub-models from the rows of its constraints and queries and solves each
on its own (DAS_2020_DHC_Production_Code, das_decennial/programs/optimization/
geo_optimizer_decomp.py: findSubModels, after removeRedundantConstrsAndFindSubModels; see
redundant.py). The DHC households' top node is the case that needs it: its last outer pass fits
the detailed histogram of both AIAN parts of a state (2.45 million cells) with the household
type's margins fixed, and one interior-point system over all of it peaked above 4 GB.

Parts are gathered into batches of at least ``BATCH`` variables, which keeps the solver calls
few. A node whose parts all fit in one batch is solved exactly as before.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components

from dpspec.api import LazyModule

from .qp import NodeQP
from .forced_zeros import drop_forced_zeros

# imported on first use: at import they would load pandas, pyarrow with this module
_postprocess = LazyModule("dpspec_topdown.estimation.postprocess", "_postprocess", globals())

BATCH = 50_000  # variables per solver call, at least (a part is never split)


def parts(problem: NodeQP) -> tuple[np.ndarray, np.ndarray]:
    """(part of every variable, part of every row): the connected components of the graph whose
    edges join each row to its variables (an empty row is a part of its own)."""
    n, a = problem.n_var, problem.a.tocoo()
    m = a.shape[0]
    graph = sp.coo_matrix((np.ones(a.nnz), (a.col, n + a.row)), shape=(n + m, n + m))
    _, label = connected_components(graph, directed=False)
    return label[:n], label[n:]


def batches(of_variable: np.ndarray, size: int | None = None) -> np.ndarray:
    """Each part's batch: parts taken in order, a new batch once the current one holds ``size``
    (default ``BATCH``) variables."""
    size = BATCH if size is None else size
    per_part = np.bincount(of_variable)
    filled = np.cumsum(per_part)
    return (filled - per_part) // size  # the batch a part starts in: parts never straddle


def solve_by_parts(problem: NodeQP, solve):
    """(x, optimal, seconds, solver, status) as ``solve`` returns them, ``problem`` solved a batch of
    parts at a time (see the module doc); x is None if some batch has no solution."""
    of_variable, of_row = parts(problem)
    batch_of_part = batches(of_variable)
    if batch_of_part.size == 0 or batch_of_part.max() == 0:
        return solve(problem)
    var_batch = batch_of_part[of_variable]
    row_batch = np.where(of_row < batch_of_part.size, batch_of_part[np.minimum(of_row, batch_of_part.size - 1)], 0)
    a = problem.a.tocsr()
    x = np.zeros(problem.n_var)
    seconds, optimal, used, status = 0.0, True, "clarabel", None
    for b in range(int(batch_of_part.max()) + 1):
        cols = np.flatnonzero(var_batch == b)
        rows = np.flatnonzero(row_batch == b)
        if cols.size == 0:
            continue
        sub = NodeQP(
            hess=problem.hess[cols],
            cost=problem.cost[cols],
            lower=problem.lower[cols],
            upper=problem.upper[cols],
            a=a[rows][:, cols].tocsc(),
            lo=problem.lo[rows],
            hi=problem.hi[rows],
            n_x=int(np.count_nonzero(cols < problem.n_x)),
        )
        xs, ok, sec, solver, status = solve(sub)
        seconds += sec
        if xs is None:
            return None, False, seconds, solver, status
        x[cols] = xs
        optimal &= bool(ok)
        used = "highs" if solver == "highs" else used
    return x, optimal, seconds, used, status


def solve_pass(problem: NodeQP, later: bool):
    """A pass's fit: in a later outer pass (``later``: earlier passes fixed margins) without the
    variables the fixed margins force to 0 (forced_zeros.py) and by parts, else as one problem,
    as production solves its first outer pass."""
    if not later:
        return _postprocess.solve_qp(problem)
    reduced, expand = drop_forced_zeros(problem)
    x, optimal, seconds, solver, status = solve_by_parts(reduced, _postprocess.solve_qp)
    return expand(x), optimal, seconds, solver, status
