"""The sweep's output set: a grid CSV and a public report (budget and expected error only), and an
internal report with the realized errors, which were computed against the confidential data.

The public model is built first and the internal one extends it; nothing realized is ever put
into the public model (tested). HTML is rendered with the report templates' escaping, CSS and
content-security policy, and figures are inline SVG (`dpspec.report.svg`).
"""

from __future__ import annotations

import json
import math
import os

from dpspec import ir
from dpspec._version import __version__
from dpspec.budget.premetrics import json_number
from dpspec.lazy import LazyModule
from dpspec.report.svg import Box, box_chart, xy_chart

# heavy libraries, imported on first use
pd = LazyModule("pandas", "pd", globals())

# imported on first use: at import they would load numpy, pandas, pyarrow, jinja2 with this module
_runner = LazyModule("dpspec.sweep.runner", "_runner", globals())
_render = LazyModule("dpspec.report.render", "_render", globals())

FILES = {
    "grid_csv": "sweep.csv",
    "expected_csv": "expected-error.csv",
    "json": "report.json",
    "html": "report.html",
    "markdown": "report.md",
    "internal_json": "internal-report.json",
    "internal_html": "internal-report.html",
    "internal_markdown": "internal-report.md",
    "realized_csv": "realized-errors-internal.csv",
}
MAX_FIGURES = 12  # tables drawn; every table is in the CSV and the JSON

PUBLIC_NOTE = (
    "For publication. For every point of the grid: the budget the mechanism achieves, in the spec's "
    "currency and in one common currency, and the error the mechanism promises from its public "
    "parameters alone. Nothing computed against the confidential data appears here."
)
INTERNAL_NOTE = (
    "Not for publication. Besides everything in the public report it contains the realized errors "
    "of every run against the confidential data."
)
DATA_DEPENDENT = (
    "Choosing the mechanism's parameters by these realized errors is a data-dependent design: the "
    "confidential data then decide the parameters, and the parameters are published with the release, so "
    "the choice itself leaks information that no budget above accounts for (the seeds' argument: only a "
    "mechanism whose parameters are fixed before it sees the data has the stated budget; the design "
    "process as a whole is the mechanism that counts). If you choose parameters this way, the spec must "
    'say so with the line  tuned on confidential "how they were chosen"  and the audit will flag it '
    "(data-dependent-design). Choosing by the budget and the expected error in the public report is not "
    "data-dependent."
)


def _num(value) -> str:
    return ir.format_number(value) if value is not None else ""


def _f(value):
    return json_number(float(value)) if value is not None else None


def _error_rows(expected) -> list[dict]:
    """The public report's rows of the `ExpectedError`s: each as it is written, with its sd."""
    return [
        {
            **ir.to_jsonable(e),
            "variance": _f(e.variance),
            "sd": _f(math.sqrt(e.variance)) if e.variance is not None and e.variance >= 0 else None,
        }
        for e in (expected or [])
    ]


def public_model(sweep) -> dict:
    spec = sweep.spec
    mech = spec.mechanism.name
    points = []
    for p in sweep.points:
        common = p.common or {}
        points.append(
            {
                "point": p.index,
                "values": {k: _num(v) for k, v in p.values.items()},
                "status": p.status,
                "budget": p.budget,
                "budget_text": p.budget_text,
                "common_epsilon": _f(common.get("epsilon")),
                "common_delta": _f(common.get("delta")),
                "common_method": common.get("method"),
                "bounds_hold": p.bounds_hold,
                "expected_error": _error_rows(p.expected) if p.status == "ok" else [],
            }
        )
    return {
        "title": f"Sweep of {spec.title or os.path.basename(spec.path or 'spec')}",
        "audience": "public",
        "audience_note": PUBLIC_NOTE,
        "provenance": {
            "dpspec_version": __version__,
            "spec_file": os.path.basename(spec.path or "<text>"),
            "spec_sha256": ir.spec_sha256(spec),
            "engine": sweep.engine,
        },
        "mechanism": mech,
        "axes": [{"name": a.name, "values": [_num(v) for v in a.values]} for a in sweep.axes],
        "balanced": [
            k for k in (sweep.points[0].values if sweep.points else {}) if k not in {a.name for a in sweep.axes}
        ],
        "runs": sweep.runs,
        "currency": {
            "spec": f"{spec.premetric.kind} under {spec.unit.relation} on {spec.unit.table}",
            "common": sweep.currency,
        },
        "points": points,
        "failed": [p.index for p in sweep.points if p.status != "ok"],
    }


