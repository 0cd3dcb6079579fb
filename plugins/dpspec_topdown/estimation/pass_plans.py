"""A level's passes as a plan (which queries each estimation and rounding pass fits, what later
passes hold, the tolerance), read from the spec's pass settings: what `dpspec check` validates
and the run (multipass.py) solves. A module of its own because it needs no array library, so
checking a spec loads neither numpy nor scipy."""

from __future__ import annotations

from fractions import Fraction
from typing import Mapping

import attrs

from dpspec.api import Diagnostic, SpecError

from ..measurement.allocation import query_name


@attrs.frozen
class PassPlan:
    """How one level's nodes are fitted and rounded."""

    estimation: tuple = ()  # of tuples of indices into the level's measured queries
    tolerance: float = 0.1  # |answer - earlier pass's answer| for earlier passes' queries
    rounding: tuple = ()  # of tuples of (name, groups, n_groups) margins, one tuple per pass
    # per estimation pass, the (groups, n_groups) margins later passes hold within the tolerance
    # (production's constrain-to ordering); None: the pass's measured queries
    constrain: tuple | None = None
    # interleaved outer passes (production's L2PlusRounderWithBackup_interleaved): PassPlans
    # solved in turn, each fitted and rounded, its last rounding pass's answers then fixed
    outer: tuple = ()
    # production's opt_tol (l2_dataIndep_npass_optimizer.py:40-45): each later pass holds the
    # earlier answers within the LP-optimal tolerance plus `tolerance` (the slack)
    opt_tol: bool = False

    @property
    def multipass_fit(self) -> bool:
        return len(self.estimation) > 1

    @property
    def n_estimation(self) -> int:
        return sum(len(o.estimation) for o in self.outer) if self.outer else len(self.estimation)

    @property
    def n_rounding(self) -> int:
        return sum(len(o.rounding) for o in self.outer) if self.outer else len(self.rounding)


def pass_plan(level: str, spec: Mapping, schema, alloc, groups: bool = True) -> PassPlan:
    """A level's PassPlan from query names; SpecError naming the level and query if wrong."""
    if spec.get("outer"):
        if spec.get("estimation") or spec.get("rounding") or spec.get("constrain_to"):
            raise SpecError(
                f"level {level!r} has outer passes and estimation/rounding passes of its own: "
                "give its passes inside the outer passes"
            )
        subs = []
        for n, o in enumerate(spec["outer"]):
            try:
                subs.append(
                    pass_plan(
                        level,
                        {
                            **o,
                            "tolerance": o.get("tolerance", spec.get("tolerance", Fraction(1, 10))),
                            "tolerance_type": spec.get("tolerance_type"),
                            "complete": False,
                        },
                        schema,
                        alloc,
                        groups,
                    )
                )
            except SpecError as exc:  # its path is the n-th outer pass's
                raise SpecError([attrs.evolve(d, path=("outer", n, *d.path)) for d in exc.diagnostics]) from None
        return PassPlan(tolerance=subs[0].tolerance, outer=tuple(subs))
    measured = [qb.query for qb in alloc.for_level(level)]
    if not measured:
        raise SpecError(f"passes: level {level!r} is not measured, so it has no passes")
    # a pass may name a query the level does not measure (production's orderings are shared by
    # the levels): it is not fitted, but its answer is held for later passes like the others
    estimation, named, seen = [], [], set()
    for n, group in enumerate(spec.get("estimation", ())):
        idx, keys = [], []
        for q in group:
            key = schema.canonical(q)
            if key in seen:
                raise SpecError(f"estimation passes at level {level!r}: query {query_name(q)!r} is in two passes")
            seen.add(key)
            keys.append(key)
            if key in measured:
                idx.append(measured.index(key))
        if not idx:
            raise SpecError(
                f"estimation pass {n + 1} at level {level!r} fits no query measured at that level "
                f"({', '.join(query_name(k) for k in keys)}; measured: "
                f"{', '.join(query_name(k) for k in measured)})"
            )
        estimation.append(tuple(idx))
        named.append(keys)
    rest = tuple(i for i, key in enumerate(measured) if key not in seen)
    if estimation and rest and spec.get("complete", True):  # an outer pass fits only what it names
        estimation.append(rest)
    held = spec.get("constrain_to")
    if held is not None and len(held) > max(len(estimation) - 1, 0):
        raise SpecError(
            Diagnostic(
                f"constrain_to at level {level!r}: {len(held)} lists for the "
                f"{max(len(estimation) - 1, 0)} estimation passes that have a later pass",
                path=("constrain_to",),
            )
        )
    lists = [[schema.canonical(q) for q in group] for group in (held or [])] + named[len(held or []) :]
    constrain = tuple(
        tuple((schema.groups(k) if groups else None, schema.marginal_size(k)) for k in keys) for keys in lists
    )
    if held is None and all(set(keys) <= set(measured) for keys in named):
        constrain = None  # the default: exactly the fitted queries
    rounding = tuple(
        tuple(
            (query_name(schema.canonical(q)), schema.groups(q) if groups else None, schema.marginal_size(q))
            for q in group
        )
        for group in spec.get("rounding", ())
    )
    tolerance = float(spec.get("tolerance", Fraction(1, 10)))
    if tolerance < 0:
        raise SpecError(f"pass tolerance at level {level!r} must not be negative")
    return PassPlan(tuple(estimation), tolerance, rounding, constrain, opt_tol=spec.get("tolerance_type") == "opt_tol")
