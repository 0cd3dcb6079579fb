"""SafeTab (2020 Detailed DHC-A and DHC-B) as a dpspec mechanism plugin: counts by detailed
race/ethnicity group at every geography level, each table's detail chosen adaptively, exact
discrete Gaussian noise under zCDP."""

from __future__ import annotations

from dpspec.api import hookimpl, LazyModule

from .plugin import SafeTab, __version__  # noqa: F401

# imported on first use: at import they would load markupsafe with this module
_report = LazyModule("dpspec_safetab.report", "_report", globals())


@hookimpl
def dpspec_mechanisms():
    return [SafeTab()]


@hookimpl
def dpspec_report_sections(result):
    return _report.sections(result)
