"""Interleaved outer passes on two histograms solved jointly (production's DHCH run:
L2PlusRounder_interleaved on the stacked household and unit histograms,
sequential_optimizers.py:461-506 of das_decennial, with the ordering of dhch_strategies.py:1741-1765).

Why a module of its own: multipass.py works on one table's cells; here every outer pass fits the
queries it names of either table in one least-squares problem with the cross constraints
(joint_problem.joint_qp), rounds both tables in one problem with the cross constraints (joint_round.py,
as production rounds the stacked histograms), and then fixes exactly, for every later outer pass, the answers of the margins its rounding pass
names, of either table (production: `outerPassNum_{n}Constr_...` equality constraints).

Each outer pass has one estimation and one rounding pass, as production's DHCH ordering has: with
one estimation pass the pass tolerance (opt_tol) has nothing to hold, so none is stated. A pass
without a solution is a MechanismError: production's interleaved optimizer has no failsafe.
"""

from __future__ import annotations

from typing import Mapping, Sequence

import attrs

from dpspec.api import LazyModule, SpecError, MechanismError

from ..measurement.allocation import JOINT_MARK, query_name

np = LazyModule("numpy", "np", globals())  # `dpspec check` builds plans without numpy arrays
# imported on first use: at import they would load numpy, pandas, scipy, pyarrow with this module
_multipass = LazyModule("dpspec_topdown.estimation.multipass", "_multipass", globals())
_highs = LazyModule("dpspec_topdown.estimation.highs", "_highs", globals())
_decompose = LazyModule("dpspec_topdown.estimation.decompose", "_decompose", globals())
_forced_zeros = LazyModule("dpspec_topdown.estimation.forced_zeros", "_forced_zeros", globals())
_joint_problem = LazyModule("dpspec_topdown.estimation.joint_problem", "_joint_problem", globals())
_merge_columns = LazyModule("dpspec_topdown.estimation.merge_columns", "_merge_columns", globals())
_redundant = LazyModule("dpspec_topdown.estimation.redundant", "_redundant", globals())
_joint_round = LazyModule("dpspec_topdown.estimation.joint_round", "_joint_round", globals())


@attrs.frozen
class JointOuter:
    """One outer pass: indices of the measured queries it fits (main table, joint table) and the
    margins its rounding pass names: (name, groups, n_groups) of each table."""

    fit_main: tuple
    fit_joint: tuple
    round_main: tuple
    round_joint: tuple


def joint_pass_plan(
    level: str, spec: Mapping, schema, alloc, schema_j, alloc_j, name: str, groups: bool = True
) -> tuple:
    """A level's outer passes (JointOuter, in order) from query keys, a joint table's keyed
    (JOINT_MARK + name, *factors); SpecError naming the level and the query if wrong."""
    outer = spec.get("outer")
    if not outer or spec.get("estimation") or spec.get("rounding") or spec.get("constrain_to"):
        raise SpecError(
            f"passes at level {level!r}: with a joint table, give the passes as outer_passes (one "
            "estimation and one rounding pass each, naming either table's queries)"
        )
    measured = [qb.query for qb in alloc.for_level(level)]
    measured_j = [qb.query for qb in alloc_j.for_level(level)] if alloc_j is not None else []
    mark = JOINT_MARK + name
    out, seen = [], set()

    def split(keys, what, n):
        main, joint = [], []
        for key in keys:
            if key[:1] == (mark,):
                joint.append(schema_j.canonical(key[1:]))
            elif key[:1] and str(key[0]).startswith(JOINT_MARK):
                raise SpecError(
                    f"outer pass {n} at level {level!r}: {what} names table {key[0][1:]!r}, which is "
                    f"not the joint table {name!r}"
                )
            else:
                main.append(schema.canonical(key))
        return main, joint

    for n, o in enumerate(outer, 1):
        if o.get("constrain_to") or len(o.get("estimation", ())) != 1 or len(o.get("rounding", ())) != 1:
            raise SpecError(
                f"outer pass {n} at level {level!r}: with a joint table each outer pass has one "
                "estimation pass and one rounding pass (and no constrain_to)"
            )
        fit_main, fit_joint = split(o["estimation"][0], "its estimation pass", n)
        idx_main, idx_joint = [], []
        for keys, have, idx, table in ((fit_main, measured, idx_main, None), (fit_joint, measured_j, idx_joint, name)):
            for key in keys:
                label = query_name(key) if table is None else f"{table}: {query_name(key)}"
                if (table, key) in seen:
                    raise SpecError(f"outer passes at level {level!r}: query {label!r} is in two passes")
                seen.add((table, key))
                if key in have:
                    idx.append(have.index(key))
        if not idx_main and not idx_joint:
            raise SpecError(f"outer pass {n} at level {level!r} fits no query measured at that level")
        round_main, round_joint = split(o["rounding"][0], "its rounding pass", n)
        out.append(
            JointOuter(
                tuple(idx_main),
                tuple(idx_joint),
                tuple(
                    (query_name(k), schema.groups(k) if groups else None, schema.marginal_size(k)) for k in round_main
                ),
                tuple(
                    (query_name(k), schema_j.groups(k) if groups else None, schema_j.marginal_size(k))
                    for k in round_joint
                ),
            )
        )
    left = [query_name(k) for i, k in enumerate(measured) if (None, k) not in seen]
    left += [f"{name}: {query_name(k)}" for k in measured_j if (name, k) not in seen]
    if left:
        raise SpecError(f"outer passes at level {level!r} leave measured queries unfitted: {', '.join(left)}")
    return tuple(out)


