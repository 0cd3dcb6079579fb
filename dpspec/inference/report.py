"""The inference report: HTML (inline SVG figure), Markdown and JSON, written as one output set.

It uses the compile reports' conventions: templates from the package only, HTML autoescaped
under the same Content-Security-Policy (nothing leaves the page), Markdown escaped by the same
finalize hook, every label in the figure escaped.
"""

from __future__ import annotations

import json
import math
import os

import pandas as pd
from markupsafe import Markup, escape

from dpspec._version import __version__
from dpspec.budget import format_figure
from dpspec.report.bidi import neutral
from dpspec.report.render import html_env, markdown_env
from dpspec.report.svg import COLORS
from dpspec.schemas import versioned
from dpspec.publish.report_set import spec_entry, write_report_set
from dpspec.check.data import file_sha256

MAX_ROWS_IN_FIGURE = 60


def _num(v) -> str:
    return "—" if v is None or (isinstance(v, float) and math.isnan(v)) else format_figure(float(v))


def interval_figure(title: str, cells: list[dict]) -> Markup:
    """One row per cell on its own scale: 95% (thin) and 90% (thick) intervals, the median (dot),
    the post-processed value (red diamond) and the noisy estimate (open circle)."""
    cells = cells[:MAX_ROWS_IN_FIGURE]
    row, top, left, right, width = 24, 44, 190, 70, 680
    plot = width - left - right
    height = top + row * len(cells) + 16
    out = [
        f'<svg role="img" class="figure" viewBox="0 0 {width} {height}" width="{width}" height="{height}" '
        f'aria-label="{escape(title)}"><title>{escape(title)}</title>',
        f'<text x="0" y="16" font-size="13" font-weight="600">{escape(title)}</text>',
        f'<text x="0" y="34" font-size="11" fill="#444">own scale per row · thin 95%, thick 90% interval · '
        f'dot median · <tspan fill="{COLORS["bad"]}">◆ post-processed</tspan> · ○ noisy estimate</text>',
    ]
    for i, c in enumerate(cells):
        y = top + i * row + row / 2
        values = [c.get(k) for k in ("q025", "q975", "post_processed", "noisy_estimate")]
        finite = [float(v) for v in values if v is not None and math.isfinite(float(v))]
        lo, hi = (min(finite), max(finite)) if finite else (0.0, 1.0)
        if hi - lo < 1e-9:
            lo, hi = lo - 1, hi + 1
        pad = (hi - lo) * 0.05
        lo, hi = lo - pad, hi + pad

        def x(v):
            return left + plot * (float(v) - lo) / (hi - lo)

        out.append(
            f'<text x="{left - 8}" y="{y + 4:.1f}" font-size="11" text-anchor="end">{escape(_clip(c["cell"]))}</text>'
        )
        out.append(f'<line x1="{left}" x2="{left + plot}" y1="{y:.1f}" y2="{y:.1f}" stroke="#e3e6ea"/>')
        if c.get("q025") is not None and math.isfinite(c["q025"]):
            out.append(
                f'<line x1="{x(c["q025"]):.1f}" x2="{x(c["q975"]):.1f}" y1="{y:.1f}" y2="{y:.1f}" '
                f'stroke="{COLORS["neutral"]}" stroke-width="2"/>'
            )
            out.append(
                f'<line x1="{x(c["q05"]):.1f}" x2="{x(c["q95"]):.1f}" y1="{y:.1f}" y2="{y:.1f}" '
                f'stroke="{COLORS["neutral"]}" stroke-width="6"/>'
            )
            out.append(f'<circle cx="{x(c["median"]):.1f}" cy="{y:.1f}" r="3.5" fill="#fff" stroke="#111"/>')
        if c.get("noisy_estimate") is not None:
            out.append(f'<circle cx="{x(c["noisy_estimate"]):.1f}" cy="{y:.1f}" r="5" fill="none" stroke="#111"/>')
        if c.get("post_processed") is not None:
            px, s = x(c["post_processed"]), 5
            out.append(
                f'<path d="M{px:.1f},{y - s:.1f} L{px + s:.1f},{y:.1f} L{px:.1f},{y + s:.1f} '
                f'L{px - s:.1f},{y:.1f} Z" fill="{COLORS["bad"]}"/>'
            )
        out.append(f'<text x="{left}" y="{y - 5:.1f}" font-size="9" fill="#666">{escape(_num(lo + pad))}</text>')
        out.append(
            f'<text x="{left + plot + 4}" y="{y + 4:.1f}" font-size="9" fill="#666">{escape(_num(hi - pad))}</text>'
        )
    out.append("</svg>")
    return Markup("".join(out))


