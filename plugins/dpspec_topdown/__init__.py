"""TopDown (2020 US Census) as a dpspec mechanism plugin: exact discrete Gaussian noise on
hierarchical marginals, then top-down nonnegative integer estimation on a real solver (HiGHS).

Where to start reading: `plugin.py` (the Mechanism and its hooks), `design.py` (the design a spec
declares, parsed once) and `run/topdown.py` (`run_topdown(records, design, ctx)`, a run end to
end). The stages are sub-packages: `geography/` (the hierarchy and the spine), `measurement/`
(the allocation, the histogram, each node's noise), `estimation/` (the least-squares fits,
passes and rounding), `release/` (the tables and what the reports show, the budget section's
hook among them); `params/` reads the settings from the plain values the core resolved against
the schema and checks them together, each problem at the path of what it is about.
"""

from __future__ import annotations

from dpspec.api import hookimpl

from .plugin import TopDown, __version__  # noqa: F401
from .release.budget_section import dpspec_report_budget  # noqa: F401 - the hook, registered with this module


@hookimpl
def dpspec_mechanisms():
    return [TopDown()]