def _margins(margins, vc, vcell, n_children, values):
    """(key, n_keys, value) of each named margin over one table's variables."""
    out = []
    for _, groups, n_groups in margins:
        key, n_keys = _multipass._margin_key(vc, vcell, groups, n_groups, n_children)
        out.append((key, n_keys, np.bincount(key, weights=values, minlength=n_keys)))
    return out


def _ranges(margins, vc, vcell, n_children, x) -> list:
    """Each named margin kept within floor/ceil of its fit ``x``: (key, n_keys, lo, hi)."""
    return [
        (k, m, np.floor(v + _highs._INT_TOL), np.ceil(v - _highs._INT_TOL))
        for k, m, v in _margins(margins, vc, vcell, n_children, x)
    ]


def _exact(fixed) -> list:
    return [(k, m, v, v) for k, m, v in fixed]


def solve_joint_interleaved(
    task_a, queries_a, task_b, queries_b, cross: Sequence, plan: Sequence[JointOuter], var_a, var_b
):
    """(counts_a, counts_b, qp_seconds, round_seconds, used_milp, n_variables): both tables'
    integer children histograms over ``var_a`` / ``var_b``, the outer passes in turn."""

    _, vc_a, va_a, vcell_a = var_a
    _, vc_b, va_b, vcell_b = var_b
    nc = task_a.n_children
    fixed_a, fixed_b = [], []
    qp_seconds = round_seconds = 0.0
    milp, n_var = False, 0
    counts_a = counts_b = None
    for n, o in enumerate(plan, 1):
        sub_a = attrs.evolve(task_a, measurements=tuple(task_a.measurements[i] for i in o.fit_main))
        sub_b = attrs.evolve(task_b, measurements=tuple(task_b.measurements[i] for i in o.fit_joint))
        # the fit is over the variables the fixed margins leave free (forced_zeros.unforced)
        pv_a, pf_a, live_a = _forced_zeros.unforced(var_a, fixed_a)
        pv_b, pf_b, live_b = _forced_zeros.unforced(var_b, fixed_b)
        fit_cross = cross
        if fixed_a or fixed_b:  # what the fixed margins imply is not stated again (redundant.py)
            sub_a = _redundant.drop_implied(sub_a, pv_a[1], pv_a[3], pf_a)
            sub_b = _redundant.drop_implied(sub_b, pv_b[1], pv_b[3], pf_b)
            fit_cross = [c for c in cross if not _redundant.cross_implied(c, pv_a, pv_b, pf_a, pf_b, nc)]
        problem, offset = _joint_problem.joint_qp(
            sub_a, [queries_a[i] for i in o.fit_main], sub_b, [queries_b[i] for i in o.fit_joint], fit_cross, pv_a, pv_b
        )
        problem = _multipass._with_rows(_multipass._with_rows(problem, pf_a, 0.0), pf_b, 0.0, offset)
        n_var = max(n_var, int(problem.n_var))
        # a pass that fits one table: identical cells without objective as one variable (merge_columns.py)
        reduced, expand = (
            _merge_columns.merge_free_duplicates(problem) if not (o.fit_main and o.fit_joint) else (problem, None)
        )
        x, _, sec, _, status = _decompose.solve_pass(
            reduced, bool(fixed_a or fixed_b)
        )  # by parts in later outer passes
        if expand is not None:
            x = expand(x)
        qp_seconds += sec
        if x is None:
            raise MechanismError(
                f"joint outer pass {n}: the least-squares fit has no solution that keeps the earlier "
                f"outer passes' answers and the cross constraints ({status}; no failsafe in "
                "interleaved passes)"
            )
        xa = _forced_zeros.spread(np.maximum(x[: pv_a[1].size], 0.0), live_a)
        xb = _forced_zeros.spread(np.maximum(x[offset : offset + pv_b[1].size], 0.0), live_b)
        counts_a, counts_b, sec, used = _joint_round.round_jointly(
            task_a,
            xa,
            var_a,
            task_b,
            xb,
            var_b,
            cross,
            _exact(fixed_a) + _ranges(o.round_main, vc_a, vcell_a, nc, xa),
            _exact(fixed_b) + _ranges(o.round_joint, vc_b, vcell_b, nc, xb),
            fail=False,
        )
        if counts_a is None:
            raise MechanismError(
                f"joint outer pass {n}: the rounding has no solution that keeps the earlier outer "
                "passes' answers and the cross constraints (no failsafe in interleaved passes)"
            )
        round_seconds += sec
        milp |= used
        fixed_a += _margins(o.round_main, vc_a, vcell_a, nc, counts_a)
        fixed_b += _margins(o.round_joint, vc_b, vcell_b, nc, counts_b)
    return counts_a, counts_b, qp_seconds, round_seconds, milp, n_var
