"""The everyday release: a table of noisy counts, sums, means and quantiles over declared keys.

The most common differential privacy release (OpenDP, Tumult Analytics, PipelineDP and
SmartNoise each make it in a few lines), stated in dpspec's five blocks: every declared cell is
released (empty ones with their noise), clipping bounds are declared, the budget is split by
exact shares, and every number carries its noise scale and a 95% interval from the exact law.
"""

from __future__ import annotations

from dpspec.api import hookimpl, LazyModule

from .plugin import Aggregate

# imported on first use: at import they would load markupsafe with this module
_report = LazyModule("dpspec_aggregate.report", "_report", globals())

DPSPEC_API = "1.2"
__version__ = Aggregate.version


@hookimpl
def dpspec_mechanisms():
    return [Aggregate()]


@hookimpl
def dpspec_report_sections(result):
    return _report.sections(result)
