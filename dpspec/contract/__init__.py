"""Types of the plugin contract that are not mechanisms: what a plugin hands back to the core.

`Section` (a report section a plugin contributes through `dpspec_report_sections`) and
`BudgetSection` (how a mechanism spends its budget, through `dpspec_report_budget`) live here,
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


@attrs.frozen
class BudgetSection:
    """How a mechanism spends its budget, shown inside the report's budget section, before the
    ledger (API 1.6; from the `dpspec_report_budget` hook, given the spec alone, so a report
    without a release shows it too).

    data: JSON-ready figures: report.json's and `dpspec compile --json`'s `budget.spending`.
    markdown, html: Jinja templates the report renders with `data` as `d`, in its own
    environments (every value escaped for Markdown or HTML; the filter `fmt` for figures), so the
    plugin's words and keys live in the plugin and the core's templates know neither. The
    rendered markup passes the same safety screen as a `Section`'s.
    """

    data: Any
    markdown: str = ""
    html: str = ""
