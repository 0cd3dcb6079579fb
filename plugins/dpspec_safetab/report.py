"""Report sections for SafeTab releases.

Public: the adaptive design and its table-choice rule in plain words, and for every
(table, geography level, iteration level) the noise of each table size: functions of the
public parameters only (rho, stage fraction, fan-out, thresholds), never of a run's noise, so
the public report is the same for every run. Internal: the realized error by level and table
size over the compile's runs, computed against the confidential counts.
"""

from __future__ import annotations

import math

from markupsafe import Markup

from dpspec.api import Section

from .design import variable_values


def _cells(detail: str, variables: dict) -> int:
    if detail == "total":
        return 1
    return math.prod(len(variables.get(v, ())) or 1 for v in detail.split("*"))


def expected_error_rows(facts: dict, variables: dict) -> list[dict]:
    """Per (table, geography, level, detail): noise sd per cell, E|error| per cell and the sd of
    the group total when it is the sum of the detail's cells; all from public parameters."""
    rows = []
    for f in facts.get("design", []):
        s2 = f["sigma2"]["stage 2"]
        for detail in facts["ladders"][f["table"]]:
            m = _cells(detail, variables)
            rows.append(
                {
                    "table": f["table"],
                    "geography": f["geography"],
                    "level": f["level"],
                    "detail": detail,
                    "cells": m,
                    "sd_per_cell": math.sqrt(s2),
                    "mean_abs_error_per_cell": math.sqrt(2 * s2 / math.pi),
                    "sd_of_total": math.sqrt(m * s2),
                    "stage1_sd": math.sqrt(f["sigma2"]["stage 1"]) if "stage 1" in f["sigma2"] else None,
                    "suppression_threshold": f.get("suppression_threshold") if detail == "total" else None,
                }
            )
        if "suppression_threshold_detailed_only" in f:  # detailed-only groups: a total with the whole rho
            s2 = f["sigma2"]["detailed-only total"]
            rows.append(
                {
                    "table": f["table"],
                    "geography": f["geography"],
                    "level": f["level"],
                    "detail": "total (detailed-only groups)",
                    "cells": 1,
                    "sd_per_cell": math.sqrt(s2),
                    "mean_abs_error_per_cell": math.sqrt(2 * s2 / math.pi),
                    "sd_of_total": math.sqrt(s2),
                    "stage1_sd": None,
                    "suppression_threshold": f["suppression_threshold_detailed_only"],
                }
            )
    return rows


def _design_text(facts: dict) -> list[str]:
    ladders = "; ".join(f"{t}: " + " < ".join(d) for t, d in facts["ladders"].items())
    out = [
        "Counts are published for every geography unit and population group (detailed race or "
        "ethnicity group, called a characteristic iteration). A person (household) counts in every group "
        "their codes map to, at most the fan-out k of them, which sets the noise: each count gets exact "
        "discrete Gaussian noise of variance k / (2 rho).",
        f"How detailed each group's table is depends on the group's size. The ladders are {ladders}.",
    ]
    if facts.get("two_stage"):
        out.append(
            f"Stage 1 measures each group's total with {facts['stage1_fraction']} of its budget. That noisy "
            "total is compared with the thresholds T1 < T2 < T3 of its geography and iteration level: below "
            "T1 the group gets its total only, from Tk up to the next threshold the k-th table of the ladder. "
            "Stage 2 measures the chosen table with the rest of the budget. The stage-1 totals are never "
            "published and are used only for this choice. Detailed-only groups get a total with the whole "
            "budget."
        )
    else:
        out.append(
            "The detail of each table is chosen from totals already published elsewhere (SafeTab-P's "
            "population-group totals): a group gets the k-th table of the ladder when its published total is "
            "at least Tk. Groups that were not published are not tabulated. The whole budget goes to the "
            "chosen table; the guarantee is conditioned on the published totals."
        )
    out.append(
        "A group broken down by a table gets no separate total: its total, and its counts by the table's "
        "first variable (sex, where the table crosses sex with age), are the sums of its published cells."
    )
    if facts.get("zero_suppression"):
        out.append(
            f"At {', '.join(facts['suppress_at'])}, a group that gets its total only is published only if that "
            f"total exceeds a threshold set so that a true zero is dropped with probability "
            f"{facts['zero_suppression']} (the threshold is a function of the noise, in the table below)."
        )
    return out


