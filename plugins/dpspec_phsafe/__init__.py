"""PHSafe (the 2020 Supplemental DHC, S-DHC) as a dpspec mechanism plugin: person and unit
counts of households at the nation and state, households truncated to tau persons, exact
discrete Gaussian noise under zCDP."""

from __future__ import annotations

from dpspec.api import hookimpl, LazyModule

from .plugin import PHSafe, __version__  # noqa: F401

# imported on first use: at import they would load markupsafe with this module
_report = LazyModule("dpspec_phsafe.report", "_report", globals())

DPSPEC_API = "1.1"


@hookimpl
def dpspec_mechanisms():
    return [PHSafe()]


@hookimpl
def dpspec_report_sections(result):
    return _report.sections(result)
