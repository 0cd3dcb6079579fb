"""`tumult`: Tumult Analytics queries, named as a Python entry point, evaluated in a Session in a second interpreter.

The spec names `module:function`; the function returns Tumult Analytics 0.21 queries. Tumult
cannot live in dpspec's environment (it pins pandas < 2 and pyspark < 3.6), so dpspec writes the
table to a temporary Parquet file and runs `runner.py` (which never imports dpspec) in a second
Python (`$DPSPEC_TUMULT_PYTHON`, or a `.venv-tumult` beside the spec or above it). That is the
user's own code: it runs only when `dpspec compile` runs (never on check, budget or audit, which
read the stated budget). The Session is built by dpspec from the spec: its budget from the
premetric and the stated figures, its protected change from the unit, and the queries' KeySet
from the declared keys; Tumult's own accounting is reported beside dpspec's.
"""

from __future__ import annotations

from dpspec.api import hookimpl, LazyModule

from .plugin import TumultQuery

# imported on first use: at import they would load markupsafe with this module
_report = LazyModule("dpspec_tumult.report", "_report", globals())

__version__ = "0.1.0"


@hookimpl
def dpspec_mechanisms():
    return [TumultQuery()]


@hookimpl
def dpspec_report_sections(result):
    return _report.sections(result)
