"""`opendp`: an OpenDP measurement, named as a Python entry point, run on one column of the spec's data.

The spec names `module:function`; the function returns an OpenDP `Measurement`. That is the
user's own code: dpspec imports and calls it only when `dpspec compile` runs (never on check,
budget or audit, which read the stated budget). At compile the measurement's input domain and
metric are checked against the column's type and the spec's unit, its privacy measure against
the premetric, and its privacy map at the unit's distance (OpenDP's own claim) against the
stated budget; a mismatch or a claim above the statement stops the compile and publishes nothing.
"""

from __future__ import annotations

from dpspec.api import hookimpl, LazyModule

from .plugin import OpenDPMeasurement

# imported on first use: at import they would load markupsafe with this module
_report = LazyModule("dpspec_opendp.report", "_report", globals())

__version__ = "0.1.0"


@hookimpl
def dpspec_mechanisms():
    return [OpenDPMeasurement()]


@hookimpl
def dpspec_report_sections(result):
    return _report.sections(result)