def _fmt(v, digits=2) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.{digits}f}"
    return str(v)


def _table(headers, rows) -> tuple[Markup, str]:
    html = [
        Markup("<table><thead><tr>"),
        *(Markup("<th>{}</th>").format(h) for h in headers),
        Markup("</tr></thead><tbody>"),
    ]
    md = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    for r in rows:
        html.append(Markup("<tr>") + Markup("").join(Markup("<td>{}</td>").format(c) for c in r) + Markup("</tr>"))
        md.append("| " + " | ".join(str(c).replace("|", "\\|") for c in r) + " |")
    html.append(Markup("</tbody></table>"))
    return Markup("").join(html), "\n".join(md)


def public_section(facts: dict, variables: dict) -> Section:
    rows = expected_error_rows(facts, variables)
    text = _design_text(facts)
    headers = [
        "table",
        "geography",
        "iteration level",
        "detail",
        "cells",
        "noise sd per cell",
        "mean abs error per cell",
        "sd of the total",
        "stage-1 sd",
        "suppressed at or below",
    ]
    cells = [
        [
            r["table"],
            r["geography"],
            r["level"],
            r["detail"],
            r["cells"],
            _fmt(r["sd_per_cell"]),
            _fmt(r["mean_abs_error_per_cell"]),
            _fmt(r["sd_of_total"]),
            _fmt(r["stage1_sd"]),
            _fmt(r["suppression_threshold"]),
        ]
        for r in rows
    ]
    t_html, t_md = _table(headers, cells)
    fan = facts.get("fanout", {})
    fan_text = "; ".join(
        f"{k}: k = {v['fanout_used']} (h_r = {v['h_race']}, h_e = {v['h_ethnicity']}, r = {v['max_race_codes']})"
        for k, v in fan.items()
    )
    html = Markup("").join(Markup("<p>{}</p>").format(p) for p in text)
    html += Markup("<p>Fan-out per iteration level and geography granularity: {}.</p>").format(fan_text)
    html += (
        Markup(
            "<p>Expected error of each table size (a function of the public parameters only; "
            "which groups got which detail is in the release):</p>"
        )
        + t_html
    )
    md = "\n\n".join(text) + f"\n\nFan-out per iteration level and geography granularity: {fan_text}.\n\n" + t_md + "\n"
    return Section(
        "SafeTab: adaptive design and expected error per table size",
        str(html),
        md,
        {"design": text, "fanout": fan, "expected_error": rows},
    )


def internal_section(utility: dict) -> Section | None:
    """Realized error per (level, table size); computed against the confidential counts."""
    rows = utility.get("error_by_level_and_detail")
    if not rows:
        return None
    headers = [
        "table",
        "geography",
        "iteration level",
        "detail",
        "row",
        "cells measured",
        "mean abs error",
        "RMSE",
        "suppressed",
        "of them true zeros",
        "true zeros",
    ]
    cells = [
        [
            r["table"],
            r["geography"],
            r["level"],
            r["detail"],
            r["role"],
            r["cells"],
            _fmt(r["mean_absolute_error"]),
            _fmt(r["rmse"]),
            r["suppressed"],
            r["suppressed_true_zero"],
            r["true_zero"],
        ]
        for r in rows
    ]
    t_html, t_md = _table(headers, cells)
    intro = (
        f"Realized error against the confidential counts over {utility.get('runs', 1)} run(s), by geography level, "
        "iteration level and table size ('sum of cells' rows are group totals obtained by adding a table's cells)."
    )
    return Section(
        "SafeTab: realized error by level and table size",
        str(Markup("<p>{}</p>").format(intro) + t_html),
        intro + "\n\n" + t_md + "\n",
        rows,
        internal=True,
    )


def sections(result) -> list:
    mech = getattr(result, "mechanism", None)
    if getattr(mech, "name", None) != "safetab":
        return []
    facts = result.release.facts
    variables = variable_values(result.spec, result.checked.params, mech.design(result.spec, result.checked.params))
    out = [public_section(facts, variables)]
    internal = internal_section(result.utility or {})
    if internal is not None:
        out.append(internal)
    return out


__all__ = ["sections", "expected_error_rows"]
