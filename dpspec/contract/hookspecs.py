"""The plugin contract: every hook a dpspec plugin may implement, in one place.

Built-in mechanisms and audit rules use exactly these hooks through the `dpspec` entry-point
group, the same path a third party uses; the core never imports a mechanism by name.
"""

from __future__ import annotations

import pluggy

PROJECT = "dpspec"
hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)


@hookspec
def dpspec_mechanisms():
    """Return a list of `dpspec.contract.mechanism.Mechanism` instances this plugin provides.

    Besides the required methods, a mechanism may implement the optional `neighbours(spec,
    params)`: worst-case neighbouring miniature datasets (`dpspec.contract.mechanism.NeighbourPair`) for
    `dpspec verify`; without it the verifier builds pairs from the domain.
    """


@hookspec
def dpspec_audit_rules():
    """Return a list of `dpspec.audit.Rule` objects (each with an id, a severity and a check)."""


@hookspec
def dpspec_report_sections(result):
    """Return a list of `dpspec.contract.Section` to add to the reports of a compiled `result`."""


@hookspec(firstresult=True)
def dpspec_report_budget(spec, mechanism, params):
    """Return a `dpspec.contract.BudgetSection` saying how `mechanism` (with its resolved `params`)
    spends the budget of `spec`, or None (another plugin's mechanism, or nothing to say). From
    the spec alone, never the data; the first section returned is the report's (API 1.6)."""


@hookspec
def dpspec_cli(group):
    """Add subcommands to the `dpspec` click group."""