def _realized_summary(sweep) -> list[dict]:
    """Mean and spread over the runs per (point, table, size class)."""
    rows = [{"point": p.index, **r} for p in sweep.points for r in p.realized]
    if not rows:
        return []
    frame = pd.DataFrame(rows)
    frame["level"] = frame["level"].fillna("")
    grouped = frame.groupby(["point", "table", "level", "size"], sort=False)
    out = []
    for (point, table, level, size), g in grouped:
        mape = g["mape_percent"].dropna()
        out.append(
            {
                "point": int(point),
                "table": table,
                "level": level or None,
                "size": size,
                "cells": int(g["cells"].iloc[0]),
                "runs": int(len(g)),
                "mae_mean": _f(g["mae"].mean()),
                "mae_sd": _f(g["mae"].std(ddof=1)) if len(g) > 1 else None,
                "mape_mean": _f(mape.mean()) if len(mape) else None,
                "mape_sd": _f(mape.std(ddof=1)) if len(mape) > 1 else None,
                "share_off_mean": _f(g["share_off"].mean()),
            }
        )
    return out


def internal_model(sweep, public: dict) -> dict:
    summary = _realized_summary(sweep)
    budgets = {p["point"]: p["common_epsilon"] for p in public["points"]}
    fronts = {}
    for table in dict.fromkeys(r["table"] for r in summary):
        rows = [r for r in summary if r["table"] == table and r["size"] == "all"]
        measure = "mape_mean" if all(r["mape_mean"] is not None for r in rows) else "mae_mean"
        best = _runner.pareto([(r["point"], budgets.get(r["point"]), r[measure]) for r in rows])
        fronts[table] = {"measure": measure, "points": sorted(best)}
    return {
        **public,
        "audience": "internal",
        "audience_note": INTERNAL_NOTE,
        "data_dependent_design": DATA_DEPENDENT,
        "off_by": sweep.off_by,
        "realized": summary,
        "pareto": fronts,
        "failures": [
            {"point": p.index, "values": {k: _num(v) for k, v in p.values.items()}, "error": p.error}
            for p in sweep.points
            if p.status != "ok"
        ],
    }


# ---- figures ---------------------------------------------------------------------------------


def _x_axis(model: dict) -> tuple[str, dict]:
    """The budget in the common currency when it varies over the grid, else the first axis."""
    budgets = {p["point"]: p["common_epsilon"] for p in model["points"]}
    if len({b for b in budgets.values() if b is not None}) > 1:
        return "epsilon (common currency)", budgets
    axis = model["axes"][0]["name"]
    return axis, {p["point"]: float(__import__("fractions").Fraction(p["values"][axis])) for p in model["points"]}


def public_figures(model: dict) -> list:
    label, xs = _x_axis(model)
    tables = list(dict.fromkeys(e["table"] for p in model["points"] for e in p["expected_error"]))[:MAX_FIGURES]
    series = []
    for table in tables:
        pts = [(xs[p["point"]], e["sd"]) for p in model["points"] for e in p["expected_error"] if e["table"] == table]
        series.append((table, [x for x, _ in pts], [y for _, y in pts]))
    return [
        xy_chart(
            f"Expected error (standard deviation) against {label}",
            series[i : i + 4],
            x_label=label,
            y_label="standard deviation",
        )
        for i in range(0, len(series), 4)
    ]


