"""One spec's budget account without running its mechanism: check, public facts, statement, ledger.

Here, below both `dpspec budget`'s summary and programs, because a program accounts each of its
specs exactly as `dpspec budget` accounts one; the summary then prints programs, one way.
Public facts (swapping's largest stratum, say) are computed from the data only when the
mechanism's budget depends on them.
"""

from __future__ import annotations

from dpspec import ir
from dpspec.budget import ledger as ledger_mod
from dpspec.check.checker import check
from dpspec.lazy import LazyModule

# imported on first use: at import they would load numpy, pandas, pyarrow with this module
_data = LazyModule("dpspec.check.data", "_data", globals())


def spec_ledger(spec: ir.Spec, data=None, currencies: bool = True):
    """(checked, facts, statement, flavor, ledger) for one spec, without running the mechanism."""
    checked = check(spec)
    mech, params = checked.mechanism, checked.params
    facts = {}
    if getattr(mech, "needs_data_for_budget", False):
        if data is None:
            data, _ = _data.load_data(spec)
        facts = mech.public_facts(spec, params, data)
    statement = mech.budget(spec, params, facts)
    flavor = mech.flavor(spec, params)
    return checked, facts, statement, flavor, ledger_mod.build(spec, flavor, statement, currencies)
