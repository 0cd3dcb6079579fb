"""TopDown (2020 US Census) as a dpspec mechanism plugin: exact discrete Gaussian noise on
hierarchical marginals, then top-down nonnegative integer estimation on a real solver (HiGHS)."""
from __future__ import annotations

from dpspec.api import hookimpl

from .plugin import TopDown, __version__  # noqa: F401
from .report_budget import dpspec_report_budget  # noqa: F401 - the hook, registered with this module


@hookimpl
def dpspec_mechanisms():
    return [TopDown()]