def internal_figures(model: dict) -> list:
    label, xs = _x_axis(model)
    out = []
    all_rows = [r for r in model["realized"] if r["size"] == "all"]
    levels = list(dict.fromkeys(r["level"] for r in all_rows))
    for level in levels:
        tables = list(dict.fromkeys(r["table"] for r in all_rows if r["level"] == level))[:4]
        series, marked = [], set()
        for i, table in enumerate(tables):
            measure = model["pareto"][table]["measure"]
            rows = [r for r in all_rows if r["table"] == table]
            series.append(
                (
                    f"{table} ({'MAPE %' if measure == 'mape_mean' else 'MAE'})",
                    [xs[r["point"]] for r in rows],
                    [r[measure] for r in rows],
                )
            )
            marked |= {(i, j) for j, r in enumerate(rows) if r["point"] in model["pareto"][table]["points"]}
        out.append(
            xy_chart(
                f"Realized error against {label}, level {level or '(none)'} (squares: Pareto points)",
                series,
                x_label=label,
                y_label="mean over runs",
                marked=marked,
            )
        )
    return out


def boxplots(model: dict, per_run: list[dict]) -> list:
    out = []
    tables = list(dict.fromkeys(r["table"] for r in per_run if r["size"] == "all"))[:MAX_FIGURES]
    for table in tables:
        rows = [r for r in per_run if r["table"] == table and r["size"] == "all"]
        use_mape = all(r["mape_percent"] is not None for r in rows)
        key = "mape_percent" if use_mape else "mae"
        boxes = []
        for p in model["points"]:
            values = [r[key] for r in rows if r["point"] == p["point"]]
            if values:
                boxes.append(Box.of(", ".join(p["values"].values()), values))
        out.append(
            box_chart(
                f"{table}: {'MAPE (%)' if use_mape else 'mean absolute error'} across runs, by point",
                boxes,
                orientation="vertical",
                axis="MAPE (%)" if use_mape else "MAE",
            )
        )
    return out


# ---- rendering -------------------------------------------------------------------------------


def render(model: dict, figures: list, kind: str) -> str:
    env = _render.html_env() if kind == "html" else _render.markdown_env()
    return env.get_template(f"sweep.{'html' if kind == 'html' else 'md'}.j2").render(m=model, figures=figures)


def frames(sweep, public: dict):
    """(grid CSV frame, expected-error CSV frame, realized-errors CSV frame)."""
    grid = pd.DataFrame(
        [
            {
                "point": p["point"],
                **p["values"],
                "status": p["status"],
                "budget": p["budget_text"],
                "common_epsilon": p["common_epsilon"],
                "common_delta": p["common_delta"],
                "conversion": p["common_method"],
                "bounds_hold": p["bounds_hold"],
            }
            for p in public["points"]
        ]
    )
    expected = pd.DataFrame(
        [{"point": p["point"], **p["values"], **e} for p in public["points"] for e in p["expected_error"]],
        columns=[
            "point",
            *(public["points"][0]["values"] if public["points"] else ()),
            "table",
            "level",
            "query",
            "variance",
            "sd",
            "of",
        ],
    )
    realized = pd.DataFrame(
        [{"point": p.index, **{k: _num(v) for k, v in p.values.items()}, **r} for p in sweep.points for r in p.realized]
    )
    return grid, expected, realized


def files(sweep) -> dict:
    """{kind: (filename, text or DataFrame)} for `write_report_set`."""
    public = public_model(sweep)
    out = {}
    grid, expected, realized = frames(sweep, public)
    out["grid_csv"] = (FILES["grid_csv"], grid)
    out["expected_csv"] = (FILES["expected_csv"], expected)
    out["json"] = (FILES["json"], json.dumps(public, indent=2, sort_keys=True, allow_nan=False) + "\n")
    figs = public_figures(public)
    out["html"] = (FILES["html"], render(public, figs, "html"))
    out["markdown"] = (FILES["markdown"], render(public, [], "md"))
    if sweep.runs or any(p.status != "ok" for p in sweep.points):
        internal = internal_model(sweep, public)
        per_run = [{"point": p.index, **r} for p in sweep.points for r in p.realized]
        ifigs = figs + internal_figures(internal) + boxplots(internal, per_run)
        out["internal_json"] = (
            FILES["internal_json"],
            json.dumps(internal, indent=2, sort_keys=True, allow_nan=False) + "\n",
        )
        out["internal_html"] = (FILES["internal_html"], render(internal, ifigs, "html"))
        out["internal_markdown"] = (FILES["internal_markdown"], render(internal, [], "md"))
        if len(realized):
            out["realized_csv"] = (FILES["realized_csv"], realized)
    return out
