"""Permutation swapping (PSA) as a dpspec mechanism plugin, registered as `swap`.

Hooks: the mechanism, the `dpspec swap ...` commands, and a report section that plots the
budget against the swap rate for the actual stratification and for alternative ones.
"""

from __future__ import annotations

from dpspec.api import hookimpl
from dpspec_swap.plugin import PermutationSwapping, __version__

__all__ = ["PermutationSwapping", "__version__"]


@hookimpl
def dpspec_mechanisms():
    return [PermutationSwapping()]


@hookimpl
def dpspec_cli(group):
    from dpspec_swap.cli import swap_group

    group.add_command(swap_group)


@hookimpl
def dpspec_report_sections(result):
    from dpspec_swap.report import sections

    return sections(result)
