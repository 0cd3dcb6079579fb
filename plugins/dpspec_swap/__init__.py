"""Permutation swapping (PSA) as a dpspec mechanism plugin, registered as `swap`.

Hooks: the mechanism, the `dpspec swap ...` commands, and a report section that plots the
budget against the swap rate for the actual stratification and for alternative ones.
"""

from __future__ import annotations

from dpspec.api import hookimpl, LazyModule
from dpspec_swap.cli import swap_group
from dpspec_swap.plugin import PermutationSwapping, __version__

# imported on first use: at import they would load markupsafe with this module
_report = LazyModule("dpspec_swap.report", "_report", globals())

__all__ = ["PermutationSwapping", "__version__"]


@hookimpl
def dpspec_mechanisms():
    return [PermutationSwapping()]


@hookimpl
def dpspec_cli(group):
    group.add_command(swap_group)


@hookimpl
def dpspec_report_sections(result):
    return _report.sections(result)
