"""PDLP, the first-order solver TopDown's solver rule gives the fits whose cells form a grid.

Why: on a DHC block fit held to the P.L. 94 release each cell is tied across the block group's
children and within its child, so an interior point's factor fills in whatever the ordering
(qp_choice.RULE) and each of its Newton steps costs close to a dense one. PDLP (OR-Tools'
primal-dual hybrid gradient, Applegate et al. 2021) factors nothing: its steps are products with
the constraint matrix, whose cost a grid does not raise. On the captured DHC block fits it took
0.31-1.20x Clarabel's time at the tolerance below (about 0.5x on the 10k run's, 0.76x summed
over 13 of the 1M run's; docs/guides/dhc-topdown.md); on fits that are not grids it took up to
29x, so the rule names it for grids only.

Exactness: PDLP stops when its relative primal residual, dual residual and duality gap are all
under ``TOL``; the caller then takes its answer only if no row or bound is violated by more
than the rounding absorbs (qp.violation_limit), as for every solver, and Clarabel solves the fit
otherwise. Iterates are projected onto the bounds, so cells are never negative. The answer is a
function of the problem alone: one thread and an iteration limit, no time limit, so neither the
machine's speed nor its load changes a release. OR-Tools is already a dependency (the rounding's
min-cost flow, network.py).
"""

from __future__ import annotations

import time

import numpy as np

from dpspec.api import LazyModule

from .qp import NodeQP

# heavy libraries, imported on first use
_pdlp = LazyModule("ortools.pdlp.python.pdlp", "_pdlp", globals())
_solvers_pb2 = LazyModule("ortools.pdlp.solvers_pb2", "_solvers_pb2", globals())
_solve_log_pb2 = LazyModule("ortools.pdlp.solve_log_pb2", "_solve_log_pb2", globals())

# Relative tolerance on PDLP's primal and dual residuals and its duality gap. At 1e-7 every
# captured grid fit came out with a violation under 1% of what the rounding absorbs and an
# objective within 1e-8 (relative) of Clarabel's; at 1e-6 10-20% faster, with violations up to
# 12% of that limit and objective gaps up to 1e-7 (2026-12-07, the captured block fits).
TOL = 1e-7
ITERATIONS = 100_000  # at most; the captured grid fits took 128-7,296 (a fit past it goes to Clarabel)
_OPTIMAL = "TERMINATION_REASON_OPTIMAL"


def program(problem: NodeQP):
    """``problem`` as PDLP's QuadraticProgram: its Hessian is diagonal, as PDLP requires."""
    qp = _pdlp.QuadraticProgram()
    qp.objective_vector = np.asarray(problem.cost, dtype=np.float64)
    qp.set_objective_matrix_diagonal(np.asarray(problem.hess, dtype=np.float64))
    qp.constraint_matrix = problem.a.tocsc()
    qp.constraint_lower_bounds = np.asarray(problem.lo, dtype=np.float64)
    qp.constraint_upper_bounds = np.asarray(problem.hi, dtype=np.float64)
    qp.variable_lower_bounds = np.asarray(problem.lower, dtype=np.float64)
    qp.variable_upper_bounds = np.asarray(problem.upper, dtype=np.float64)
    return qp


def parameters(tol: float = TOL, iterations: int = ITERATIONS):
    """One thread, ``tol`` on every criterion, an iteration limit and no time limit."""
    params = _solvers_pb2.PrimalDualHybridGradientParams()
    criteria = params.termination_criteria
    criteria.simple_optimality_criteria.eps_optimal_relative = tol
    criteria.simple_optimality_criteria.eps_optimal_absolute = tol
    criteria.iteration_limit = iterations
    params.num_threads = 1  # nodes run in parallel processes; one thread each
    params.verbosity_level = 0
    return params


def solve_pdlp(problem: NodeQP, form=None, tol: float = TOL, iterations: int = ITERATIONS):
    """(ok, x, seconds, status): PDLP's answer to ``problem`` (every variable, auxiliary sums
    too); ok when PDLP reports an optimum at ``tol``. ``form`` is not used: PDLP takes the
    problem as stated, its Hessian diagonal."""
    t0 = time.perf_counter()
    result = _pdlp.primal_dual_hybrid_gradient(program(problem), parameters(tol, iterations))
    seconds = time.perf_counter() - t0
    log = result.solve_log
    reason = _solve_log_pb2.TerminationReason.Name(log.termination_reason)
    ok = reason == _OPTIMAL
    x = np.asarray(result.primal_solution, dtype=np.float64) if ok else None
    return ok, x, seconds, f"{reason} ({log.iteration_count} iterations)"