def _clip(text: str, n: int = 30) -> str:
    text = str(text)
    return text if len(text) <= n else text[: n - 1] + "…"


def build_model(result) -> dict:
    """What the templates show: the JSON result plus the figure and plain statements."""
    data = result.to_json()
    contracted = data["contractions"]
    statements = []
    if not contracted.get("checked"):
        statements.append(
            "The release holds no post-processed or synthetic values for these cells, so there is nothing to compare."
        )
    else:
        nz, nb = len(contracted["zeros"]), len(contracted["bounds"])
        what = "rate" if result.rate else "count"
        statements.append(
            f"The release (post-processed or synthetic) published {nz} {what}{'s' if nz != 1 else ''} as 0 where the 95% credible interval "
            f"also holds larger values (several plausible values contracted into 0)"
            if nz
            else "No cell was contracted to 0: wherever the release published 0, the posterior agrees."
        )
        if nb:
            statements.append(
                f"The release pushed {nb} cell{'s' if nb != 1 else ''} to its upper bound "
                f"({'1' if result.rate else 'the public total'}) although the 95% interval holds smaller values."
            )
    rate, log10 = data["acceptance_rate_estimate"], data["log10_acceptance_rate_estimate"]
    return neutral(
        {
            "r": data,
            "version": __version__,
            "statements": statements,
            "power": power_model(data.get("power")),
            "acceptance_text": f"{rate:.2g}" if rate > 1e-6 else f"10^{log10:.1f}",
            "figure": interval_figure(
                f"Posterior intervals against post-processed values: {result.target}", data["cells"]
            ),
            "figure_truncated": len(data["cells"]) > MAX_ROWS_IN_FIGURE,
        }
    )


def power_model(p: dict | None) -> dict | None:
    """`--power`'s result as the reports print it: the terminal's six decimals (a power and a size
    that differ in the fifth are Theorem 15's point), the optional fields only when given."""
    if p is None:
        return None

    def six(v):
        return "—" if v is None else f"{float(v):.6f}"

    def prob(v):
        return "—" if v is None else f"{float(v):.4g}"

    side = {"greater": ">", "less": "<"}.get(p.get("direction"))
    test = (
        f"The level-{float(p['level']):g} test of {(p.get('column') + ' ') if p.get('column') else ''}{p['cell']}'s "
        f"count = {int(p['null']):,}"
        + (f" against {side} {int(p['null']):,}" if side else "")
        + f", its power at {int(p['alternative']):,}"
    )
    return {
        "theorem": p.get("theorem", "seed 2, Theorem 15"),
        "test": test,
        "rows": [
            {
                "on": "the release Y",
                "value": f"{int(p['released']):,}",
                "power": six(p["power_release"]),
                "size": six(p["size_release"]),
                "reject": prob(p.get("reject_probability_release")),
            },
            {
                "on": "f(Y), the release post-processed with Z",
                "value": f"{int(p['post_processed_value']):,}",
                "power": six(p["power_post_processed"]),
                "size": six(p["size_post_processed"]),
                "reject": prob(p.get("reject_probability_post_processed")),
            },
        ],
        "post_processing": p["post_processing"],
        "note": p["note"],
        "rate": None if p.get("rate") is None else f"{float(p['rate']):.6g}",
    }


def report_files(result, with_draws: bool = True) -> dict:
    """{kind: (filename, content)}: report.html, report.md, result.json and (a table) draws.csv,
    the unweighted draws."""

    model = build_model(result)
    files = {
        "html": ("report.html", html_env().get_template("infer.html.j2").render(m=model)),
        "markdown": ("report.md", markdown_env().get_template("infer.md.j2").render(m=model)),
        "json": (
            "result.json",
            json.dumps(versioned("inference", model["r"]), indent=2, sort_keys=True, default=float) + "\n",
        ),
    }
    if with_draws:
        files["draws"] = ("draws.csv", pd.DataFrame(result.samples, columns=[c["cell"] for c in model["r"]["cells"]]))
    return files


def write_report(result, outdir: str, spec, release_dir: str, with_draws: bool = True) -> dict:
    """Write the report files and a manifest into outdir as one output set; returns {kind: filename}."""

    release = {
        "path": os.path.basename(os.path.normpath(release_dir)),  # the release's manifest pins every table
        "manifest_sha256": file_sha256(os.path.join(release_dir, "manifest.json")),
    }
    fields = {
        "spec": spec_entry(spec),
        "release": release,
        "target": result.target,
        "method": result.method,
        "seed": result.seed,
    }  # draws are post-processing: a known seed reproduces them, it exposes nothing
    return write_report_set(outdir, "infer", report_files(result, with_draws), fields)
