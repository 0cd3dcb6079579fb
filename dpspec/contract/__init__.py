"""Types of the plugin contract that are not mechanisms: what a plugin hands back to the core.

`Section` (a report section a plugin contributes through `dpspec_report_sections`) lives here,
with the contract, rather than in `dpspec.report`, so that the plugin manager and plugins
depend on the contract alone and the core stays one-way (report sits at the end of the
pipeline; nothing earlier imports it). `dpspec.report.Section` remains as a re-export.
"""
from __future__ import annotations

from typing import Any

import attrs


@attrs.frozen
class Section:
    """A report section a mechanism plugin contributes.

    html: markup for the HTML report (screened: anything that would run a script or fetch from
    another host is withheld and the data shown instead); markdown: the same for the Markdown
    report; data: JSON-ready figures for report.json. internal: computed against the
    confidential data, so only the internal report shows it. Escape your own values.
    """

    title: str
    html: str = ""
    markdown: str = ""
    data: Any = attrs.Factory(dict)
    internal: bool = False
