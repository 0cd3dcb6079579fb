"""Whether a spec's declared budget bounds hold, located at each bound: the gate `check` and the editor share.

A bound is a claim the spec publishes (`budget epsilon <= 16`); a spec that checks while its
mechanism achieves more states a false guarantee, so `dpspec check` and the language server
compute it. Public facts read from the data (swapping's largest stratum) are kept per data file
state and mechanism block, so an editor recomputes them only when the data or the block changes.
"""

from __future__ import annotations

import math
import os

from dpspec import ir
from dpspec.check.sources import input_paths
from dpspec.errors import Diagnostic, SpecError
from dpspec.budget import ledger as ledger_mod
from dpspec.check.checker import check
from dpspec.budget.budget_report import budget_summary
from dpspec.lazy import LazyModule

# imported on first use: at import they would load numpy, pandas, pyarrow with this module
_data = LazyModule("dpspec.check.data", "_data", globals())

_FACTS: dict = {}  # (data stamps, mechanism, parameters, invariants) -> public facts; a few entries
_KEEP = 8


def _stamps(spec: ir.Spec) -> tuple:
    """(path, size, mtime) of each local data source; a source that cannot be stated gives no cache key."""
    out = []
    for path in input_paths(spec)[1 if spec.path else 0 :]:
        try:
            st = os.stat(path)
        except OSError:
            return ()
        out.append((os.path.abspath(path), st.st_size, st.st_mtime_ns))
    return tuple(out)


def _facts(spec: ir.Spec, checked):
    """The mechanism's public facts, from the cache when the data and the block are unchanged."""
    mech, params = checked.mechanism, checked.params
    if not getattr(mech, "needs_data_for_budget", False):
        return {}
    stamps = _stamps(spec)
    key = (stamps, mech.name, repr(params), tuple(q.describe() for q in spec.invariants)) if stamps else None
    if key is not None and key in _FACTS:
        return _FACTS[key]

    data, _ = _data.load_data(spec)
    facts = mech.public_facts(spec, params, data)
    if key is not None:
        while len(_FACTS) >= _KEEP:
            _FACTS.pop(next(iter(_FACTS)))
        _FACTS[key] = facts
    return facts


def _figure(value: float) -> str:
    return "inf" if math.isinf(value) else ("undefined" if math.isnan(value) else f"{float(value):.6g}")


def bound_problems(spec: ir.Spec) -> list[Diagnostic]:
    """One located diagnostic per declared bound that does not hold (empty when all hold).

    Raises the SpecError of a spec that does not check, and DataError when the budget needs
    the data and it cannot be read (the caller decides whether that fails)."""

    if spec.program is not None:
        where = {b.describe(): b.loc for b in spec.budgets}
        out = []
        for b in budget_summary(spec)["bounds"]:
            if not b["holds"]:
                loc = where.get(b["bound"])
                out.append(
                    Diagnostic(
                        f"the declared bound '{b['bound']}' does not hold: the program achieves {b['achieved']}",
                        loc.line if loc else None,
                        loc.column if loc else None,
                    )
                )
        return out
    checked = check(spec)
    mech, params = checked.mechanism, checked.params
    statement = mech.budget(spec, params, _facts(spec, checked))
    ledger = ledger_mod.build(spec, mech.flavor(spec, params), statement, currencies=False)
    out = []
    for b in ledger.bounds:
        if b.holds:
            continue
        loc = b.bound.loc
        out.append(
            Diagnostic(
                f"the declared bound '{b.bound.describe()}' does not hold: the mechanism achieves "
                f"{_figure(b.achieved)} ({b.currency})",
                loc.line if loc else None,
                loc.column if loc else None,
            )
        )
    return out


def require_bounds(spec: ir.Spec) -> None:
    """Raise a SpecError (rule `bound-exceeded`) at each declared bound the mechanism does not meet."""
    problems = bound_problems(spec)
    if problems:
        error = SpecError(problems, spec.path, spec.text)
        error.rule = "bound-exceeded"
        raise error
